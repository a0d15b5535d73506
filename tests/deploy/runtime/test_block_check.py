"""BlockCheck: the block's reported position against the gripper's motion, arithmetic spelt out.

Tracker without noise: the allowance is REST_JITTER_M = 2 mm per reading. Gripper steps are at most max_step_m =
1.0 x 0.05 x 0.7317 = 0.0366 m, so a push moves the block at most PUSH_FACTOR x 0.0366 = 0.0549 m per step.
"""

from __future__ import annotations

import math

import pytest

from deploy.block_tracker_spec import BlockTrackerSpec
from deploy.contract import fetch_push_contract, fetch_reach_contract
from deploy.runtime.block_check import BLOCK_JUMP, BLOCK_MOVED_ALONE, REST_JITTER_M, BlockCheck

PERIOD_S = 0.04
MAX_STEP_M = 1.0 * 0.05 * 0.7317
BLOCK = (1.30, 0.75, 0.425)


def tracker(rate_hz: float = 25.0, noise_m: float = 0.0) -> BlockTrackerSpec:
    return BlockTrackerSpec((noise_m,) * 3, rate_hz, 0.08, (1.05, 0.40, 0.39), (1.55, 1.10, 0.60))


def state(gripper: tuple[float, float, float], block: tuple[float, float, float]) -> list[float]:
    """A push state (25 values): the gripper at 0:3, the block at 3:6, the rest zero."""
    values = [0.0] * fetch_push_contract(2).state_dim
    values[0:3], values[3:6] = list(gripper), list(block)
    return values


def moved(by: tuple[float, float, float], point: tuple[float, float, float] = BLOCK) -> tuple[float, float, float]:
    return (point[0] + by[0], point[1] + by[1], point[2] + by[2])


def check(rate_hz: float = 25.0) -> BlockCheck:
    return BlockCheck(tracker(rate_hz), fetch_push_contract(2), PERIOD_S, MAX_STEP_M)


FAR = moved((0.0, 0.20, 0.0))  # 20 cm from the block: it cannot push it
NEAR = moved((-0.05, 0.0, 0.0))  # 5 cm behind it (gripper_near_m 8 cm)


def test_a_resting_block_within_the_jitter_is_accepted_and_the_first_state_is_the_reference() -> None:
    block = check()
    assert block.judge(state(FAR, moved((0.3, 0.0, 0.0)))) == ""  # no reference yet: anything starts one
    block.accept(state(FAR, BLOCK))
    assert block.judge(state(FAR, moved((0.0015, 0.0, 0.0)))) == ""  # 1.5 mm < 2 mm jitter


def test_a_block_moving_with_the_gripper_far_moved_alone_and_beyond_any_push_jumped() -> None:
    block = check()
    block.accept(state(FAR, BLOCK))
    assert block.judge(state(FAR, moved((0.03, 0.0, 0.0)))) == BLOCK_MOVED_ALONE  # 30 mm > 2 mm, < 2 + 54.9 mm
    assert block.judge(state(FAR, moved((0.10, 0.0, 0.0)))) == BLOCK_JUMP  # 100 mm > 2 + 54.9 mm: no push does that


def test_a_push_moves_the_block_as_far_as_the_gripper_step_explains_no_further() -> None:
    block = check()
    block.accept(state(NEAR, BLOCK))
    gripper = moved((0.02, 0.0, 0.0), NEAR)  # the gripper steps 20 mm toward the block
    assert block.judge(state(gripper, moved((0.02, 0.0, 0.0)))) == ""  # 20 mm <= 2 + 1.5 x 20 = 32 mm
    assert block.judge(state(gripper, moved((0.05, 0.0, 0.0)))) == BLOCK_JUMP  # 50 mm > 32 mm, the gripper near


def test_a_pushed_block_slides_on_no_further_than_its_last_step() -> None:
    block = check()
    block.accept(state(FAR, BLOCK))
    block.accept(state(FAR, moved((0.02, 0.0, 0.0))))  # seen sliding 20 mm (accept does not judge)
    assert block.last_step_m == pytest.approx(0.02)
    assert block.judge(state(FAR, moved((0.035, 0.0, 0.0)))) == ""  # slides 15 mm <= 2 + 20 mm
    assert block.judge(state(FAR, moved((0.05, 0.0, 0.0)))) == BLOCK_MOVED_ALONE  # 30 mm > 22 mm


def test_a_fall_explains_downward_motion_only() -> None:
    block = check()
    block.accept(state(FAR, BLOCK))
    fall_m = 9.81 * PERIOD_S**2  # 15.7 mm in one step
    assert block.judge(state(FAR, moved((0.0, 0.0, -0.015)))) == ""  # 15 mm down: within 2 mm + the fall
    assert fall_m > 0.015
    assert block.judge(state(FAR, moved((0.0, 0.015, 0.0)))) == BLOCK_MOVED_ALONE  # 15 mm sideways: no fall


def test_rejected_states_widen_the_allowance_by_the_steps_since_the_reference() -> None:
    block = check()
    block.accept(state(FAR, BLOCK))
    block.accept(state(FAR, moved((0.01, 0.0, 0.0))))  # slid 10 mm
    assert block.judge(state(FAR, moved((0.026, 0.0, 0.0)))) == BLOCK_MOVED_ALONE  # 16 mm > 2 + 10 mm
    block.rejected()
    assert block.judge(state(FAR, moved((0.026, 0.0, 0.0)))) == ""  # two steps since: 16 mm <= 2 + 2 x 10 mm


def test_a_slower_tracker_counts_its_steps_per_reading() -> None:
    slow = check(rate_hz=12.5)  # a reading every 2 control steps
    slow.accept(state(NEAR, BLOCK))
    slow.accept(state(NEAR, moved((0.01, 0.0, 0.0))))
    assert slow.last_step_m == pytest.approx(0.005)  # 10 mm over 2 control steps


def test_off_table_is_the_believed_block_outside_the_table_box_and_reset_forgets_it() -> None:
    block = check()
    assert not block.off_table
    block.accept(state(FAR, BLOCK))
    assert not block.off_table
    block.accept(state(FAR, (1.60, 0.75, 0.30)))  # past the table's far edge (x 1.55) and below its top
    assert block.off_table
    block.reset()
    assert not block.off_table and block.block is None


def test_the_noise_allowance_follows_the_tracker_noise() -> None:
    noisy = BlockCheck(tracker(noise_m=0.001), fetch_push_contract(2), PERIOD_S, MAX_STEP_M)
    noisy.accept(state(FAR, BLOCK))
    allowance = 6.0 * math.sqrt(2.0) * math.sqrt(3) * 0.001 + REST_JITTER_M  # 16.7 mm
    assert noisy.judge(state(FAR, moved((allowance - 0.001, 0.0, 0.0)))) == ""
    assert noisy.judge(state(FAR, moved((allowance + 0.001, 0.0, 0.0)))) == BLOCK_MOVED_ALONE


def test_a_contract_without_a_block_is_refused() -> None:
    with pytest.raises(ValueError, match="no block_slice"):
        BlockCheck(tracker(), fetch_reach_contract(2), PERIOD_S, MAX_STEP_M)
