"""One fine-tuning round end to end on PointReach: log -> GRPO + EWC -> candidate package -> gate -> store."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th

import envs  # noqa: F401  (registers PointReach-v0)
from deploy.ewc_file import ewc_from_bytes
from deploy.export.exporter import EwcAnchor, export_package
from deploy.finetune.gate import GateConfig
from deploy.finetune.promote import PackageStore, promote_if_passed
from deploy.finetune.round import RoundConfig, run_round, sim_fisher_anchor
from deploy.runtime.package import EWC_FILE
from deploy.runtime.safety import SafetyLimits
from deploy.runtime.tick_record import TickRecord
from deploy.runtime.ticklog import TickLogWriter
from robot_grpo.grpo import GRPO

ENV_KWARGS = {"delay": 1}
LIMITS = SafetyLimits(workspace_low=(-0.3,) * 3, workspace_high=(0.3,) * 3, max_action_rate=2.0)
LENIENT = GateConfig(n_episodes=10, original_margin=1.0, current_tolerance=1.0, max_extra_interventions=1e9)


def write_line_log(
    model: GRPO, env: gym.Env, path: Path, n_targets: int, attempts: int, policy_id: str, first_episode: int = 0
) -> None:
    """The production line: each target (the goal of reset(seed=target)) attempted ``attempts`` times, every tick
    naming ``policy_id`` as the policy asked."""
    contract = env.unwrapped.contract
    tick = 0
    with TickLogWriter(path, fsync_interval_s=None) as log:
        for episode in range(first_episode, first_episode + n_targets * attempts):
            obs, _ = env.reset(seed=episode // attempts)
            for step in range(env.unwrapped.max_episode_steps + 1):
                flat = contract.flatten(obs)
                with th.no_grad():
                    action = model.policy(th.as_tensor(flat[None]))[0].numpy()[0].astype(np.float64)
                log.append(
                    TickRecord(tick * 0.04, tick, obs["observation"][:6], flat, obs["desired_goal"], action,
                               contract.clip_action(action), (), 0.0, 0.0, episode, policy_id=policy_id)
                )  # fmt: skip
                tick += 1
                if step < env.unwrapped.max_episode_steps:
                    obs, *_ = env.step(contract.clip_action(action))


@pytest.mark.slow  # ~20 s: a short GRPO run, two exports, a gate
def test_round_exports_gates_and_promotes_with_a_moved_ewc_anchor(tmp_path: Path, export_config) -> None:
    env = gym.make("PointReach-v0", **ENV_KWARGS)
    model = GRPO("MultiInputPolicy", "PointReach-v0", group_size=4, n_groups=2, n_epochs=2, batch_size=512,
                 policy_kwargs={"net_arch": (16,)}, seed=0)  # fmt: skip
    model.learn(400)
    anchor = sim_fisher_anchor(model, env, n_states=200, lam=5.0)
    params, fisher = anchor.anchor_arrays()
    first = export_package(model, tmp_path / "v1", "PointReach-v0", ENV_KWARGS, ewc_anchor=EwcAnchor(params, fisher),
                           config=export_config)  # fmt: skip
    model.save(tmp_path / "v1.zip")
    store = PackageStore(tmp_path / "store")
    promote_if_passed(store, first, "v1", {"passed": True}, checkpoint=tmp_path / "v1.zip")
    log = tmp_path / "logs" / "line.mcap"
    write_line_log(model, env, log, n_targets=2, attempts=4, policy_id=store.load_current().policy_id)
    # episodes another package drove (a log left from an earlier package) are not v1's samples: skipped
    write_line_log(model, env, tmp_path / "logs" / "older.mcap", 1, 2, policy_id="f" * 64, first_episode=100)

    running = GRPO.load(store.checkpoint_path("v1"), env=model.env)
    config = RoundConfig(group_size=4, n_updates=2, ewc_lambda=5.0, ewc_gamma=0.5)
    gate_envs = {"original": env, "current": gym.make("PointReach-v0", **ENV_KWARGS)}
    logs = log.parent
    report = run_round(store, logs, running, gate_envs, LIMITS, "v2", "PointReach-v0", ENV_KWARGS, config, LENIENT,
                       export_config)  # fmt: skip
    assert report.passed
    assert (store.current_name(), store.previous_name()) == ("v2", "v1")
    assert store.checkpoint_path("v2").is_file()
    promoted = store.load_current()
    assert promoted.manifest["provenance"]["finetuned_from"] == "v1"
    assert promoted.manifest["provenance"]["log_episodes_skipped"]["other_policy"] == 2
    # Online EWC: the new anchor is the fine-tuned weights; the Fisher is gamma * F_old + F_new >= gamma * F_old.
    ewc = ewc_from_bytes(promoted.read_verified(EWC_FILE))
    assert (ewc.consolidations, ewc.lam, ewc.gamma) == (1, 5.0, 0.5)  # the round is counted in the file
    for name, p in running.policy.named_parameters():
        np.testing.assert_allclose(ewc.params[name], p.detach().numpy(), rtol=1e-6, atol=1e-7)
        assert np.all(ewc.fisher[name] >= 0.5 * fisher[name] - 1e-6)
    moved = sum(float(np.abs(ewc.params[k] - params[k]).sum()) for k in params)
    assert moved > 0
    assert [e["event"] for e in store.history()][-2:] == ["install", "promote"]


def test_a_fine_tuned_package_counts_as_trained_for_the_robots_new_delay():
    from launch.job_finetune import widened_delay_range

    assert widened_delay_range((2, 2), (6, 6)) == (2, 6)  # tuned on the delay-6 robot's logs, gated on both
    assert widened_delay_range((1, 3), (2, 2)) == (1, 3)


def test_a_misspelt_hindsight_option_is_refused_when_the_round_is_configured():
    with pytest.raises(ValueError, match=r"\['n_sampled_goals'\].*allowed keys: .*n_sampled_goal"):
        RoundConfig(hindsight_kwargs={"n_sampled_goals": 4})
    assert RoundConfig(hindsight_kwargs={"n_sampled_goal": 4}).hindsight_kwargs == {"n_sampled_goal": 4}


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"hindsight_strategy": "futur"}, "hindsight strategy must be one of"),
        ({"n_sampled_goal": 0}, "n_sampled_goal must be >= 1"),
        ({"is_clip": 0.0}, "is_clip must be > 0"),
        ({"distance_coef": -1.0}, "distance_coef must be"),
        ({"scale_advantages": "groups"}, "scale_advantages must be one of"),
    ],
)
def test_a_hindsight_value_the_buffer_refuses_is_refused_when_the_round_is_configured(options, match):
    """Before, only the keys were checked: a bad value surfaced after the round had read the logs and built the
    model, or (scale_advantages) at its first update."""
    with pytest.raises(ValueError, match=f"hindsight_kwargs .* refused: {match}"):
        RoundConfig(hindsight_kwargs=options)
