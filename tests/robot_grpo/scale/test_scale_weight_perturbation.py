"""A copied member is perturbed just far enough: its law ends at least the threshold from the donor's and not much
further, its exploration noise is the donor's, and the same seed perturbs alike."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from gymnasium import spaces

from robot_grpo.policies import GoalGaussianPolicy
from robot_grpo.scale.diversity import gaussian_js
from robot_grpo.scale.weight_perturbation import perturb_until_distinct

OBS_DIM, ACT_DIM = 6, 2


def policy() -> GoalGaussianPolicy:
    th.manual_seed(0)
    obs = spaces.Box(-1.0, 1.0, (OBS_DIM,), np.float32)
    act = spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32)
    return GoalGaussianPolicy(obs, act, lambda _: 1e-3, net_arch=[16])


def law(p: GoalGaussianPolicy, probe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with th.no_grad():
        mean, log_std = p.distribution_params(th.as_tensor(probe))
    return mean.double().numpy(), log_std.detach().double().numpy()


PROBE = np.random.default_rng(0).uniform(-1, 1, (32, OBS_DIM)).astype(np.float32)


@pytest.mark.parametrize("threshold", [1e-4, 1e-3, 1e-2])
def test_the_copy_ends_just_past_the_threshold(threshold):
    donor = policy()
    copy = policy()
    donor_law = law(donor, PROBE)
    moved = perturb_until_distinct(copy, PROBE, threshold, seed=5)
    js = gaussian_js(*law(copy, PROBE), *donor_law).mean()
    assert js == pytest.approx(moved.js_to_donor) and js >= threshold
    assert js < 1.2 * threshold  # bisected down to the threshold, not a doubling's overshoot (up to 4x in JS)
    th.testing.assert_close(copy.log_std, donor.log_std)  # the exploration noise is the donor's


def test_the_same_seed_perturbs_alike_and_another_seed_differently():
    a, b, c = policy(), policy(), policy()
    perturb_until_distinct(a, PROBE, 1e-3, seed=1)
    perturb_until_distinct(b, PROBE, 1e-3, seed=1)
    perturb_until_distinct(c, PROBE, 1e-3, seed=2)
    for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert th.equal(pa, pb), name
    assert any(not th.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters(), strict=True))


def test_a_threshold_outside_0_to_ln2_is_refused():
    with pytest.raises(ValueError, match=r"min_pair_js must be in \(0, ln 2\) nats"):
        perturb_until_distinct(policy(), PROBE, 0.7, seed=0)
