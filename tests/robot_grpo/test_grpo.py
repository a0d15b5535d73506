"""GRPO algorithm class on the numpy PointReach env: SB3 API, determinism, guards, callbacks, logging."""

import csv
import os

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.callbacks import CheckpointCallback, EvalCallback, StopTrainingOnRewardThreshold
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure

import envs  # noqa: F401  (registers PointReach-v0)
from robot_grpo import DEFAULT_N_ENVS, GRPO, GroupRolloutBuffer, NonFiniteError
from robot_grpo.schedules import log_std_bound

G, N_GROUPS, EP_STEPS = 4, 2, 10
DEFAULT_UPDATE_STEPS = DEFAULT_N_ENVS * 50  # one update: every env runs one 50-step episode
SMALL = {"group_size": G, "n_groups": N_GROUPS, "batch_size": 64, "n_epochs": 2, "policy_kwargs": {"net_arch": [16]}}


def make_env(n_envs: int = G * N_GROUPS, seed: int = 0):
    return make_vec_env("PointReach-v0", n_envs=n_envs, seed=seed, env_kwargs={"max_episode_steps": EP_STEPS})


def small_model(seed: int = 0, **overrides) -> GRPO:
    return GRPO("MultiInputPolicy", make_env(seed=seed), seed=seed, **{**SMALL, **overrides})


def params(model: GRPO) -> dict[str, th.Tensor]:
    return {k: v.detach().clone() for k, v in model.policy.named_parameters()}


def test_constructor_reads_episode_length_and_checks_arguments():
    model = small_model()
    assert model.n_steps == EP_STEPS and model.n_envs == G * N_GROUPS
    with pytest.raises(ValueError, match="group_size \\* n_groups"):
        GRPO("MultiInputPolicy", make_env(n_envs=6), group_size=4, n_groups=2)
    with pytest.raises(ValueError, match="scale_advantages"):
        small_model(scale_advantages="median")
    with pytest.raises(ValueError, match="adaptive_beta"):
        small_model(adaptive_beta=True)
    with pytest.raises(ValueError, match="group_size must be >= 2"):
        GRPO("MultiInputPolicy", make_env(n_envs=2), group_size=1, n_groups=2)
    with pytest.raises(ValueError, match="name"):
        small_model(extra_loss_terms=[lambda policy: policy.log_std.sum()])
    with pytest.raises(ValueError, match="bound_coef must be >= 0"):
        small_model(bound_coef=-1.0)
    with pytest.raises(ValueError, match="dual_clip must be > 1"):
        small_model(dual_clip=1.0)


def test_rollout_groups_share_their_start_and_goal():
    model = small_model()
    model.learn(G * N_GROUPS * EP_STEPS)
    obs = model.rollout_buffer.observations[0]  # first step of the last rollout, [n_envs, obs_dim]
    for g in range(N_GROUPS):
        np.testing.assert_array_equal(obs[g * G : (g + 1) * G], np.repeat(obs[g * G][None], G, axis=0))
    assert not np.array_equal(obs[0], obs[G])


def test_restarted_groups_start_where_a_member_of_the_previous_rollout_was_mid_episode():
    """restart_fraction 0.5 of 2 groups: after the first rollout (all fresh) one group of the next starts from the
    state one member had reached after some control steps (its goal kept); the other starts fresh."""
    model = small_model(restart_fraction=0.5)
    model.learn(G * N_GROUPS * EP_STEPS)
    first = model.rollout_buffer.observations.copy()  # [T, n_envs, obs_dim]: the observation before each step
    assert model._rollout_stats["rollout/restarted_groups"] == 0.0 and len(model._restarts.snapshots) == N_GROUPS
    model.learn(G * N_GROUPS * EP_STEPS, reset_num_timesteps=False)
    assert model._rollout_stats["rollout/restarted_groups"] == 1.0
    start = model.rollout_buffer.observations[0]
    restarted = start[G:]  # the last group
    np.testing.assert_array_equal(restarted, np.repeat(restarted[:1], G, axis=0))  # one start for the group
    mid_episode = first[1:].reshape(-1, first.shape[-1])  # states after 1 .. T - 1 steps of the first rollout
    assert np.any(np.all(mid_episode == restarted[0], axis=1))
    assert not np.any(np.all(first[0] == restarted[0], axis=1))  # not a reset state of the first rollout
    assert not np.any(np.all(mid_episode == start[0], axis=1))  # the first group started fresh
    with pytest.raises(ValueError, match=r"restart_fraction must be in \[0, 1\)"):
        small_model(restart_fraction=1.0)


