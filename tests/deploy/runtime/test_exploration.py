"""Opt-in exploration: mean + Gaussian noise with (a multiple of) the policy's std, reproducible, validated."""

from types import SimpleNamespace

import numpy as np
import pytest

from deploy.runtime.exploration import DEFAULT_STD_SCALE, GaussianExploration, line_exploration, policy_std

ACTION_DIM = 4


def constant_policy(obs: np.ndarray) -> np.ndarray:
    return np.full((obs.shape[0], ACTION_DIM), 0.25, dtype=np.float32)


def test_noise_has_the_given_std_around_the_mean():
    std = np.array([0.1, 0.2, 0.4, 0.0])
    explore = GaussianExploration(constant_policy, std, ACTION_DIM, seed=0)
    actions = np.concatenate([explore(np.zeros((1, 24), np.float32)) for _ in range(20_000)])
    assert actions.dtype == np.float32
    np.testing.assert_allclose(actions.mean(axis=0), 0.25, atol=0.01)
    # Sample std over 20k draws is within ~1% of the true std (standard error std / sqrt(2n) ~ 0.5%).
    np.testing.assert_allclose(actions.std(axis=0), std, rtol=0.03, atol=1e-7)


def test_same_seed_same_noise():
    a = GaussianExploration(constant_policy, 0.3, ACTION_DIM, seed=7)
    b = GaussianExploration(constant_policy, 0.3, ACTION_DIM, seed=7)
    obs = np.zeros((1, 24), np.float32)
    for _ in range(5):
        np.testing.assert_array_equal(a(obs), b(obs))


@pytest.mark.parametrize("std", [-0.1, float("nan"), float("inf")])
def test_bad_std_is_refused(std):
    with pytest.raises(ValueError, match="exploration std must be finite and >= 0"):
        GaussianExploration(constant_policy, std, ACTION_DIM)


class FakePackage:
    folder = "pkg"
    contract = SimpleNamespace(action_dim=ACTION_DIM)

    def __init__(self, anchor):
        self._anchor = anchor

    def load_ewc_anchor(self):
        return self._anchor


def test_policy_std_is_exp_log_std():
    log_std = np.array([-0.5, -1.0, 0.0, -2.0])
    std = policy_std(FakePackage({"params": {"log_std": log_std}, "fisher": {}}))
    np.testing.assert_allclose(std, np.exp(log_std))


def test_policy_std_without_anchor_says_how_to_fix():
    with pytest.raises(ValueError, match="re-export it with robot-grpo export"):
        policy_std(FakePackage(None))


def test_the_line_explores_with_a_multiple_of_the_policy_std():
    log_std = np.log(np.array([0.2, 0.4, 0.8, 0.1]))
    package = FakePackage({"params": {"log_std": log_std}, "fisher": {}})
    explore = line_exploration(constant_policy, package, std_scale=0.5, seed=0)
    np.testing.assert_allclose(explore.std, 0.5 * np.exp(log_std))
    np.testing.assert_allclose(line_exploration(constant_policy, package).std, DEFAULT_STD_SCALE * np.exp(log_std))


@pytest.mark.parametrize("scale", [0.0, -0.5, float("nan"), float("inf")])
def test_a_line_scale_that_is_not_a_positive_number_is_refused(scale):
    package = FakePackage({"params": {"log_std": np.zeros(4)}, "fisher": {}})
    with pytest.raises(ValueError, match="explore_std_scale must be a finite number > 0"):
        line_exploration(constant_policy, package, std_scale=scale)


@pytest.mark.parametrize("shape", [(3,), (4, 1), (8,)])
def test_a_std_that_does_not_fit_the_action_is_refused_at_construction(shape):
    """Such a std fails (or, (4, 1), mis-broadcasts the action to (4, 4)) on every tick on the robot."""
    with pytest.raises(ValueError, match=rf"std has shape \({shape[0]},.*shape \(4,\), or a single value"):
        GaussianExploration(constant_policy, np.full(shape, 0.1), ACTION_DIM)
    package = FakePackage({"params": {"log_std": np.zeros(shape)}, "fisher": {}})
    with pytest.raises(ValueError, match="package pkg: 'log_std' in its ewc.npz has shape .* 4 dimension"):
        line_exploration(constant_policy, package)
