"""A hand-written push controller for the Fetch push task: the demonstrator that behaviour cloning learns from.

numpy only. It reads the Fetch object task's observation (gripper and block positions, metres; the over route also
the commands in flight that ``envs.ActionDelay`` appends) and the desired goal, and for each step of a batch returns a
Fetch command (``[n, 4]``: x, y, z in [-1, 1], the gripper command 0). The goal line runs from the goal through the
block and on behind it.

``route="around"`` (the default; the launch files' ``scripted_push_around``) stays at the block's height:

1. not behind the block (its centre less than ``behind_m / 2`` behind the block's along the line) and off the line:
   go to the side of the block, ``clearance_m`` off the line on the gripper's side, ``behind_m / 2`` behind the
   block's centre (so the fingers pass beside the block, not through it);
2. behind the block, off the line: go to the point ``behind_m`` behind the block's centre on the line;
3. on the line: push along it, aiming the gripper ``contact_m`` short of the goal (the block's half-size plus a
   little: the block stops on the goal).

The around route commands ``gain`` of the remaining distance per step at 5 cm per unit, from where the gripper is;
``gain`` stays below 1: the delayed task's commands arrive 2 control steps late, and full gain would overshoot by the
commands still in flight.

``route="over"`` (the launch files' ``scripted_push``, the learning benchmark's) decides every step where the
gripper will be when this step's command acts: its position plus ``response_m`` per unit of each of the ``delay``
commands in flight (a Smith predictor). In the step a command acts the gripper moves about 0.6 of Fetch's 5 cm mocap
step per unit (a least-squares fit over 300 episodes: 0.52-0.59 in that step, 0.06 in the next), so ``response_m``
is 3 cm, and ``travel_gain`` / ``push_gain`` are the shares of the remaining distance closed per step:

1. off the line: go to the point ``behind_m`` behind the block's centre on the line, ``hover_m`` above the block. A
   gripper below half that height whose straight path passes within ``keep_out_m`` of the block's centre rises first
   (from the start pose beside the block the first version drove through it in 5% of episodes);
2. behind the block but above it (``down_m``): go down to the block's height;
3. behind the block and down: push along the line, aiming the gripper ``contact_m`` short of the goal, at
   ``push_gain``: slowly, because the block slides on when the gripper slows (at 3 cm a step it slid 3-4 cm past
   the goal). The push goes on while the gripper stays within ``push_lateral_m`` of the line, no more than
   ``push_behind_m`` behind the block's centre and ``push_ahead_m`` ahead of it (the block moves on with it).
   Without that window a gripper in contact counts as off the line (it is nearer the block than ``behind_m``): the
   first version went back up after one or two commands and struck the block rather than pushed it.

Its descent is what the cell's safety filter slows most (the workspace barrier plans with twice the arm's gain bound,
so a gripper closing on the box's floor, just below the table-top gripper, closes about a fifth of the gap per step),
and the runtime's position bound, which widens while motion goes unconfirmed, slows it further on the cell: the push
cell's package is cloned from the around route.

Every step is decided afresh from the observation, so a block that slides off the line sends the gripper back
behind it. On ``DelayedFetchPush-v0`` (delay 2, its own goals, 50 steps) the around
route lands 97% of seeds 20000-20099 (tuned on) and 97.3% of seeds 30000-30299 (not), 95% and 97.3% through the push
cell's safety filter (``safety_spec=shipped:calibration/sim_fetch_push.yaml``). The over route lands 100% of 300
episodes on each of seeds 0 and 1 (tuned on), 7 and 20000 (not); with noise of std 0.05 on every command, as the
demonstrations are collected, 100 / 100 / 100 / 99.7% (0.1: 99%, 0.2: 93%, seed 7); 95% through the filter (seed
7). Its first version (gain 0.4 from where the gripper is, no window, no rising first) landed 83% and 84.7% (48% and
51% through the filter; with a 5 cm hover it knocks the block: 53% of 100 episodes, seed 777).
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

    :param gain: the around route's share of the remaining distance to the current target commanded per step, at 5 cm
        per unit, in (0, 1].
    :param behind_m: the gripper's centre this far behind the block's centre, on the goal line, before it pushes.
    :param on_line_m: horizontal error below which the gripper counts as behind the block (it then pushes).
    :param contact_m: the push aims the gripper this far short of the goal.
    :param route: "around" (beside the block at its height) or "over" (above it, then down).
    :param clearance_m: the around route passes this far from the goal line, beside the block's centre.
    :param hover_m: the over route's height above the block's centre while travelling to the point behind it.
    :param down_m: the over route's height error above the block's centre below which the push starts.
    :param delay: the over route: control steps each command waits before it acts (the env's ``ActionDelay``); the
        last ``delay`` commands of the observation are in flight (0: an env without delay).
    :param response_m: the over route: how far the gripper moves per unit command in the step the command acts.
    :param travel_gain: the over route's share of the remaining distance (from where the commands in flight will
        leave the gripper) commanded per step on its way behind the block, in (0, 1].
    :param push_gain: the same while it pushes, in (0, 1].
    :param push_lateral_m: the over route's push goes on while the gripper is within this of the goal line ...
    :param push_behind_m: ... no more than this behind the block's centre ...
    :param push_ahead_m: ... and no more than this ahead of it.
    :param keep_out_m: the over route rises first while its low gripper's path passes within this of the block.
    """

    gain: float = 0.4
    behind_m: float = 0.055
    on_line_m: float = 0.01
    contact_m: float = 0.045
    route: str = "around"
    clearance_m: float = 0.075
    hover_m: float = 0.08
    down_m: float = 0.01
    delay: int = 2
    response_m: float = 0.03
    travel_gain: float = 0.8
    push_gain: float = 0.3
    push_lateral_m: float = 0.02
    push_behind_m: float = 0.08
    push_ahead_m: float = 0.03
    keep_out_m: float = 0.06

    def __post_init__(self) -> None:
        for name in ("gain", "travel_gain", "push_gain"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        if self.route not in ROUTES:
            raise ValueError(f"route must be one of {ROUTES}, got {self.route!r}")
        if isinstance(self.delay, bool) or not isinstance(self.delay, int) or self.delay < 0:
            raise ValueError(f"delay must be a whole number of control steps >= 0, got {self.delay!r}")
        if not (np.isfinite(self.response_m) and self.response_m > 0.0):
            raise ValueError(f"response_m must be a finite distance > 0 metres per unit command, got {self.response_m}")
        distances = ("behind_m", "on_line_m", "contact_m", "clearance_m", "hover_m", "down_m", "push_lateral_m")
        for name in (*distances, "push_behind_m", "push_ahead_m", "keep_out_m"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be a finite distance >= 0 metres, got {value}")

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Commands ``[n, 4]`` for a batch of Fetch push observations (``observation [n, >=6]``; the over route's
        ``[n, 25 + 4k]`` with the ``k >= delay`` commands ``ActionDelay`` appends, oldest first; ``desired_goal [n,
        3]``)."""
        state, goal = np.asarray(obs["observation"]), np.asarray(obs["desired_goal"])
        if state.ndim != 2 or goal.ndim != 2 or len(state) != len(goal):
            raise ValueError(
                f"ScriptedPush takes a batch: observation [n, d] and desired_goal [n, 3], got {state.shape} and "
                f"{goal.shape}"
            )
        return self._over(state, goal) if self.route == "over" else self._around(state, goal)

    def _around(self, state: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """The around route's commands (module docstring), from where the gripper is."""
        grip, block = state[:, GRIPPER_XYZ], state[:, OBJECT_XYZ]
        line = goal[:, :2] - block[:, :2]
        line = line / np.maximum(np.linalg.norm(line, axis=1, keepdims=True), MIN_LINE_M)
        behind = block[:, :2] - self.behind_m * line
        push_to = goal[:, :2] - self.contact_m * line
        off_line = np.linalg.norm(grip[:, :2] - behind, axis=1) > self.on_line_m
        target = np.empty_like(grip)
        beside = grip[:, :2] - block[:, :2]
        ahead = np.sum(beside * line, axis=1) > -0.5 * self.behind_m  # not yet behind the block's centre
        across = np.stack([-line[:, 1], line[:, 0]], axis=1)
        side = np.where(np.sum(beside * across, axis=1) < 0.0, -1.0, 1.0)  # the gripper's side of the line
        waypoint = block[:, :2] + self.clearance_m * side[:, None] * across - 0.5 * self.behind_m * line
        lined_up = np.where(off_line[:, None], behind, push_to)
        target[:, :2] = np.where((off_line & ahead)[:, None], waypoint, lined_up)
        target[:, 2] = block[:, 2]
        actions = np.zeros((len(grip), FETCH_ACTION_DIM))
        actions[:, :3] = np.clip(self.gain * (target - grip) / FETCH_METRES_PER_ACTION, -1.0, 1.0)
        return actions

    def _over(self, state: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """The over route's commands (module docstring), planned from where the commands in flight leave the
        gripper."""
        in_flight = FETCH_ACTION_DIM * self.delay
        if state.shape[1] < FETCH_OBJECT_STATE_DIM + in_flight:
            raise ValueError(
                f"with delay {self.delay} the over route reads the {self.delay} commands in flight that ActionDelay "
                f"appends to Fetch's {FETCH_OBJECT_STATE_DIM} observation entries; this observation has "
                f"{state.shape[1]}: run it on a delayed env, or with delay=0 on one without delay"
            )
        sent = state[:, state.shape[1] - in_flight :].reshape(len(state), self.delay, FETCH_ACTION_DIM)
        grip = state[:, GRIPPER_XYZ] + self.response_m * sent[:, :, :3].sum(axis=1)  # where this command starts
        block = state[:, OBJECT_XYZ]
        line = goal[:, :2] - block[:, :2]
        line = line / np.maximum(np.linalg.norm(line, axis=1, keepdims=True), MIN_LINE_M)
        behind = block[:, :2] - self.behind_m * line
        beside = grip[:, :2] - block[:, :2]
        along = -np.sum(beside * line, axis=1)  # how far behind the block's centre the gripper is, along the line
        lateral = np.abs(beside[:, 0] * line[:, 1] - beside[:, 1] * line[:, 0])
        down = grip[:, 2] < block[:, 2] + self.down_m
        window = (lateral < self.push_lateral_m) & (-self.push_ahead_m < along) & (along < self.push_behind_m)
        off_line = (np.linalg.norm(grip[:, :2] - behind, axis=1) > self.on_line_m) & ~(down & window)
        target = np.empty_like(grip)
        target[:, :2] = np.where((off_line | ~down)[:, None], behind, goal[:, :2] - self.contact_m * line)
        target[:, 2] = block[:, 2] + np.where(off_line, self.hover_m, 0.0)
        rise = off_line & (grip[:, 2] < block[:, 2] + 0.5 * self.hover_m) & self._passes_block(grip, target, block)
        target[:, :2] = np.where(rise[:, None], grip[:, :2], target[:, :2])
        gain = np.where(~off_line & down, self.push_gain, self.travel_gain)[:, None]
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
