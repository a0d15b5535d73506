"""A hand-written push controller for the Fetch push task: the demonstrator that behaviour cloning learns from.

numpy only. It reads the Fetch object task's observation (gripper and block positions, metres) and the desired goal,
and for each step of a batch returns a Fetch command (``[n, 4]``: x, y, z in [-1, 1] at 5 cm per unit, the gripper
command 0). The goal line runs from the goal through the block and on behind it.

``route="around"`` (the default; the launch files' ``scripted_push_around``) stays at the block's height:

1. not behind the block (its centre less than ``behind_m / 2`` behind the block's along the line) and off the line:
   go to the side of the block, ``clearance_m`` off the line on the gripper's side, ``behind_m / 2`` behind the
   block's centre (so the fingers pass beside the block, not through it);
2. behind the block, off the line: go to the point ``behind_m`` behind the block's centre on the line;
3. on the line: push along it, aiming the gripper ``contact_m`` short of the goal (the block's half-size plus a
   little: the block stops on the goal).

``route="over"`` (the launch files' ``scripted_push``, the learning benchmark's) is the first version: off the line
it travels ``hover_m`` above the block to the point behind it, goes down (``down_m``), then pushes. Its descent is
what the cell's safety filter slows most: the workspace barrier plans with twice the arm's gain bound, so a gripper
closing on the box's floor (just below the table-top gripper) closes about a fifth of the gap per step.

Every step is decided afresh from the observation, so a block that slides off the line sends the gripper back
behind it. ``gain`` stays below 1: the delayed task's commands arrive 2 control steps late, and full gain would
overshoot by the commands still in flight. On ``DelayedFetchPush-v0`` (delay 2, its own goals, 50 steps) the around
route lands 97% of seeds 20000-20099 (tuned on) and 97.3% of seeds 30000-30299 (not), 95% and 97.3% through the push
cell's safety filter (``safety_spec=shipped:calibration/sim_fetch_push.yaml``); the over route 83% and 84.7% (48% and
51% through the filter; with a 5 cm hover it knocks the block: 53% of 100 episodes, seed 777).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envs.object_approach import GRIPPER_XYZ, OBJECT_XYZ

FETCH_METRES_PER_ACTION = 0.05  # Fetch moves its mocap this far per unit command and control step (metres)
FETCH_ACTION_DIM = 4  # x, y, z and the gripper's opening
MIN_LINE_M = 1e-9  # a goal on the block's centre has no direction: any unit vector serves (metres)
ROUTES = ("around", "over")  # how the gripper gets behind the block: beside it at its height, or above it


@dataclass(frozen=True)
class ScriptedPush:
    """The push controller (module docstring). Distances in metres.

    :param gain: share of the remaining distance to the current target commanded per step, in (0, 1].
    :param behind_m: the gripper's centre this far behind the block's centre, on the goal line, before it pushes.
    :param on_line_m: horizontal error below which the gripper counts as behind the block (it then pushes).
    :param contact_m: the push aims the gripper this far short of the goal.
    :param route: "around" (beside the block at its height) or "over" (above it, then down).
    :param clearance_m: the around route passes this far from the goal line, beside the block's centre.
    :param hover_m: the over route's height above the block's centre while travelling to the point behind it.
    :param down_m: the over route's height error above the block's centre below which the push starts.
    """

    gain: float = 0.4
    behind_m: float = 0.055
    on_line_m: float = 0.01
    contact_m: float = 0.045
    route: str = "around"
    clearance_m: float = 0.075
    hover_m: float = 0.08
    down_m: float = 0.01

    def __post_init__(self) -> None:
        if not 0.0 < self.gain <= 1.0:
            raise ValueError(f"gain must be in (0, 1], got {self.gain}")
        if self.route not in ROUTES:
            raise ValueError(f"route must be one of {ROUTES}, got {self.route!r}")
        for name in ("behind_m", "on_line_m", "contact_m", "clearance_m", "hover_m", "down_m"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be a finite distance >= 0 metres, got {value}")

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Commands ``[n, 4]`` for a batch of Fetch push observations (``observation [n, >=6]``, ``desired_goal
        [n, 3]``)."""
        state, goal = np.asarray(obs["observation"]), np.asarray(obs["desired_goal"])
        if state.ndim != 2 or goal.ndim != 2 or len(state) != len(goal):
            raise ValueError(
                f"ScriptedPush takes a batch: observation [n, d] and desired_goal [n, 3], got {state.shape} and "
                f"{goal.shape}"
            )
        grip, block = state[:, GRIPPER_XYZ], state[:, OBJECT_XYZ]
        line = goal[:, :2] - block[:, :2]
        line = line / np.maximum(np.linalg.norm(line, axis=1, keepdims=True), MIN_LINE_M)
        behind = block[:, :2] - self.behind_m * line
        push_to = goal[:, :2] - self.contact_m * line
        off_line = np.linalg.norm(grip[:, :2] - behind, axis=1) > self.on_line_m
        target = np.empty_like(grip)
        if self.route == "around":
            beside = grip[:, :2] - block[:, :2]
            ahead = np.sum(beside * line, axis=1) > -0.5 * self.behind_m  # not yet behind the block's centre
            across = np.stack([-line[:, 1], line[:, 0]], axis=1)
            side = np.where(np.sum(beside * across, axis=1) < 0.0, -1.0, 1.0)  # the gripper's side of the line
            waypoint = block[:, :2] + self.clearance_m * side[:, None] * across - 0.5 * self.behind_m * line
            lined_up = np.where(off_line[:, None], behind, push_to)
            target[:, :2] = np.where((off_line & ahead)[:, None], waypoint, lined_up)
            target[:, 2] = block[:, 2]
        else:
            high = grip[:, 2] > block[:, 2] + self.down_m
            target[:, :2] = np.where((off_line | high)[:, None], behind, push_to)
            target[:, 2] = block[:, 2] + np.where(off_line, self.hover_m, 0.0)
        actions = np.zeros((len(grip), FETCH_ACTION_DIM))
        actions[:, :3] = np.clip(self.gain * (target - grip) / FETCH_METRES_PER_ACTION, -1.0, 1.0)
        return actions
