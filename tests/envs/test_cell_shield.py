"""The runtimes' filters inside the cell's simulation: arms driven at each other stay apart, the delay lines carry
what was sent, snapshots replay bit-exactly, a spec that does not fit is refused."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from deploy.cell.scripted import WRIST_HUNT_OFFSETS_M
from deploy.robot_spec import load_robot_spec
from deploy.shipped import resolve_path
from envs.two_arm_cell import ACTION_DIM, SAFE_STOP_KEY, SHIELD_CUT_KEY, STATE_DIM, TwoArmCellEnv

SPEC = "shipped:calibration/sim_fetch.yaml"
STEPS = 50


def at_each_other(env: TwoArmCellEnv, obs: dict[str, np.ndarray]) -> np.ndarray:
    """Full speed at the partner's gripper (each arm in its own frame): the adversary of the cell benchmark."""
    rows = obs["observation"]
    toward = rows[:, -3:] - rows[:, :3]
    action = np.zeros((2, ACTION_DIM))
    action[:, :3] = toward / np.maximum(np.abs(toward).max(axis=1, keepdims=True), 1e-9)
    return action


def run_adversary(safety_spec: str | None, seed: int) -> tuple[str | None, float, int]:
    env = TwoArmCellEnv(safety_spec=safety_spec, end_on_violation=False)
    obs, _ = env.reset(seed=seed)
    cuts = 0
    for _ in range(STEPS):
        obs, _, _, _, info = env.step(at_each_other(env, obs))
        cuts += sum(info.get(SHIELD_CUT_KEY, (False, False)))
    return info["violation"], info["closest_m"], cuts


@pytest.mark.parametrize("seed", [0, 1])
def test_arms_driven_at_each_other_stay_apart_behind_the_shield_and_collide_without(seed: int) -> None:
    violation, closest, _ = run_adversary(None, seed)
    assert violation is not None  # the adversary does reach its partner in pure simulation
    violation, closest, cuts = run_adversary(SPEC, seed)
    assert violation is None and closest >= 0.10, (violation, closest)
    assert cuts > STEPS  # both arms were cut, most steps


def test_behind_the_shield_a_wrist_hunter_still_meets_the_partners_links() -> None:
    # The known gap (docs/benchmarks/cell-study.md): the runtimes' barrier keeps the gripper centres apart, not the
    # links behind them. Once the barrier plans with the arms' posture, this test must turn into: no contact either.
    offsets = np.array(WRIST_HUNT_OFFSETS_M)  # each arm's point about the partner's reported gripper
    env = TwoArmCellEnv(safety_spec=SPEC, end_on_violation=True)
    touched = []
    for seed in range(3):
        obs, _ = env.reset(seed=7000 + seed)
        for _ in range(STEPS):
            rows = obs["observation"]
            toward = rows[:, -3:] + offsets - rows[:, :3]
            action = np.zeros((2, ACTION_DIM))
            action[:, :3] = toward / np.maximum(np.abs(toward).max(axis=1, keepdims=True), 1e-9)
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        assert info["closest_m"] >= 0.10  # the centres stayed apart...
        touched.append(
            info["violation"] == "contact" and any("gripper_link" in link for link in env.scene.last_contact)
        )
    assert sum(touched) >= 2, touched  # ...and a gripper met the partner's wrist or forearm


def test_the_delay_lines_and_the_history_carry_the_commands_sent() -> None:
    env = TwoArmCellEnv(safety_spec=SPEC, delay=2)
    obs, _ = env.reset(seed=3)
    sent = []
    for _ in range(12):
        proposed = at_each_other(env, obs)
        obs, _, _, _, info = env.step(proposed)
        history = obs["observation"][:, STATE_DIM : STATE_DIM + ACTION_DIM * 2].reshape(2, 2, ACTION_DIM)
        sent.append(history[:, -1].copy())  # the newest command each arm sent
        changed = ~np.all(np.isclose(history[:, -1], np.clip(proposed, -1, 1)), axis=1)
        assert tuple(bool(c) for c in changed) == info[SHIELD_CUT_KEY]
    assert any(np.any(np.abs(s[:, :3]) < 0.99) for s in sent)  # some commands were cut below full speed


def test_far_apart_small_moves_pass_unchanged() -> None:
    env = TwoArmCellEnv(safety_spec=SPEC)
    obs, _ = env.reset(seed=5)
    away = -at_each_other(env, obs) * 0.1  # slowly apart, inside the box
    for _ in range(5):
        obs, _, _, _, info = env.step(away)
        assert info[SHIELD_CUT_KEY] == (False, False)


def test_snapshot_restores_the_shield_bit_exactly() -> None:
    env = TwoArmCellEnv(safety_spec=SPEC, end_on_violation=False)
    obs, _ = env.reset(seed=7)
    for _ in range(6):
        obs, *_ = env.step(at_each_other(env, obs))
    snap = env.snapshot()
    rng = np.random.default_rng(0)
    actions = [np.clip(at_each_other(env, obs) + rng.normal(0, 0.3, (2, ACTION_DIM)), -1, 1) for _ in range(20)]

    def play() -> list:
        return [env.step(a) for a in actions]

    first = play()
    env.reset(options={"snapshot": snap})
    second = play()
    for (o1, r1, *_, i1), (o2, r2, *_, i2) in zip(first, second, strict=True):
        assert o1["observation"].tobytes() == o2["observation"].tobytes() and r1 == r2
        assert i1[SHIELD_CUT_KEY] == i2[SHIELD_CUT_KEY]
    plain = TwoArmCellEnv()
    plain.reset(seed=7)
    with pytest.raises(ValueError, match="no shield state"):
        env.reset(options={"snapshot": plain.snapshot()})


def test_a_spec_for_another_control_period_is_refused_with_its_name() -> None:
    spec = load_robot_spec(resolve_path(SPEC))
    other = dataclasses.replace(spec, control_period_s=0.02, robot_id="fast_fetch")
    with pytest.raises(ValueError, match="fast_fetch"):
        TwoArmCellEnv(safety_spec=other)


def test_an_arm_driven_past_its_reach_is_stopped_as_its_runtime_would_and_the_episode_fails() -> None:
    env = TwoArmCellEnv(safety_spec=SPEC, end_on_violation=False)
    env.reset(seed=0)
    push = np.zeros((2, ACTION_DIM))
    push[0, :3] = (0.5, 0.0, 0.3)  # arm 0 out and up, past the edge of its reach (x 1.52 m at z 0.85 m); arm 1 stays
    stops = []
    for _ in range(STEPS):
        obs, _, terminated, _, info = env.step(push)
        stops.append(info[SAFE_STOP_KEY])
        assert not terminated
    assert stops[-1] == "arm_0: not_following" and not info["is_success"] and info["violation"] is None
    first = stops.index(stops[-1])
    history = obs["observation"][0, STATE_DIM : STATE_DIM + ACTION_DIM * env.history_len]
    assert first < STEPS - env.history_len and not history.any()  # held since: only zero commands in its line
    ended = TwoArmCellEnv(safety_spec=SPEC)  # the evaluation's cell: the stop ends the episode
    ended.reset(seed=0)
    for _ in range(STEPS):
        *_, terminated, _, info = ended.step(push)
        if terminated:
            break
    assert terminated and info[SAFE_STOP_KEY] == "arm_0: not_following"
