"""GRPO against SB3's own expectations: the gaps issue 13 lists, one test each (PointReach, tiny budgets).

Bounds copied, policy save/load, hindsight under VecNormalize, no reference KL when beta == 0, SB3's log keys and
windowed episode statistics, no run paths in checkpoints, non-finite snapshots under the run's folder, and an env
without snapshots refused at construction.
"""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import VecEnvWrapper, VecNormalize

import envs  # noqa: F401  (registers PointReach-v0)
from robot_grpo import GRPO, GoalGaussianPolicy, NonFiniteError

G, N_GROUPS, EP_STEPS = 4, 2, 10
N_ENVS = G * N_GROUPS
ROLLOUT = N_ENVS * EP_STEPS  # env steps of one group rollout (one update)
SMALL = {"group_size": G, "n_groups": N_GROUPS, "batch_size": 64, "n_epochs": 2, "policy_kwargs": {"net_arch": [16]}}
SHIPPED_CHECKPOINT = Path(__file__).resolve().parents[2] / "models" / "default_checkpoint.zip"
UNNORMALIZE_ATOL = 1e-5  # VecNormalize returns float32: normalize -> unnormalize loses ~1e-7 relative


def make_env(seed: int = 0, **env_kwargs):
    kwargs = {"max_episode_steps": EP_STEPS, **env_kwargs}
    return make_vec_env("PointReach-v0", n_envs=N_ENVS, seed=seed, env_kwargs=kwargs)


def small_model(env=None, seed: int = 0, **overrides) -> GRPO:
    return GRPO("MultiInputPolicy", env if env is not None else make_env(seed), seed=seed, **{**SMALL, **overrides})


def test_policy_action_bounds_do_not_share_memory_with_the_env():
    model = small_model()
    env_space = model.env.envs[0].unwrapped.action_space
    low, high = env_space.low.copy(), env_space.high.copy()
    params = model.get_parameters()
    params["policy"]["action_low"] = th.full_like(params["policy"]["action_low"], -7.0)
    params["policy"]["action_high"] = th.full_like(params["policy"]["action_high"], 7.0)
    model.set_parameters(params)
    np.testing.assert_array_equal(env_space.low, low)  # the live env keeps its bounds
    np.testing.assert_array_equal(env_space.high, high)
    assert float(model.policy.action_low[0]) == -7.0  # ...while the policy took the loaded ones


def test_policy_save_and_load_round_trip(tmp_path):
    model = small_model()
    model.learn(ROLLOUT)
    path = tmp_path / "policy.pth"
    model.policy.save(path)
    loaded = GoalGaussianPolicy.load(path)
    obs = make_env(seed=9).reset()
    np.testing.assert_array_equal(
        model.policy.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0]
    )
    for key, value in model.policy.state_dict().items():
        assert th.equal(value, loaded.state_dict()[key]), key


class Recorder(VecEnvWrapper):
    """Below VecNormalize: keeps the terminal achieved goals the envs returned and what compute_reward was asked."""

    def __init__(self, venv) -> None:
        super().__init__(venv)
        self.terminal_achieved: list[np.ndarray] = []
        self.reward_calls: list[tuple[np.ndarray, np.ndarray]] = []

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        if dones.all():  # np.stack copies: VecNormalize replaces the terminal observations after this returns
            self.terminal_achieved.append(np.stack([info["terminal_observation"]["achieved_goal"] for info in infos]))
        return obs, rewards, dones, infos

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
        if method_name == "compute_reward":
            self.reward_calls.append((np.array(method_args[0]), np.array(method_args[1])))
        return self.venv.env_method(method_name, *method_args, indices=indices, **method_kwargs)


def test_hindsight_under_vecnormalize_uses_the_original_goals():
    recorder = Recorder(make_env())
    env = VecNormalize(recorder, norm_obs=True, norm_reward=True)
    model = small_model(env=env, rollout_buffer_kwargs={"hindsight_strategy": "final", "n_sampled_goal": 2})
    model.learn(2 * ROLLOUT)
    buffer = model.rollout_buffer
    # the buffer's last achieved goals are the envs' own terminal ones (metres), not VecNormalize's z-scores
    np.testing.assert_allclose(buffer.achieved_next[-1], recorder.terminal_achieved[-1], atol=UNNORMALIZE_ATOL)
    assert set(np.unique(buffer.rewards)) <= {-1.0, 0.0}  # sparse rewards in the env's scale, not normalized
    achieved, desired = recorder.reward_calls[-1]
    # "final" goals are members' terminal achieved goals: each relabelled goal is one of them, in metres
    distance = np.linalg.norm(desired[:, None, :] - recorder.terminal_achieved[-1][None], axis=-1).min(axis=1)
    assert distance.max() < UNNORMALIZE_ATOL
    np.testing.assert_allclose(np.unique(achieved, axis=0), np.unique(buffer.achieved_next.reshape(-1, 3), axis=0))
    # the training rows are what the policy sees: the originals normalized with VecNormalize's statistics
    flat = buffer.observations.reshape(-1, buffer.obs_dim)
    goal = buffer.goal_dim
    original = {"observation": flat[:, : -2 * goal], "achieved_goal": flat[:, -2 * goal : -goal]}
    original["desired_goal"] = flat[:, -goal:]
    normalized = env.normalize_obs(original)
    expected = np.concatenate([normalized[k] for k in ("observation", "achieved_goal", "desired_goal")], axis=1)
    np.testing.assert_allclose(buffer._samples.observations.numpy()[: len(flat)], expected, rtol=1e-6, atol=1e-6)