def test_same_seed_gives_identical_weights():
    a, b = small_model(seed=3), small_model(seed=3)
    a.learn(2 * G * N_GROUPS * EP_STEPS)
    b.learn(2 * G * N_GROUPS * EP_STEPS)
    for name, value in params(a).items():
        assert th.equal(value, params(b)[name]), name
    c = small_model(seed=4)
    c.learn(2 * G * N_GROUPS * EP_STEPS)
    assert not th.equal(params(a)["log_std"], params(c)["log_std"]) or not th.equal(
        params(a)["mean_net.0.weight"], params(c)["mean_net.0.weight"]
    )


def test_save_load_gives_identical_deterministic_actions(tmp_path):
    model = small_model(ref_update_interval=0)
    model.learn(2 * G * N_GROUPS * EP_STEPS)
    path = tmp_path / "grpo.zip"
    model.save(path)
    loaded = GRPO.load(path, device="cpu")
    obs = make_env(seed=9).reset()
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    for key, value in model.ref_policy.state_dict().items():  # the reference policy is in the checkpoint
        assert th.equal(value, loaded.ref_policy.state_dict()[key]), key
    assert not th.equal(model.ref_policy.log_std, model.policy.log_std)  # ...and differs from the policy
    np.testing.assert_array_equal(model.policy.obs_normalizer.mean, loaded.policy.obs_normalizer.mean)
    loaded.set_env(make_env(seed=1))
    loaded.learn(G * N_GROUPS * EP_STEPS)  # a loaded model keeps training


class NaNTerm:
    """Extra loss term that turns NaN: the value itself, or only its gradient (sqrt at 0)."""

    def __init__(self, where: str) -> None:
        self.name, self.where = "inject", where

    def __call__(self, policy):
        if self.where == "loss":
            return policy.log_std.sum() * float("nan")
        return th.sqrt((policy.log_std * 0.0).sum())  # value 0, gradient inf * 0 = NaN


@pytest.mark.parametrize(("where", "tensor"), [("loss", "extra/inject"), ("grad", "grad/log_std")])
def test_nan_writes_a_snapshot_and_names_the_tensor(tmp_path, where, tensor):
    model = small_model(extra_loss_terms=[NaNTerm(where)], snapshot_dir=str(tmp_path / "snap"))
    with pytest.raises(NonFiniteError, match=f"{tensor} at update 1") as err:
        model.learn(G * N_GROUPS * EP_STEPS)
    path = tmp_path / "snap" / "nonfinite_update1.pt"
    assert str(path) in str(err.value) and path.exists()
    snap = th.load(path, weights_only=True)
    assert snap["tensor"] == tensor and snap["update"] == 1
    assert {"observations", "actions", "advantages", "weights"} <= set(snap["batch"])
    assert "log_std" in snap["policy"] and "state" in snap["optimizer"]


def test_kl_spike_rolls_back_to_the_last_good_weights_and_halves_the_lr():
    # lr 0.5 makes the first minibatch step jump far from pi_old; the next minibatch sees approx KL >> 2 x target
    model = small_model(learning_rate=0.5, target_kl=0.01, batch_size=16, verbose=0)
    before = params(model)
    model.learn(G * N_GROUPS * EP_STEPS)
    assert model.logger.name_to_value["train/rollback"] == 1
    for name, value in params(model).items():
        assert th.equal(value, before[name]), name
    assert model.policy.optimizer.param_groups[0]["lr"] == pytest.approx(0.25)
    assert model.logger.name_to_value["train/learning_rate"] == pytest.approx(0.25)
    model.learn(G * N_GROUPS * EP_STEPS, reset_num_timesteps=False)  # the halving persists (and may repeat)
    assert model.policy.optimizer.param_groups[0]["lr"] <= 0.25


def test_sb3_callbacks_work_unchanged(tmp_path):
    model = small_model()
    stop = StopTrainingOnRewardThreshold(reward_threshold=-1e9, verbose=0)  # met at the first evaluation
    eval_cb = EvalCallback(
        make_env(n_envs=1, seed=5), eval_freq=EP_STEPS, n_eval_episodes=2, callback_on_new_best=stop, verbose=0
    )
    ckpt = CheckpointCallback(save_freq=EP_STEPS, save_path=str(tmp_path), name_prefix="grpo")
    budget = 10 * G * N_GROUPS * EP_STEPS
    model.learn(budget, callback=[ckpt, eval_cb])
    assert model.num_timesteps < budget  # stopped by StopTrainingOnRewardThreshold
    assert eval_cb.n_calls >= EP_STEPS and eval_cb.best_mean_reward > -np.inf
    saved = [f for f in os.listdir(tmp_path) if f.endswith(".zip")]
    assert saved
    GRPO.load(tmp_path / saved[0])


