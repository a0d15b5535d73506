"""The controller on the simulated push cell over a pty: pushes are believed, a tracker glitch is rejected by name,
a block off the table ends the episode by name, the true gripper never leaves the box; and the same flat
observations as pure simulation."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from deploy.contract import fetch_push_contract
from deploy.robot_spec import RobotSpec, load_robot_spec
from deploy.runtime.block_check import BLOCK_OFF_TABLE
from deploy.runtime.goals import GoalSource
from deploy.runtime.loop import Controller, LoopConfig, RunReport
from envs.delayed_fetch_push import DEFAULT_PUSH_SPEC, DelayedFetchPushEnv
from envs.sim_robot import SimRobot

CONTRACT = fetch_push_contract(2)
# The barrier at the spec's gain bound itself: the scripted push drives the block off the table's edge, next to the
# box's face; with the spec's margin for motors faster than calibrated the gripper stops short of pushing it off.
SPEC = replace(load_robot_spec(DEFAULT_PUSH_SPEC), barrier_gain_margin=1.0)
FAST_PERIOD_S = 0.010  # lock-step: a short period only shortens the test (as tests/deploy/runtime/loop_fixtures.py)
SEEDS = [3, 4, 5]
STEPS = 30  # policy steps per episode: long enough to reach and push the block


class PushThrough:
    """A scripted pusher on the flat observation: drives the gripper at a point just past the block (toward the goal),
    so it runs into the block and pushes it, often toward the table's edge: obs[0:3] gripper, obs[3:6] block, the last
    3 values the goal. On seeds 3 and 5 it pushes the block off the table (x < 1.05 m, x > 1.55 m)."""

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        o = np.asarray(obs, dtype=np.float64)[0]
        gripper, block, goal = o[0:3], o[3:6], o[-3:]
        beyond = goal - block
        aim = block + 0.03 * beyond / (np.linalg.norm(beyond) + 1e-9)
        action = np.zeros(4)
        action[:3] = np.clip((aim - gripper) / CONTRACT.action_scale_m, -1.0, 1.0)
        return action[None, :].astype(np.float32)


def goals(seeds: list[int]) -> GoalSource:
    env = DelayedFetchPushEnv(block_noise_std_m=0.0)
    targets = [env.reset(seed=s)[0]["desired_goal"] for s in seeds]
    env.close()
    return GoalSource(targets, seeds)


def run(spec: RobotSpec = SPEC, jump_at: int | None = None) -> tuple[RunReport, SimRobot, list[np.ndarray]]:
    robot = SimRobot(mode="lockstep", task="push", spec=spec, seed=SEEDS[0])
    jumped: set[int] = set()
    blocks: list[np.ndarray] = []

    def on_tick(ctl: Controller, _record: object) -> None:
        blocks.append(robot.block_position_m)
        episode = ctl.episodes.current
        if (
            jump_at is not None
            and episode is not None
            and ctl.episodes.steps == jump_at
            and episode.index not in jumped
        ):
            jumped.add(episode.index)
            robot.faults.block_jump((0.1, 0.0, 0.0), frames=1)

    config = LoopConfig(period_s=FAST_PERIOD_S, max_episode_steps=STEPS)
    robot.start()
    try:
        report = Controller(robot.port_name, CONTRACT, PushThrough(), spec, goals(SEEDS), config, on_tick=on_tick).run()
    finally:
        robot.stop()
    return report, robot, blocks


def outside_box(robot: SimRobot, spec: RobotSpec) -> int:
    trace = np.asarray(robot.trace)
    return int(np.any((trace < spec.workspace_low) | (trace > spec.workspace_high), axis=1).sum())


def test_pushes_are_believed_a_block_pushed_off_the_table_ends_its_episode_and_the_gripper_stays_in_the_box() -> None:
    report, robot, blocks = run()
    ends = [(e.steps == STEPS, e.end_reason) for e in report.episodes]
    assert ends == [(False, BLOCK_OFF_TABLE), (True, ""), (False, BLOCK_OFF_TABLE)]
    assert not [k for k in report.counts if k.startswith("implausible_")]  # no push read as a glitch
    assert report.counts.get("safe_stops", 0) == 0
    assert max(np.linalg.norm(b - blocks[0]) for b in blocks) > 0.1  # the block was pushed (true positions)
    low, high = SPEC.block_tracker.table_low, SPEC.block_tracker.table_high
    assert any(np.any((b < low) | (b > high)) for b in blocks)  # truly past the table's edge, not a glitch
    assert outside_box(robot, SPEC) == 0


def test_a_tracker_glitch_is_rejected_as_block_jump_and_the_episode_goes_on() -> None:
    report, robot, _ = run(jump_at=5)
    assert report.counts["implausible_block_jump"] == len(SEEDS)  # one glitch per episode, each rejected
    assert [k for k in report.counts if k.startswith("implausible_")] == ["implausible_block_jump"]
    assert report.counts.get("safe_stops", 0) == 0
    assert all(e.steps == STEPS or e.end_reason == BLOCK_OFF_TABLE for e in report.episodes)
    assert outside_box(robot, SPEC) == 0


def test_a_block_outside_the_table_box_at_home_ends_the_episode_before_its_first_command() -> None:
    tracker = replace(SPEC.block_tracker, table_low=(1.05, 0.40, 0.50))  # a table top above the block: it is "off"
    report, _, _ = run(spec=replace(SPEC, block_tracker=tracker))
    assert [(e.steps, e.aborted, e.end_reason) for e in report.episodes] == [(0, True, BLOCK_OFF_TABLE)] * len(SEEDS)
    assert report.interventions[BLOCK_OFF_TABLE] == len(SEEDS)
