"""Make a copied member distinct: perturb its policy's weights until its action law is ``min_pair_js`` away.

After PBT's exploit a member holds another member's weights: the two are one policy twice, which a population
that is meant to keep its diversity must not keep. :func:`perturb_until_distinct` adds seeded Gaussian noise to the
mean network's weights, each tensor's noise scaled by that tensor's own standard deviation (so biases and wide
layers move alike), starting small and doubling the scale until the Jensen-Shannon divergence from the donor's
law on the probe states (:mod:`robot_grpo.scale.diversity`) reaches the threshold, then bisecting between the last
scale below and the first above it. The smallest scale found is kept: the copy stays as close to the donor (and
its score) as the threshold allows. (A doubling alone overshoots: on the hard reach copies landed 2-9x past a
0.001-nat threshold; with the bisection they land within 4% of it.)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch as th

from robot_grpo.policies import GoalGaussianPolicy
from robot_grpo.scale.diversity import gaussian_js

FIRST_NOISE_SCALE = 0.01  # noise std as a share of each weight tensor's std, on the first try
NOISE_SCALE_GROWTH = 2.0  # multiplied after every try that stays below the threshold
MAX_TRIES = 12  # 0.01 * 2^11 = 20 tensor stds: far past any law a threshold below ln 2 needs
BISECTIONS = 6  # halvings of the bracket [scale below, scale above]: the kept scale is within 1/64 of it


class Perturbation(NamedTuple):
    """The perturbation that was kept."""

    noise_scale: float  # noise std as a share of each tensor's std
    js_to_donor: float  # nats, mean over the probe states
    tries: int


def _law(policy: GoalGaussianPolicy, probe: th.Tensor) -> tuple[np.ndarray, np.ndarray]:
    with th.no_grad():
        mean, log_std = policy.distribution_params(probe)
    return mean.cpu().double().numpy(), log_std.detach().cpu().double().numpy()


def perturb_until_distinct(
    policy: GoalGaussianPolicy, probe_states: np.ndarray, min_pair_js: float, seed: int
) -> Perturbation:
    """Perturb ``policy``'s mean network in place until its law is at least ``min_pair_js`` from what it was.

    :param policy: the copied member's policy (its weights are the donor's).
    :param probe_states: flat observations ``[S, obs_dim]`` the laws are compared on.
    :param min_pair_js: nats (> 0, < ln 2).
    :param seed: seed of the noise (the member's own, so a rerun perturbs alike).
    :return: the kept perturbation; the last (largest) one when none reached the threshold in ``MAX_TRIES``.
    """
    if not 0.0 < min_pair_js < np.log(2.0):
        raise ValueError(f"min_pair_js must be in (0, ln 2) nats, got {min_pair_js}")
    probe = th.as_tensor(probe_states, dtype=th.float32, device=policy.device)
    donor_mean, donor_log_std = _law(policy, probe)
    weights = {name: p.detach().clone() for name, p in policy.mean_net.named_parameters()}
    generator = th.Generator().manual_seed(int(seed))
    noise = {name: th.randn(w.shape, generator=generator).to(w.device) for name, w in weights.items()}

    def js_at(scale: float) -> float:
        with th.no_grad():
            for name, param in policy.mean_net.named_parameters():
                spread = weights[name].std() if weights[name].numel() > 1 else weights[name].abs()
                param.copy_(weights[name] + scale * spread.clamp(min=1e-3) * noise[name])
        mean, log_std = _law(policy, probe)
        return float(gaussian_js(mean, log_std, donor_mean, donor_log_std).mean())

    below, above, js, tries = 0.0, FIRST_NOISE_SCALE, js_at(FIRST_NOISE_SCALE), 1
    while js < min_pair_js and tries < MAX_TRIES:
        below, above = above, above * NOISE_SCALE_GROWTH
        js, tries = js_at(above), tries + 1
    if js < min_pair_js:
        return Perturbation(above, js, tries)  # the largest scale tried: as far as this search goes
    best = (above, js)
    for _ in range(BISECTIONS):
        middle = 0.5 * (below + above)
        value = js_at(middle)
        tries += 1
        if value >= min_pair_js:
            above, best = middle, (middle, value)
        else:
            below = middle
    js_at(best[0])  # leave the policy at the kept scale
    return Perturbation(best[0], best[1], tries)