def test_logger_records_the_issue_keys(tmp_path):
    model = small_model()
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(3 * G * N_GROUPS * EP_STEPS)
    with open(tmp_path / "progress.csv") as f:
        keys = set(next(csv.reader(f)))
    expected = {
        "train/approx_kl",
        "train/clip_fraction",
        "train/entropy_loss",
        "train/grad_norm",
        "train/learning_rate",
        "train/policy_gradient_loss",
        "train/std",
        "rollout/success_rate",
        "rollout/ep_rew_mean",
        "rollout/ep_len_mean",
        "rollout/zero_std_groups",
        "hindsight/weight_mean",
        "hindsight/relabelled_success",
        "time/fps",
    }
    assert expected <= keys, expected - keys


def test_no_hindsight_buffer_and_adaptive_beta_and_schedules():
    from robot_grpo import make_schedule

    model = small_model(
        rollout_buffer_class=GroupRolloutBuffer,
        beta=0.1,
        adaptive_beta=True,
        target_kl=1e3,  # kl_ref far below target / 1.5 -> beta halves after every update
        learning_rate=make_schedule(1e-3, "cosine"),
        clip_range=make_schedule(0.2, "linear", end=0.1),
        ref_update_interval=0,
    )
    model.learn(2 * G * N_GROUPS * EP_STEPS)
    assert model.rollout_buffer.n_samples == G * N_GROUPS * EP_STEPS  # original-goal rows only
    assert model.beta == pytest.approx(0.1 / 4)
    assert model.logger.name_to_value["train/clip_range"] < 0.2


@pytest.mark.parametrize("strategy", ["final", "future", "episode"])
@pytest.mark.parametrize(("scale", "outcome_only"), [("group", False), ("batch", False), ("none", True)])
def test_variants_train(strategy, scale, outcome_only):
    model = small_model(
        scale_advantages=scale,
        outcome_only=outcome_only,
        rollout_buffer_kwargs={"hindsight_strategy": strategy, "n_sampled_goal": 2, "is_self_normalize": True},
    )
    before = params(model)
    model.learn(G * N_GROUPS * EP_STEPS)
    n_rows = G * N_GROUPS * EP_STEPS
    if strategy == "future":  # relabelled groups keep only the steps up to the goal's step
        assert n_rows < model.rollout_buffer.n_samples <= 3 * n_rows
    else:
        assert model.rollout_buffer.n_samples == 3 * n_rows
    changed = any(not th.equal(v, before[k]) for k, v in params(model).items())
    # no change only when every advantage was zero (e.g. outcome-only with "episode" goals reached mid-episode
    # on 10-step episodes: every member still fails at the end, so every group has zero variance)
    assert changed or not th.any(model.rollout_buffer._samples.advantages != 0)
    assert np.isfinite(model.logger.name_to_value["hindsight/weight_mean"])


def test_extra_loss_term_is_added_and_logged():
    class Pull:
        name = "pull"

        def __call__(self, policy):
            return 10.0 * (policy.log_std - 1.0).square().sum()

    model = small_model(extra_loss_terms=[Pull()], learning_rate=1e-2)
    model.learn(2 * G * N_GROUPS * EP_STEPS)
    assert "train/extra/pull" in model.logger.name_to_value
    assert float(model.policy.log_std.detach().mean()) > -0.5  # pulled up from the -0.5 init toward 1


def test_learns_point_reach_with_delay_one():
    """Defaults (G=8, 6 groups, "final" hindsight, 64x64 SiLU) on the numpy env: >= 90% deterministic success."""
    env = make_vec_env("PointReach-v0", n_envs=DEFAULT_N_ENVS, seed=0, env_kwargs={"delay": 1})
    eval_env = make_vec_env("PointReach-v0", n_envs=30, seed=1000, env_kwargs={"delay": 1})
    model = GRPO("MultiInputPolicy", env, seed=0)

    def success() -> float:
        obs = eval_env.reset()
        for _ in range(50):
            obs, _, _, infos = eval_env.step(model.predict(obs, deterministic=True)[0])
        return float(np.mean([info["is_success"] for info in infos]))

    rates = []
    while model.num_timesteps < 48_000 and (not rates or rates[-1] < 0.9):
        model.learn(DEFAULT_UPDATE_STEPS, reset_num_timesteps=False)
        rates.append(success())
    assert rates[-1] >= 0.9, rates


