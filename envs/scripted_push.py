"""A hand-written push controller for the Fetch push task: the demonstrator that behaviour cloning learns from.

numpy only. It reads the Fetch object task's observation (gripper and block positions, metres; the commands still in
flight, which ``envs.ActionDelay`` appends) and the desired goal, and for each step of a batch returns a Fetch command
(``[n, 4]``: x, y, z in [-1, 1], the gripper command 0). The goal line runs from the goal through the block and on
behind it.

Every decision is made on where the gripper will be when this step's command lands: its position plus
``response_m`` per unit of each of the ``delay`` commands still in flight (a Smith predictor; the delayed task's
commands arrive 2 control steps late, and a controller that reads the gripper where it is now overshoots by the
commands already sent). In the step a command lands the gripper moves about 0.6 of Fetch's 5 cm mocap step per unit
(a least-squares fit over 300 episodes: 0.52-0.59 in that step, 0.06 in the next), so ``response_m`` is 3 cm.

``route="over"`` (the default):

1. off the line: go to the point ``behind_m`` behind the block's centre on the line, ``hover_m`` above the block
   (high enough that the fingers clear it). A gripper below half that height whose straight path passes within
   ``keep_out_m`` of the block's centre rises first (from the start pose, beside the block, it used to drive
   through it: 5% of episodes);
2. behind the block but above it: go down to the block's height;
3. behind the block and down: push along the line, aiming the gripper ``contact_m`` short of the goal (the block's
   half-size plus a little: the block stops on the goal), at ``push_gain``: slowly enough that the block, which
   slides on when the gripper slows, stops on the goal. The push goes on while the gripper stays within
   ``push_lateral_m`` of the line and between ``push_ahead_m`` ahead of the block's centre (the block moves on with
   it) and ``push_behind_m`` behind it: without that window a gripper in contact counted as off the line (it is
   nearer the block than ``behind_m``), went back up after one or two commands and struck the block instead of
   pushing it.

``route="around"`` stays at the block's height: not yet behind the block (its centre less than ``behind_m / 2``
behind the block's along the line) and off the line, it goes to the side of the block, ``clearance_m`` off the line
on the gripper's side, ``behind_m / 2`` behind the block's centre (so the fingers pass beside the block, not through
it); behind the block, to the point ``behind_m`` behind it on the line; then it pushes as above. It was written for
the push cell, whose safety filter slowed the first version's descent (the workspace barrier plans with twice the
arm's gain bound, so a gripper closing on the box's floor closes about a fifth of the gap per step); with the
prediction the over route's descent is quick enough there too.

Both routes leave a block within ``hold_m`` of the goal alone (the command is zero): near the goal the line's
direction swings with every millimetre the block moves, and a gripper that kept pushing pushed it off.

Every step is decided afresh from the observation, so a block that slides off the line sends the gripper back
behind it. On ``DelayedFetchPush-v0`` (delay 2, its own goals, 50 steps) the over route lands SEE_FIGURES
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envs.object_approach import GRIPPER_XYZ, OBJECT_XYZ

FETCH_METRES_PER_ACTION = 0.05  # Fetch moves its mocap this far per unit command and control step (metres)
FETCH_ACTION_DIM = 4  # x, y, z and the gripper's opening
FETCH_OBJECT_STATE_DIM = 25  # gymnasium-robotics' Fetch object observation; ActionDelay appends its commands after it
MIN_LINE_M = 1e-9  # a goal on the block's centre has no direction: any unit vector serves (metres)
ROUTES = ("around", "over")  # how the gripper gets behind the block: beside it at its height, or above it


@dataclass(frozen=True)
class ScriptedPush:
    """The push controller (module docstring). Distances in metres.

    :param gain: share of the remaining distance to the current target commanded per step, in (0, 1], measured
        from where the commands in flight will leave the gripper.
    :param behind_m: the gripper's centre this far behind the block's centre, on the goal line, before it pushes.
    :param on_line_m: horizontal error below which the gripper counts as behind the block (it then pushes).
    :param contact_m: the push aims the gripper this far short of the goal.
    :param route: "over" (above the block, then down) or "around" (beside the block at its height).
    :param clearance_m: the around route passes this far from the goal line, beside the block's centre.
    :param hover_m: the over route's height above the block's centre while travelling to the point behind it.
    :param down_m: height error above the block's centre below which the gripper counts as down (it may push).
    :param delay: control steps each command waits before it acts (the env's ``ActionDelay``): the last ``delay``
        commands of the observation are in flight (0: an env without delay).
    :param response_m: how far the gripper moves per unit command in the step the command lands.
    :param push_gain: ``gain`` while pushing, in (0, 1].
    :param push_lateral_m: the push goes on while the gripper is within this of the goal line ...
    :param push_behind_m: ... no more than this behind the block's centre ...
    :param push_ahead_m: ... and no more than this ahead of it.
    :param keep_out_m: the over route rises first while its low gripper's path passes within this of the block.
    :param hold_m: a block within this of the goal is left alone.
    """

    gain: float = 0.8
    behind_m: float = 0.055
    on_line_m: float = 0.01
    contact_m: float = 0.045
    route: str = "over"
    clearance_m: float = 0.075
    hover_m: float = 0.08
    down_m: float = 0.01
    delay: int = 2
    response_m: float = 0.03
    push_gain: float = 0.3
    push_lateral_m: float = 0.02
    push_behind_m: float = 0.08
    push_ahead_m: float = 0.03
    keep_out_m: float = 0.06
    hold_m: float = 0.03

    def __post_init__(self) -> None:
        for name in ("gain", "push_gain"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        if self.route not in ROUTES:
            raise ValueError(f"route must be one of {ROUTES}, got {self.route!r}")
        if isinstance(self.delay, bool) or not isinstance(self.delay, int) or self.delay < 0:
            raise ValueError(f"delay must be a whole number of control steps >= 0, got {self.delay!r}")
        if not (np.isfinite(self.response_m) and self.response_m > 0.0):
            raise ValueError(f"response_m must be a finite distance > 0 metres per unit command, got {self.response_m}")
        for name in (
            "behind_m",
            "on_line_m",
            "contact_m",
            "clearance_m",
            "hover_m",
            "down_m",
            "push_lateral_m",
            "push_behind_m",
            "push_ahead_m",
            "keep_out_m",
            "hold_m",
        ):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be a finite distance >= 0 metres, got {value}")

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Commands ``[n, 4]`` for a batch of Fetch push observations (``observation [n, 25 + 4k]`` with the ``k >=
        delay`` commands ``ActionDelay`` appends, oldest first; ``desired_goal [n, 3]``)."""
        state, goal = np.asarray(obs["observation"]), np.asarray(obs["desired_goal"])
        if state.ndim != 2 or goal.ndim != 2 or len(state) != len(goal):
            raise ValueError(
                f"ScriptedPush takes a batch: observation [n, d] and desired_goal [n, 3], got {state.shape} and "
                f"{goal.shape}"
            )
        in_flight = FETCH_ACTION_DIM * self.delay
        if state.shape[1] < FETCH_OBJECT_STATE_DIM + in_flight:
            raise ValueError(
                f"with delay {self.delay} ScriptedPush reads the {self.delay} commands in flight that ActionDelay "
                f"appends to Fetch's {FETCH_OBJECT_STATE_DIM} observation entries; this observation has "
                f"{state.shape[1]}: run it on a delayed env, or with delay=0 on one without delay"
            )
        sent = state[:, state.shape[1] - in_flight :].reshape(len(state), self.delay, FETCH_ACTION_DIM)
        grip = state[:, GRIPPER_XYZ] + self.response_m * sent[:, :, :3].sum(axis=1)  # where this command starts
        block = state[:, OBJECT_XYZ]
        line = goal[:, :2] - block[:, :2]
        to_goal = np.linalg.norm(line, axis=1)
        line = line / np.maximum(to_goal, MIN_LINE_M)[:, None]
        behind = block[:, :2] - self.behind_m * line
        push_to = goal[:, :2] - self.contact_m * line
        beside = grip[:, :2] - block[:, :2]
        along = -np.sum(beside * line, axis=1)  # how far behind the block's centre the gripper is, along the line
        lateral = np.abs(beside[:, 0] * line[:, 1] - beside[:, 1] * line[:, 0])
        down = grip[:, 2] < block[:, 2] + self.down_m
        pushing = down & (lateral < self.push_lateral_m) & (-self.push_ahead_m < along) & (along < self.push_behind_m)
        off_line = (np.linalg.norm(grip[:, :2] - behind, axis=1) > self.on_line_m) & ~pushing
        target = np.empty_like(grip)
        if self.route == "around":
            ahead = along < 0.5 * self.behind_m  # not yet behind the block's centre
            across = np.stack([-line[:, 1], line[:, 0]], axis=1)
            side = np.where(np.sum(beside * across, axis=1) < 0.0, -1.0, 1.0)  # the gripper's side of the line
            waypoint = block[:, :2] + self.clearance_m * side[:, None] * across - 0.5 * self.behind_m * line
            lined_up = np.where(off_line[:, None], behind, push_to)
            target[:, :2] = np.where((off_line & ahead)[:, None], waypoint, lined_up)
            target[:, 2] = block[:, 2]
            push = ~off_line
        else:
            target[:, :2] = np.where((off_line | ~down)[:, None], behind, push_to)
            target[:, 2] = block[:, 2] + np.where(off_line, self.hover_m, 0.0)
            rise = off_line & (grip[:, 2] < block[:, 2] + 0.5 * self.hover_m) & self._passes_block(grip, target, block)
            target[:, :2] = np.where(rise[:, None], grip[:, :2], target[:, :2])
            push = ~off_line & down
        hold = to_goal < self.hold_m
        target = np.where(hold[:, None], grip, target)
        gain = np.where(push & ~hold, self.push_gain, self.gain)[:, None]
        actions = np.zeros((len(grip), FETCH_ACTION_DIM))
        actions[:, :3] = np.clip(gain * (target - grip) / self.response_m, -1.0, 1.0)
        return actions

    def _passes_block(self, grip: np.ndarray, target: np.ndarray, block: np.ndarray) -> np.ndarray:
        """Whether the straight horizontal path from ``grip`` to ``target`` passes within ``keep_out_m`` of the
        block's centre ([n] bools)."""
        path = target[:, :2] - grip[:, :2]
        share = np.sum((block[:, :2] - grip[:, :2]) * path, axis=1) / np.maximum(np.sum(path * path, axis=1), 1e-12)
        nearest = grip[:, :2] + np.clip(share, 0.0, 1.0)[:, None] * path
        return np.linalg.norm(nearest - block[:, :2], axis=1) < self.keep_out_m
