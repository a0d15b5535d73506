"""The two-arm cell as one gymnasium env: two delayed Fetch arms, their goals, the separation rule, snapshots.

This is the one implementation; ``envs.two_arm_cell_parallel`` gives it PettingZoo's ParallelEnv API.

- Scene: ``envs.cell_scene`` (two gymnasium-robotics Fetch arms facing each other across one table).
- Agents: arm 0 and arm 1, stacked on the first axis of every array. Each sees the cell in its own frame.
- Action ``[2, 4]``: per arm FetchReach's command (dx, dy, dz in its own frame, unit = 5 cm; the gripper entry is
  ignored as FetchReach's is), clipped to [-1, 1], applied ``delay`` control steps late. Each arm has its own delay
  line and its own delay, fixed or drawn per episode from ``delay_range`` with the env's RNG (as
  ``DelayedFetchReach``).
- Observation (Dict of stacked arrays, row i = arm i):
  ``observation [2, 10 + 4 H + 3]``: FetchReach's 10 state values, the last H commands the arm sent (oldest
  first, H = max delay), the partner's gripper position (all in the arm's frame);
  ``achieved_goal [2, 3]``: the arm's gripper; ``desired_goal [2, 3]``: its goal.
- Team reward (sparse): 0 when both grippers are within ``distance_threshold`` of their goals and the separation
  has held, else -1; ``info["is_success"]`` is the same team outcome (1.0 / 0.0).
- Separation: the grippers' centres must stay ``min_separation_m`` apart and the arms must not touch, checked at
  every 2 ms physics substep. A violation ends the episode as a failure (``terminated``), reported in
  ``info["violation"]`` ("separation" or "contact") with the closest distance in ``info["closest_m"]``. With
  ``end_on_violation=False`` the arms instead freeze where they were and the episode runs on to the time limit
  as a failure (reward -1, is_success 0, the violation reported at every step): GRPO's groups need every member
  to run the whole episode.
- Proximity term (a training signal, off by default): with ``proximity_coef`` > 0 every step also earns
  ``-proximity_coef * (min_separation_m + proximity_margin_m - closest) / proximity_margin_m`` when the grippers came
  closer than ``min_separation_m + proximity_margin_m`` during it (closest: the smallest distance over its
  substeps; frozen arms keep theirs), reported as ``info["reward_offset"]``: the part of the reward no goal changes,
  which hindsight keeps. The sparse team reward alone ranks a member that brushed past the partner the same as one
  that kept clear, and a group in which every member collides teaches nothing; the term gives such groups a slope.
- The cell's runtimes (optional): with ``safety_spec`` every command passes what its arm's runtime runs on it (the
  safety filter, then the separation barrier, both planning from the runtime's position bound; ``envs.cell_shield``)
  before its delay line, so a policy learns the motion the cell allows; ``info["shield_cut"]`` says per arm whether
  its command was changed. The delay lines and the observation's history carry the commands sent, as on the cell.
  An arm its runtime would safe-stop (it does not follow its commands: pressed against the edge of its reach) holds
  from then on and the episode fails like a violation (``info["safe_stop"]``: "arm_<i>: <reason>"; never relabelled
  away), without counting as one.
- Goals: drawn per episode (``envs.cell_goals``: pairs far enough apart whose arms would not touch on them), or
  given: ``reset(options={"goals": g})`` poses the pair ``g`` [2, 3] (each in its arm's frame, metres) unchecked
  against the draw's filters (a search for contacts poses the pairs the draw refuses).
- Snapshot: ``snapshot()`` / ``reset(options={"snapshot": s})`` capture and restore physics, both goals, both
  delay lines and delays, the step count, the violation, the RNG, the last observation and the shield's state:
  bit-exact replay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from deploy.contract import ActionHistory, apply_delay
from deploy.robot_spec import RobotSpec, as_robot_spec
from deploy.shipped import resolve_path
from envs.cell_goals import sample_goal_pair
from envs.cell_scene import CellScene
from envs.cell_shield import CellShield, CellShieldState
from envs.delayed_fetch_reach import MAX_GOAL_RANGE_M
from envs.delayed_goal_env import check_delay_range, goal_distance
from envs.safety_shield import SHIELD_CUT_KEY  # one owner; here per arm: whether its runtime changed its command
from envs.snapshots import NEW_EPISODE_OPTION, SNAPSHOT_OPTION

N_ARMS = 2
STATE_DIM = 10  # FetchReach's state values per arm
ACTION_DIM = 4  # FetchReach's command: dx, dy, dz, gripper (ignored: blocked)
PARTNER_DIM = 3
VIOLATION_SEPARATION, VIOLATION_CONTACT = "separation", "contact"
SAFE_STOP_KEY = "safe_stop"  # info key: the first arm its runtime would have stopped, and why (None: none)
GOALS_OPTION = "goals"  # reset option: this goal pair [2, 3] (each in its arm's frame, metres) instead of a draw
AGENTS = tuple(f"arm_{i}" for i in range(N_ARMS))  # agent names (PettingZoo's possible_agents; the learner reads them)


def _given_goals(goals: Any) -> np.ndarray:
    """A goal pair passed as ``reset(options={"goals": ...})``, checked: [2, 3], finite (metres, arm frames)."""
    array = np.array(goals, dtype=np.float64)
    if array.shape != (N_ARMS, 3) or not np.all(np.isfinite(array)):
        raise ValueError(
            f"options['goals'] must be {N_ARMS} finite 3-D goals (one row per arm, each in its own frame, metres), "
            f"got {goals!r}"
        )
    return array


@dataclass
class CellSnapshot:
    """Everything the cell's next steps depend on (picklable)."""

    physics: np.ndarray
    goals: np.ndarray
    histories: tuple[np.ndarray, ...]
    delays: tuple[int, ...]
    elapsed_steps: int
    violation: str | None
    closest_m: float
    step_closest_m: float
    rng_state: dict[str, Any]
    observation: dict[str, np.ndarray] | None
    shield: CellShieldState | None = None
    safe_stop: str | None = None


