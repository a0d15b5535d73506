"""Diversity figure: JS divergence of diagonal Gaussians (against numerical integration), pairwise mean, probes."""

from __future__ import annotations

import math

import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from deploy.export.rollouts import make_env
from robot_grpo.scale.diversity import collapsed_members, gaussian_js, mean_pairwise_js, pairwise_js, probe_states

LN2 = math.log(2.0)


def js_by_integration(mu_p: float, sd_p: float, mu_q: float, sd_q: float) -> float:
    """1-D JS(P, Q) in nats by the trapezoidal rule on a fine grid (the reference)."""
    x = np.linspace(min(mu_p, mu_q) - 12 * max(sd_p, sd_q), max(mu_p, mu_q) + 12 * max(sd_p, sd_q), 200_001)
    p = np.exp(-0.5 * ((x - mu_p) / sd_p) ** 2) / (sd_p * math.sqrt(2 * math.pi))
    q = np.exp(-0.5 * ((x - mu_q) / sd_q) ** 2) / (sd_q * math.sqrt(2 * math.pi))
    m = 0.5 * (p + q)
    with np.errstate(divide="ignore", invalid="ignore"):
        kl_pm = np.where(p > 0, p * np.log(p / m), 0.0)
        kl_qm = np.where(q > 0, q * np.log(q / m), 0.0)
    return float(0.5 * np.trapezoid(kl_pm, x) + 0.5 * np.trapezoid(kl_qm, x))


@pytest.mark.parametrize(("mu_q", "sd_q"), [(0.5, 1.0), (1.0, 0.5), (2.0, 2.0), (0.0, 3.0)])
def test_monte_carlo_js_matches_integration_in_one_dimension(mu_q, sd_q):
    estimate = gaussian_js(np.array([[0.0]]), np.log([1.0]), np.array([[mu_q]]), np.log([sd_q]), n_samples=20_000)[0]
    assert estimate == pytest.approx(js_by_integration(0.0, 1.0, mu_q, sd_q), abs=0.01)


def test_identical_laws_are_0_and_disjoint_laws_are_ln2():
    mean = np.array([[0.1, -0.2], [0.3, 0.0]])
    log_std = np.log([0.5, 0.5])
    np.testing.assert_allclose(gaussian_js(mean, log_std, mean, log_std), 0.0, atol=1e-12)
    far = gaussian_js(mean, np.log([1e-3, 1e-3]), mean + 10.0, np.log([1e-3, 1e-3]))
    np.testing.assert_allclose(far, LN2, atol=1e-9)


def test_js_is_symmetric_per_state():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    np.testing.assert_allclose(
        gaussian_js(a, np.log([0.3, 0.5, 1.0]), b, np.log([1.0, 0.2, 0.4])),
        gaussian_js(b, np.log([1.0, 0.2, 0.4]), a, np.log([0.3, 0.5, 1.0])),
        rtol=1e-12,
    )


def test_pairwise_mean_over_three_members():
    log_std = np.log([0.5])
    means = [np.zeros((2, 1)), np.zeros((2, 1)), np.full((2, 1), 1.0)]
    # pairs (0,1) identical, (0,2) and (1,2) the same positive value v: the mean is 2v / 3
    v = gaussian_js(means[0], log_std, means[2], log_std).mean()
    assert mean_pairwise_js(means, [log_std] * 3) == pytest.approx(2 * v / 3)
    assert mean_pairwise_js(means[:1], [log_std]) == 0.0


def test_probe_states_are_fixed_and_cover_steps_into_episodes():
    env = make_env("PointReach-v0", {"delay": 1})
    a, b = probe_states(env, 12, seed=7), probe_states(env, 12, seed=7)
    np.testing.assert_array_equal(a, b)
    obs_dim = sum(v.size for v in env.observation_space.sample().values())
    assert a.shape == (12, obs_dim) and a.dtype == np.float32
    assert not np.array_equal(a[0, :3], a[5, :3])  # state 5 is 5 random steps (4 applied: delay 1) from its start


def test_pairwise_js_is_a_symmetric_matrix_of_the_pair_means():
    rng = np.random.default_rng(1)
    means = [rng.normal(size=(4, 2)) for _ in range(3)]
    log_stds = [np.log([0.5, 0.4])] * 3
    matrix = pairwise_js(means, log_stds)
    assert matrix.shape == (3, 3) and np.all(np.diag(matrix) == 0.0)
    np.testing.assert_allclose(matrix, matrix.T)
    assert matrix[0, 2] == pytest.approx(gaussian_js(means[0], log_stds[0], means[2], log_stds[2]).mean())
    assert mean_pairwise_js(means, log_stds) == pytest.approx(matrix[np.triu_indices(3, k=1)].mean())


def test_the_weaker_member_of_a_collapsed_pair_is_named_once():
    # members 0 and 1 sit 0.0001 apart, 2 and 3 0.0005 apart, every other pair 0.01
    js = np.full((4, 4), 0.01)
    np.fill_diagonal(js, 0.0)
    js[0, 1] = js[1, 0] = 0.0001
    js[2, 3] = js[3, 2] = 0.0005
    scores = [0.5, 0.9, 0.3, 0.3]
    # 0 is weaker than 1; 2 and 3 tie: the later index is the copy
    assert collapsed_members(js, scores, 0.001) == [(0, 1, 0.0001), (3, 2, 0.0005)]
    assert collapsed_members(js, scores, 0.0003) == [(0, 1, 0.0001)]
    assert collapsed_members(js, scores, 0.00005) == []


def test_a_member_close_to_two_others_is_named_by_its_closest_pair_only():
    js = np.array([[0.0, 0.0001, 0.0002], [0.0001, 0.0, 0.01], [0.0002, 0.01, 0.0]])
    # 0-1 first: 0 (weaker) is the copy; 0-2 involves 0 again and is skipped
    assert collapsed_members(js, [0.1, 0.2, 0.3], 0.001) == [(0, 1, 0.0001)]