@pytest.mark.slow
def test_learns_delayed_fetch_reach_k2():
    """Defaults on MuJoCo FetchReach with a 2-step delay: >= 90% deterministic success within 25.6k env steps.

    (The benchmark, benchmarks/learning.py, measures the steps to 95%; this only guards against regressions.)
    """
    env = make_vec_env("DelayedFetchReach-v0", n_envs=DEFAULT_N_ENVS, seed=0, env_kwargs={"delay": 2})
    eval_env = make_vec_env("DelayedFetchReach-v0", n_envs=30, seed=1000, env_kwargs={"delay": 2})
    model = GRPO("MultiInputPolicy", env, seed=0)
    rates = []
    while model.num_timesteps < 25_600 and (not rates or rates[-1] < 0.9):
        model.learn(DEFAULT_UPDATE_STEPS, reset_num_timesteps=False)
        obs = eval_env.reset()
        for _ in range(50):
            obs, _, _, infos = eval_env.step(model.predict(obs, deterministic=True)[0])
        rates.append(float(np.mean([info["is_success"] for info in infos])))
    assert rates[-1] >= 0.9, rates


def test_train_on_samples_is_one_update_with_terms_for_that_update_only():
    class Pull:
        name = "pull"

        def __call__(self, policy):
            return (policy.log_std - 1.0).square().sum()

    model = small_model()
    ref_before = {k: v.clone() for k, v in model.ref_policy.state_dict().items()}
    rows = model.rollout_samples()  # one group rollout, no update
    assert model.num_timesteps == G * N_GROUPS * EP_STEPS and model._n_updates == 0
    before = params(model)
    logged = model.train_on_samples(rows, extra_loss_terms=[Pull()])
    assert "train/extra/pull" in logged and model._n_updates == 1
    assert any(not th.equal(v, before[k]) for k, v in params(model).items())
    assert model.extra_loss_terms == []  # the term was for that update only
    for key, value in model.ref_policy.state_dict().items():  # the rows carry their own reference log-probs
        assert th.equal(value, ref_before[key]), key
    with pytest.raises(ValueError, match="name"):
        model.train_on_samples(rows, extra_loss_terms=[lambda policy: policy.log_std.sum()])


def _no_signal(rows):
    """The rows with every advantage 0: the surrogate gives no gradient, only other loss terms do."""
    return rows._replace(advantages=th.zeros_like(rows.advantages))


@pytest.mark.parametrize("bound_coef", [0.0, 1.0])
def test_bound_coef_pulls_a_mean_outside_the_action_bounds_back(bound_coef):
    """A mean past the bounds (actions clipped there, so the env sees no difference) is pulled back toward them by
    the bound penalty and left where it is without it."""
    model = small_model(bound_coef=bound_coef)
    rows = _no_signal(model.rollout_samples())
    last = model.policy.mean_net[-1]
    with th.no_grad():
        last.bias.fill_(3.0)  # PointReach actions lie in [-1, 1]
        before = model.policy.distribution_params(rows.observations)[0].mean()
    logged = model.train_on_samples(rows)
    with th.no_grad():
        after = model.policy.distribution_params(rows.observations)[0].mean()
    if bound_coef == 0:
        assert "train/bound_loss" not in logged
        assert float(after) == pytest.approx(float(before))
    else:
        assert logged["train/bound_loss"] > 1.0
        assert float(after) < float(before) - 0.01


@pytest.mark.parametrize("dual_clip", [None, 3.0])
def test_rows_whose_action_pi_old_all_but_ruled_out_do_not_blow_up_the_update(dual_clip):
    """Hindsight rows of delayed FetchPush had old log-probs down to -1,800 nats (the action far from the mean under
    the relabelled goal): a tiny move of the mean sent rho to e^47, rho * A of a negative advantage to -9e18, and the
    gradient norm overflowed. Here every row's pi_old log-prob is 2,000 nats below pi's, with a negative advantage:
    the capped log-ratio keeps the update finite, and the dual clip bounds the loss at dual_clip * |A|."""
    model = small_model(dual_clip=dual_clip)
    rows = model.rollout_samples()
    with th.no_grad():
        log_prob = model.policy.log_prob(rows.observations, rows.actions)
    ones = th.ones_like(rows.advantages)
    rows = rows._replace(old_log_prob=log_prob - 2000.0, advantages=-ones, weights=ones)
    logged = model.train_on_samples(rows)  # before the cap: NonFiniteError (exp(2000) = inf)
    assert all(bool(th.isfinite(p).all()) for p in model.policy.parameters())
    if dual_clip is None:
        assert logged["train/policy_gradient_loss"] > 1e12  # rho capped at e^30, still unbounded in A
    else:
        assert logged["train/policy_gradient_loss"] == pytest.approx(dual_clip)  # mean of -(3 * -1)