class TwoArmCellEnv(gym.Env):
    """Two delayed Fetch arms across one table with crossing goals (see the module docstring).

    :param delay: fixed delay of both arms in control steps; None takes the robot spec's range.
    :param delay_range: inclusive per-episode delay range (each arm draws its own); overrides ``delay``.
    :param distance_threshold: success radius around each goal, metres.
    :param goal_range_m: half-width of the goal box around the cell centre, metres (see ``envs.cell_goals``).
    :param goal_drop_m: how far below the start height goals reach, metres.
    :param min_separation_m: the smallest allowed distance between the gripper centres, metres.
    :param end_on_violation: a violation terminates the episode (True) or freezes the arms until the time limit.
    :param start_gap_m: distance between the grippers' start positions, metres.
    :param proximity_coef: reward per step at the separation limit from the proximity term (>= 0; 0: off).
    :param proximity_margin_m: width of the band above ``min_separation_m`` where the term starts, metres.
    :param max_episode_steps: episode length in control steps.
    :param spec: robot spec (``RobotSpec`` or its file) the delay comes from; None: ``calibration/sim_fetch.yaml``.
    :param safety_spec: robot spec (or its file; ``shipped:`` names too) whose safety filter and separation barrier
        every command passes (``envs.cell_shield``); None: none.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(
        self,
        delay: int | None = None,
        delay_range: tuple[int, int] | None = None,
        distance_threshold: float = 0.05,
        goal_range_m: float = 0.15,
        goal_drop_m: float = 0.1,
        min_separation_m: float = 0.10,
        end_on_violation: bool = True,
        start_gap_m: float = 0.3,
        proximity_coef: float = 0.0,
        proximity_margin_m: float = 0.1,
        max_episode_steps: int = 50,
        spec: RobotSpec | str | None = None,
        safety_spec: RobotSpec | str | None = None,
    ) -> None:
        if not (math.isfinite(proximity_coef) and proximity_coef >= 0) or not proximity_margin_m > 0:
            raise ValueError(
                f"proximity_coef must be >= 0 (reward per step) and proximity_margin_m > 0 metres, got "
                f"{proximity_coef}, {proximity_margin_m}"
            )
        robot_spec = as_robot_spec(spec)
        if delay_range is None:
            delay_range = robot_spec.delay_range if delay is None else (int(delay), int(delay))
        self.delay_range = check_delay_range(delay_range)
        if not 0 < goal_range_m <= MAX_GOAL_RANGE_M / 2:
            raise ValueError(f"goal_range_m must be in (0, {MAX_GOAL_RANGE_M / 2}] metres, got {goal_range_m}")
        if not 0 <= goal_drop_m <= goal_range_m:
            raise ValueError(f"goal_drop_m must be in [0, goal_range_m={goal_range_m}] metres, got {goal_drop_m}")
        if distance_threshold <= 0 or min_separation_m <= 0:
            raise ValueError(
                f"distance_threshold and min_separation_m must be > 0 metres, got {distance_threshold}, "
                f"{min_separation_m}"
            )
        if max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1 control step, got {max_episode_steps}")
        self.robot_spec = robot_spec
        self.possible_agents = list(AGENTS)
        self.distance_threshold = float(distance_threshold)
        self.min_separation_m = float(min_separation_m)
        self.min_goal_gap_m = self.min_separation_m + 2 * self.distance_threshold
        self.end_on_violation = bool(end_on_violation)
        self.proximity_coef, self.proximity_margin_m = float(proximity_coef), float(proximity_margin_m)
        self.max_episode_steps = int(max_episode_steps)
        self.scene = CellScene((0, 1), start_gap_m)
        start_z = self.scene.start_grip[0][2]
        centre = np.array([*self.scene.centre, start_z])
        self.goal_low = centre + np.array([-goal_range_m, -goal_range_m, -goal_drop_m])
        self.goal_high = centre + np.array([goal_range_m, goal_range_m, goal_range_m])
        self.history_len = self.delay_range[1]
        self.histories = [ActionHistory(self.history_len, ACTION_DIM) for _ in range(N_ARMS)]
        self.delays = [self.history_len] * N_ARMS
        self.goals = np.zeros((N_ARMS, 3))  # each in its own arm's frame
        self.elapsed_steps = 0
        self.violation: str | None = None
        self.safe_stop: str | None = None  # the first arm its runtime would have stopped (shield only)
        self.closest_m = math.inf
        self._step_closest = math.inf  # closest distance during the last step (metres)
        self._last_obs: dict[str, np.ndarray] | None = None
        self.obs_dim = STATE_DIM + ACTION_DIM * self.history_len + PARTNER_DIM
        self.shield: CellShield | None = None
        if safety_spec is not None:
            homes = [self.scene.start_grip[arm] for arm in range(N_ARMS)]
            shield_spec = as_robot_spec(resolve_path(safety_spec) if isinstance(safety_spec, str) else safety_spec)
            self.shield = CellShield(shield_spec, self.scene.layout(), homes, self.history_len, self.min_separation_m)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(N_ARMS, ACTION_DIM), dtype=np.float32)
        goal_space = spaces.Box(-np.inf, np.inf, shape=(N_ARMS, 3), dtype=np.float64)
        self.observation_space = spaces.Dict(
            {
                "observation": spaces.Box(-np.inf, np.inf, shape=(N_ARMS, self.obs_dim), dtype=np.float64),
                "achieved_goal": goal_space,
                "desired_goal": goal_space,
            }
        )

    # Goals and frames ------------------------------------------------------------------------------------
    def goals_world(self) -> np.ndarray:
        """Both goals in world coordinates ``[2, 3]`` (metres)."""
        return np.stack([self.scene.to_arm(arm, self.goals[arm]) for arm in range(N_ARMS)])

    def start_world(self) -> np.ndarray:
        """Both grippers' start positions in world coordinates ``[2, 3]``."""
        return np.stack([self.scene.start_grip[arm] for arm in range(N_ARMS)])

    def _sample_goals(self) -> np.ndarray:
        to_world = tuple(lambda p, a=arm: self.scene.to_arm(a, p) for arm in range(N_ARMS))
        return sample_goal_pair(
            self.np_random,
            self.goal_low,
            self.goal_high,
            to_world,
            self.min_goal_gap_m,
            lambda world: not self.scene.arms_touch_at(world),
        )

    # Gymnasium API -------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        snapshot = (options or {}).get(SNAPSHOT_OPTION)
        if snapshot is not None:
            observation = self._restore(snapshot)
            if (options or {}).get(NEW_EPISODE_OPTION):
                self.elapsed_steps = 0
            return observation, self._reset_info()
        self.scene.set_state(self.scene.initial_state)
        lo, hi = self.delay_range
        for history in self.histories:
            history.clear()
        self.delays = [int(self.np_random.integers(lo, hi + 1)) if lo < hi else hi for _ in range(N_ARMS)]
        given = (options or {}).get(GOALS_OPTION)
        self.goals = self._sample_goals() if given is None else _given_goals(given)
        self.elapsed_steps = 0
        self.violation = self.safe_stop = None
        self.closest_m = self._step_closest = self.scene.gripper_distance()
        observation = self._observe()
        if self.shield is not None:
            self.shield.reset(observation["achieved_goal"], self.delays)
        return observation, self._reset_info()

    def _reset_info(self) -> dict[str, Any]:
        return {"delays": tuple(self.delays), "violation": self.violation, "closest_m": self.closest_m}

    def step(self, action: np.ndarray):
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (N_ARMS, ACTION_DIM):
            raise ValueError(f"action must have shape ({N_ARMS}, {ACTION_DIM}) (one row per arm), got {action.shape}")
        if not math.isfinite(action.sum()):
            raise ValueError(f"action contains NaN or inf: {action.tolist()}")
        command = np.clip(action, -1.0, 1.0)
        cut = (False,) * N_ARMS
        if self.shield is not None:
            assert self._last_obs is not None  # reset() observed
            command, cut, faults = self.shield.filter(command, self._last_obs["achieved_goal"])
            stopped = [f"arm_{arm}: {fault}" for arm, fault in enumerate(faults) if fault]
            self.safe_stop = self.safe_stop or (stopped[0] if stopped else None)
        applied = {arm: apply_delay(self.histories[arm], command[arm], self.delays[arm]) for arm in range(N_ARMS)}
        if self.violation is None:  # after a violation (end_on_violation=False) the arms stay where they were
            closest, touched = self.scene.control_step(applied)
            self._step_closest = closest
            self.closest_m = min(self.closest_m, closest)
            if touched:
                self.violation = VIOLATION_CONTACT
            elif closest < self.min_separation_m:
                self.violation = VIOLATION_SEPARATION
        self.elapsed_steps += 1
        obs = self._observe()
        reached = goal_distance(obs["achieved_goal"], obs["desired_goal"]) < self.distance_threshold
        success = bool(reached.all()) and self.violation is None and self.safe_stop is None
        offset = self._proximity_offset()
        info = {
            "is_success": np.float32(success),
            "arm_success": tuple(bool(r) for r in reached),
            "violation": self.violation,
            "closest_m": self.closest_m,
            "delays": tuple(self.delays),
            "reward_offset": offset,
        }
        if self.shield is not None:
            info[SHIELD_CUT_KEY] = cut
            info[SAFE_STOP_KEY] = self.safe_stop
        terminated = (self.violation is not None or self.safe_stop is not None) and self.end_on_violation
        truncated = self.elapsed_steps >= self.max_episode_steps and not terminated
        return obs, (-0.0 if success else -1.0) + offset, terminated, truncated, info

    def _proximity_offset(self) -> float:
        """The proximity term of the last step (0.0 when off or clear of the band)."""
        if self.proximity_coef == 0.0:
            return 0.0
        depth = (self.min_separation_m + self.proximity_margin_m - self._step_closest) / self.proximity_margin_m
        return -self.proximity_coef * depth if depth > 0 else 0.0

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        """Team reward of goal pairs, vectorized over leading axes: ``[..., 2, 3]`` each -> ``[...]`` float32.

        0 when both arms are within ``distance_threshold`` of their goals, else -1. It knows nothing of
        violations (they are not a function of the goals): a relabelling learner must keep a violated step's -1.
        """
        far = goal_distance(achieved_goal, desired_goal) > self.distance_threshold
        return -np.any(far, axis=-1).astype(np.float32)

    def _observe(self) -> dict[str, np.ndarray]:
        grips = [self.scene.grip_pos(arm) for arm in range(N_ARMS)]
        rows, achieved = [], []
        for arm in range(N_ARMS):
            state = self.scene.arm_state(arm)
            partner = self.scene.to_arm(arm, grips[1 - arm])
            rows.append(np.concatenate((state, self.histories[arm].flat(), partner)))
            achieved.append(state[:3])
        obs = {"observation": np.stack(rows), "achieved_goal": np.stack(achieved), "desired_goal": self.goals.copy()}
        self._last_obs = obs
        return {k: v.copy() for k, v in obs.items()}

    # Snapshot / restore ------------------------------------------------------------------------------
    def snapshot(self) -> CellSnapshot:
        """Capture the full state; ``reset(options={"snapshot": s})`` restores it."""
        return CellSnapshot(
            physics=self.scene.get_state(),
            goals=self.goals.copy(),
            histories=tuple(h.get_state() for h in self.histories),
            delays=tuple(self.delays),
            elapsed_steps=self.elapsed_steps,
            violation=self.violation,
            closest_m=self.closest_m,
            step_closest_m=self._step_closest,
            rng_state=self.np_random.bit_generator.state,
            observation=None if self._last_obs is None else {k: v.copy() for k, v in self._last_obs.items()},
            shield=None if self.shield is None else self.shield.get_state(),
            safe_stop=self.safe_stop,
        )

    def _restore(self, snapshot: CellSnapshot) -> dict[str, np.ndarray]:
        if not isinstance(snapshot, CellSnapshot):
            raise TypeError(f"options['snapshot'] must be a CellSnapshot from env.snapshot(), got {type(snapshot)}")
        for history, state in zip(self.histories, snapshot.histories, strict=True):
            history.set_state(state)
        self.scene.set_state(snapshot.physics)
        self.goals = snapshot.goals.copy()
        self.delays = list(snapshot.delays)
        self.elapsed_steps = snapshot.elapsed_steps
        self.violation = snapshot.violation
        self.safe_stop = snapshot.safe_stop
        self.closest_m = snapshot.closest_m
        self._step_closest = snapshot.step_closest_m
        self.np_random.bit_generator.state = snapshot.rng_state
        observation = self._observe() if snapshot.observation is None else snapshot.observation
        self._last_obs = {k: v.copy() for k, v in observation.items()}
        if self.shield is not None:
            if snapshot.shield is None:
                raise ValueError(
                    "this cell runs behind its runtimes' filters (safety_spec) and the snapshot has no shield state: "
                    "restore snapshots of a cell made with the same safety_spec"
                )
            self.shield.set_state(snapshot.shield, self._last_obs["achieved_goal"], self.delays)
        return {k: v.copy() for k, v in self._last_obs.items()}
