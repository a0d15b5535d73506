"""Goal Gaussian policy: flattening order, normalizer, log-prob, export module, k3 KL."""

import math

import numpy as np
import pytest
import torch as th

from deploy.contract import OBS_KEYS as CONTRACT_OBS_KEYS
from envs.point_reach import PointReachEnv
from robot_grpo.losses import action_bound_penalty, clipped_surrogate, k3_kl
from robot_grpo.policies import OBS_KEYS, GoalGaussianPolicy, RunningNormalizer, flatten_obs, flatten_obs_np


def _policy(seed: int = 0, **kwargs) -> tuple[GoalGaussianPolicy, PointReachEnv]:
    th.manual_seed(seed)
    env = PointReachEnv()
    return GoalGaussianPolicy(env.observation_space, env.action_space, lambda _: 3e-4, **kwargs), env


def _obs_batch(env: PointReachEnv, n: int) -> dict[str, np.ndarray]:
    rows = []
    for i in range(n):
        obs, _ = env.reset(seed=i)
        rows.append(obs)
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def test_obs_keys_match_the_deploy_contract():
    assert OBS_KEYS == CONTRACT_OBS_KEYS


def test_flatten_follows_the_contract_order():
    _, env = _policy()
    obs = _obs_batch(env, 3)
    flat = flatten_obs_np(obs)
    expected = np.stack([env.contract.flatten({k: obs[k][i] for k in obs}) for i in range(3)])
    np.testing.assert_array_equal(flat, expected)
    torch_flat = flatten_obs({k: th.as_tensor(v) for k, v in obs.items()})
    np.testing.assert_array_equal(torch_flat.numpy(), expected)


def test_running_normalizer_matches_numpy_statistics_and_clips():
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(300, 4))
    norm = RunningNormalizer(4, clip=5.0)
    for chunk in np.split(data, [17, 150]):  # uneven batches: the parallel update must still be exact
        norm.update(th.as_tensor(chunk))
    np.testing.assert_allclose(norm.mean.numpy(), data.mean(0), rtol=1e-5)
    np.testing.assert_allclose(norm.var.numpy(), data.var(0), rtol=1e-4)
    far = th.as_tensor(data.mean(0) + 100 * data.std(0), dtype=th.float32)[None]
    assert th.allclose(norm(far), th.full((1, 4), 5.0))
    assert {"obs_normalizer.mean", "obs_normalizer.var", "obs_normalizer.count"} <= set(_policy()[0].state_dict())


def test_log_prob_matches_torch_normal_and_defaults():
    policy, env = _policy()
    assert policy.log_std.detach().tolist() == [-0.5] * 3
    assert isinstance(policy.mean_net[1], th.nn.SiLU) and policy.mean_net[0].out_features == 64
    obs = th.as_tensor(flatten_obs_np(_obs_batch(env, 5)))
    actions = th.randn(5, 3)
    mean, log_std = policy.distribution_params(obs)
    expected = th.distributions.Normal(mean, log_std.exp()).log_prob(actions).sum(-1)
    th.testing.assert_close(policy.log_prob(obs, actions), expected)
    entropy = th.distributions.Normal(mean, log_std.exp()).entropy().sum(-1)[0]
    th.testing.assert_close(policy.entropy(), entropy)


def test_export_module_is_the_clipped_deterministic_action():
    policy, env = _policy()
    obs = _obs_batch(env, 6)
    policy.update_normalizer(th.as_tensor(flatten_obs_np(obs)))
    with th.no_grad():
        policy.mean_net[-1].bias.fill_(3.0)  # push the mean outside the [-1, 1] bounds
        policy.mean_net[-1].weight.normal_()
    export = policy.make_export_module().eval()
    flat = th.as_tensor(flatten_obs_np(obs))
    with th.no_grad():
        out = export(flat)
    assert out.dtype == th.float32 and out.shape == (6, 3)
    predicted, _ = policy.predict(obs, deterministic=True)
    np.testing.assert_allclose(out.numpy(), predicted, rtol=1e-6)
    assert float(out.max()) <= 1.0 and float(out.min()) >= -1.0


def test_export_module_without_normalizer_is_identity_normalized():
    policy, env = _policy(normalize_obs=False)
    flat = th.as_tensor(flatten_obs_np(_obs_batch(env, 4)))
    with th.no_grad():
        mean, _ = policy.distribution_params(flat)
        np.testing.assert_allclose(policy.make_export_module()(flat).numpy(), mean.clamp(-1, 1).numpy(), rtol=1e-6)


def test_k3_kl_is_zero_for_identical_policies_and_positive_otherwise():
    policy, env = _policy(seed=0)
    same, _ = _policy(seed=0)
    other, _ = _policy(seed=1)
    with th.no_grad():
        other.log_std.fill_(0.0)
    flat = th.as_tensor(flatten_obs_np(_obs_batch(env, 64)))
    with th.no_grad():
        actions, log_q = policy(flat)
        assert float(k3_kl(log_q, same.log_prob(flat, actions)).abs().max()) == 0.0
        kl = k3_kl(log_q, other.log_prob(flat, actions))
    assert float(kl.min()) >= 0.0 and float(kl.mean()) > 0.0
    # k3 = r - 1 - log r with r = p/q: for log r = log 2, 2 - 1 - 0.693147 = 0.306853
    assert float(k3_kl(th.tensor(0.0), th.tensor(math.log(2.0)))) == pytest.approx(0.306853, abs=1e-6)