def test_max_log_std_bounds_the_learned_noise_on_a_linear_schedule():
    from stable_baselines3.common.callbacks import BaseCallback

    class Watch(BaseCallback):
        def __init__(self):
            super().__init__()
            self.seen = []

        def _on_rollout_start(self):
            self.seen.append(float(self.model.policy.log_std.max()))

        def _on_step(self):
            return True

    # budget of 2 updates, start -0.4 (above the -0.5 init), end -1.0: after update 1 (progress remaining 0.5) the
    # bound is -0.7, after update 2 (progress 0) it is -1.0
    model, watch = small_model(max_log_std=[-0.4, -1.0]), Watch()
    model.learn(2 * G * N_GROUPS * EP_STEPS, callback=watch)
    assert watch.seen[0] == pytest.approx(-0.5)  # the init is below the start of the bound: untouched
    assert watch.seen[1] == pytest.approx(-0.7)
    assert float(model.policy.log_std.max()) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match=r"\[start, end\]"):
        small_model(max_log_std=[-0.5, -1.0, 0.5, 1.0])
    with pytest.raises(ValueError, match=r"end_fraction .* must be in \(0, 1\], got -2.0"):
        small_model(max_log_std=[-0.5, -1.0, -2.0])


def test_min_log_std_holds_the_noise_up_against_a_loss_that_drives_it_down():
    class Shrink:
        name = "shrink"

        def __call__(self, policy):
            return 10.0 * policy.log_std.sum()  # minimized by ever smaller noise

    budget = 2 * G * N_GROUPS * EP_STEPS
    free = small_model(extra_loss_terms=[Shrink()], learning_rate=1e-2)
    free.learn(budget)
    assert float(free.policy.log_std.max()) < -0.8  # without a floor the loss drives the std down
    floored = small_model(extra_loss_terms=[Shrink()], learning_rate=1e-2, min_log_std=-0.6)
    floored.learn(budget)
    np.testing.assert_allclose(floored.policy.log_std.detach().numpy(), -0.6)
    with pytest.raises(
        ValueError, match=r"min_log_std \(-0.5\) lies above max_log_std \(-0.50\d*\) at training progress 0.251"
    ):
        small_model(min_log_std=-0.5, max_log_std=[-0.3, -1.1])  # the ceiling passes -0.5 a quarter of the way


def test_train_on_samples_applies_the_log_std_bounds_as_train_does():
    """Fine-tuning's updates keep the bounds the model was trained under: a loss that pushes the noise up stops at
    max_log_std, one that pushes it down stops at min_log_std, and train/std reports the bounded value."""

    class Push:
        name = "push"

        def __init__(self, sign: float) -> None:
            self.sign = sign

        def __call__(self, policy):
            return self.sign * 10.0 * policy.log_std.sum()

    for sign, bounds, expected in ((-1.0, {"max_log_std": -0.45}, -0.45), (1.0, {"min_log_std": -0.55}, -0.55)):
        model = small_model(learning_rate=1e-1, **bounds)
        rows = _no_signal(model.rollout_samples())
        logged = model.train_on_samples(rows, extra_loss_terms=[Push(sign)])
        np.testing.assert_allclose(model.policy.log_std.detach().numpy(), expected, rtol=1e-6)
        assert logged["train/std"] == pytest.approx(np.exp(expected), rel=1e-5)


def test_max_log_std_reaches_its_end_at_the_end_fraction():
    """[start, end, 0.5]: the bound falls over the first half of training and stays at its end after."""
    bound = log_std_bound([-0.5, -1.5, 0.5])
    assert bound(1.0) == pytest.approx(-0.5)
    assert bound(0.75) == pytest.approx(-1.0)  # a quarter of training done: halfway down
    assert bound(0.5) == pytest.approx(-1.5)
    assert bound(0.1) == pytest.approx(-1.5)