def test_beta_zero_never_computes_the_reference_kl(tmp_path):
    model = small_model(snapshot_dir=str(tmp_path))  # beta = 0 by default
    model.ref_policy.log_std.data.fill_(-60.0)  # pi_ref's density of pi_old's samples underflows: k3 KL = inf
    model.learn(ROLLOUT)
    assert "train/kl_ref" not in model.logger.name_to_value
    assert th.all(model.rollout_buffer._samples.ref_log_prob == 0)  # the reference was not even scored
    with_kl = small_model(beta=0.1, snapshot_dir=str(tmp_path))
    with_kl.ref_policy.log_std.data.fill_(-60.0)
    with pytest.raises(NonFiniteError, match="kl_ref"):
        with_kl.learn(ROLLOUT)


class EpisodeLog(BaseCallback):
    """Every finished episode's Monitor return and length and its is_success, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.successes: list[float] = []

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "episode" in info:
                self.returns.append(info["episode"]["r"])
                self.lengths.append(info["episode"]["l"])
                self.successes.append(float(info["is_success"]))
        return True


def test_sb3_log_keys_and_windowed_episode_statistics(tmp_path):
    window = N_ENVS + N_ENVS // 2  # 1.5 rollouts: neither the last rollout nor everything
    # dense rewards: every episode return differs, so a mean over the wrong episodes cannot match by chance
    env = make_env(reward_type="dense", distance_threshold=0.1)
    model = small_model(env=env, stats_window_size=window)
    model.set_logger(configure(str(tmp_path), ["csv"]))
    episodes = EpisodeLog()
    model.learn(3 * ROLLOUT, callback=episodes)
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    last = rows[-1]
    assert float(last["rollout/ep_rew_mean"]) == pytest.approx(np.mean(episodes.returns[-window:]), rel=1e-6)
    assert float(last["rollout/ep_len_mean"]) == pytest.approx(np.mean(episodes.lengths[-window:]))
    assert float(last["rollout/success_rate"]) == pytest.approx(np.mean(episodes.successes[-window:]))
    assert {"train/entropy_loss", "train/learning_rate", "train/policy_gradient_loss", "train/std"} <= set(last)
    assert not {"train/entropy", "train/lr"} & set(last)  # the old names are gone
    assert float(rows[1]["train/entropy_loss"]) < 0  # SB3's sign: minus the entropy of the Gaussian


def _checkpoint_data(path: Path) -> dict:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("data"))


def test_checkpoints_store_no_run_paths(tmp_path):
    model = small_model(tensorboard_log=str(tmp_path / "tb"), snapshot_dir="relative/snaps")
    model.learn(ROLLOUT)
    model.save(tmp_path / "model.zip")
    data = _checkpoint_data(tmp_path / "model.zip")
    assert "tensorboard_log" not in data and "snapshot_dir" not in data
    loaded = GRPO.load(tmp_path / "model.zip")
    assert loaded.tensorboard_log is None and loaded.snapshot_dir is None
    assert GRPO.load(tmp_path / "model.zip", tensorboard_log=str(tmp_path / "tb2")).tensorboard_log == str(
        tmp_path / "tb2"
    )


def test_an_old_checkpoint_with_a_relative_tensorboard_path_does_not_write_there():
    assert _checkpoint_data(SHIPPED_CHECKPOINT)["tensorboard_log"] == "runs/default_model/tb"  # what it holds
    loaded = GRPO.load(SHIPPED_CHECKPOINT, device="cpu")
    assert loaded.tensorboard_log is None and loaded.snapshot_dir is None


class NaNTerm:
    name = "inject"

    def __call__(self, policy):
        return policy.log_std.sum() * float("nan")


def test_nonfinite_snapshot_goes_under_the_run_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    clean = small_model()
    clean.learn(ROLLOUT)
    assert not (tmp_path / "nonfinite_snapshots").exists()  # created only when used

    logged = small_model(extra_loss_terms=[NaNTerm()])
    logged.set_logger(configure(str(tmp_path / "run"), ["csv"]))
    with pytest.raises(NonFiniteError):
        logged.learn(ROLLOUT)
    assert (tmp_path / "run" / "nonfinite_snapshots" / "nonfinite_update1.pt").exists()

    tensorboard = small_model(extra_loss_terms=[NaNTerm()], tensorboard_log=str(tmp_path / "tb"))
    with pytest.raises(NonFiniteError, match=str(tmp_path / "tb" / "GRPO_1" / "nonfinite_snapshots")):
        tensorboard.learn(ROLLOUT)

    bare = small_model(extra_loss_terms=[NaNTerm()])  # SB3's default logger: a temp folder nobody looks in
    with pytest.raises(NonFiniteError):
        bare.learn(ROLLOUT)
    assert (tmp_path / "nonfinite_snapshots" / "nonfinite_update1.pt").exists()  # the working directory


def test_an_env_without_snapshots_is_refused_at_construction():
    env = make_vec_env(lambda: gym.make("Pendulum-v1"), n_envs=N_ENVS)
    with pytest.raises(ValueError, match="envs.with_snapshots"):
        GRPO("MlpPolicy", env, **SMALL)
    model = small_model()
    with pytest.raises(ValueError, match="envs.with_snapshots"):
        model.set_env(NoSnapshots(make_env()))  # same spaces, no snapshot()


class NoSnapshots(VecEnvWrapper):
    """PointReach's spaces without its snapshot API (what a plain goal env looks like to GRPO)."""

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        return self.venv.step_wait()

    def has_attr(self, attr_name: str) -> bool:
        return attr_name != "snapshot" and self.venv.has_attr(attr_name)