def test_k3_kl_stays_finite_with_a_finite_gradient_where_the_reference_is_far_likelier():
    # a small-std policy whose mean left the reference's: log r = 98 nats overflowed float32 (kl_ref = inf)
    log_q = th.tensor([-60.0, 0.0], requires_grad=True)
    log_p = th.tensor([38.0, math.log(2.0)])
    kl = k3_kl(log_q, log_p)
    kl.sum().backward()
    assert th.isfinite(kl).all() and th.isfinite(log_q.grad).all()
    assert float(kl[0]) == pytest.approx(math.exp(30.0) - 31.0, rel=1e-6)  # capped at LOG_RATIO_MAX
    assert float(log_q.grad[0]) == 0.0  # past the cap: no gradient, as a capped surrogate row
    assert float(kl[1]) == pytest.approx(0.306853, abs=1e-6)  # below the cap: unchanged


def test_clipped_surrogate_arithmetic():
    ratio = th.tensor([0.5, 1.5, 1.5, 0.5])
    adv = th.tensor([1.0, 1.0, -1.0, -1.0])
    # clip [0.8, 1.3]: A>0 takes min(r, clip(r)) -> [0.5, 1.3]; A<0 takes min(-r, -clip(r)) -> [-1.5, -0.8]
    out = clipped_surrogate(ratio, adv, clip_low=0.2, clip_high=0.3)
    th.testing.assert_close(out, th.tensor([0.5, 1.3, -1.5, -0.8]))


def test_dual_clip_bounds_only_the_rows_with_a_negative_advantage():
    ratio = th.tensor([0.5, 2.0, 10.0, 1e6, 10.0, 1e6])
    adv = th.tensor([-1.0, -1.0, -1.0, -1.0, 1.0, 1.0])
    # clip [0.8, 1.2]: A<0 -> -max(r, clip(r)) = [-0.8, -2, -10, -1e6]; A>0 -> min(r, 1.2) = 1.2
    th.testing.assert_close(clipped_surrogate(ratio, adv, 0.2, 0.2), th.tensor([-0.8, -2.0, -10.0, -1e6, 1.2, 1.2]))
    # dual clip 3: A<0 rows are bounded below by 3 * A = -3; A>0 rows are left alone
    dual = clipped_surrogate(ratio, adv, 0.2, 0.2, dual_clip=3.0)
    th.testing.assert_close(dual, th.tensor([-0.8, -2.0, -3.0, -3.0, 1.2, 1.2]))


def test_action_bound_penalty_is_the_squared_excess_outside_the_box():
    low, high = th.tensor([-1.0, -1.0, -0.5]), th.tensor([1.0, 1.0, 0.5])
    inside = th.tensor([[0.0, 1.0, -0.5], [-1.0, 0.3, 0.5]])
    assert float(action_bound_penalty(inside, low, high)) == 0.0
    outside = th.tensor([[1.5, -3.0, 0.0], [0.0, 0.0, 0.75]])
    # row 0: 0.5^2 + 2^2 = 4.25; row 1: 0.25^2 = 0.0625; mean over the batch
    assert float(action_bound_penalty(outside, low, high)) == pytest.approx((4.25 + 0.0625) / 2)


def test_policy_rejects_unbounded_or_discrete_actions():
    from gymnasium import spaces

    env = PointReachEnv()
    with pytest.raises(ValueError, match="Box"):
        GoalGaussianPolicy(env.observation_space, spaces.Discrete(3), lambda _: 1e-3)
    with pytest.raises(ValueError, match="finite bounds"):
        GoalGaussianPolicy(env.observation_space, spaces.Box(-np.inf, np.inf, (3,)), lambda _: 1e-3)


@pytest.mark.parametrize("preserve", [True, False])
def test_normalizer_update_preserves_the_function_when_asked(preserve):
    policy, env = _policy(seed=3, norm_preserve_outputs=preserve)
    first = th.as_tensor(flatten_obs_np(_obs_batch(env, 32)))
    policy.update_normalizer(first)  # the first update: nothing trained to preserve yet
    rng = np.random.default_rng(0)
    probe = first[:8]
    with th.no_grad():
        before = policy.distribution_params(probe)[0].clone()
    shifted = first + th.as_tensor(rng.normal(0.05, 0.02, size=first.shape), dtype=th.float32)  # stats move
    policy.update_normalizer(shifted)
    with th.no_grad():
        after = policy.distribution_params(probe)[0]
        z = policy.obs_normalizer(probe)
    assert float(z.abs().max()) < policy.norm_clip  # no input clipped: the compensation is exact up to rounding
    if preserve:
        th.testing.assert_close(after, before, rtol=1e-4, atol=1e-5)
    else:
        assert not th.allclose(after, before, rtol=1e-4, atol=1e-5)
