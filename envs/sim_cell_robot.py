"""The simulated cell: both arms in one MuJoCo scene (``envs.cell_scene``), each served on its own pty.

Each arm speaks ``deploy.wire`` on its own pty exactly as ``envs.sim_robot.SimRobot`` does (it *is* a ``SimRobot``,
whose plant is one arm of the cell: :class:`CellArm`), so each arm's runtime cannot tell it from a single arm. The
difference is who steps the physics: one host thread serves both ptys and, once per control period, steps the one
physics with both arms' newest commands (or holds), then sends each arm its state. Real-time only (a lock-step
cell would need both runtimes to answer in step). Per arm:

- the state is the arm's FetchReach state in its own frame (``CellScene.arm_state``, noise-free), its delay line
  the spec's delay (fixed, or drawn per HOME from the spec's range);
- a ``HomeMsg`` puts only that arm back at its start pose (``CellScene.reset_arm``) and empties its delay line; the
  host's period clock runs on;
- the e-stop, the faults (``SimFaults``) and the records (``trace``, ``received``, ``counts``) are the ``SimRobot``'s.

The truth the tests and the benchmark judge by: at every 2 ms physics substep the gripper centres' distance and any
contact between the arms (``CellScene.control_step``). A control step whose closest distance fell below
``min_separation_m`` is a separation violation, one in which the arms touched a contact; ``separation`` keeps both
counts, the closest distance seen, and which episode of each arm (its HOMEs so far) each violation fell in.

    cell = SimCellRobot().start()
    port0, port1 = cell.port_names         # /dev/pts/N, one per arm
    ...
    cell.stop()
"""

from __future__ import annotations

import math
import select
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deploy.cell.layout import CellLayout
from deploy.contract import ActionHistory, apply_delay, fetch_reach_contract
from deploy.robot_spec import RobotSpec, as_robot_spec
from deploy.runtime.separation import DEFAULT_MIN_SEPARATION_M
from deploy.wire import LinkError
from envs.cell_scene import CellScene
from envs.sim_faults import SimFaults
from envs.sim_robot import TRACE_LEN, SimRobot
from envs.two_arm_cell import TwoArmCellEnv

VIOLATIONS_KEPT = 10_000  # violation records kept for the report
CONTACTS_SUMMARIZED = 50  # contact records the summary carries (each: its step, links, each arm's episode and HOME age)
JUST_HOMED_STEPS = 2  # a touch this many control steps after an arm's HOME or fewer is counted as the HOME's


class CellArm:
    """One arm of the simulated cell, as the plant a ``SimRobot`` serves (``SimRobot(plant=...)``).

    :param scene: the cell's physics (shared by both arms).
    :param arm: which arm (0 or 1).
    :param spec: the robot spec (delay range; the contract's history length is its upper end).
    :param rng: draws the delay per HOME when the spec's range is not a single value.
    """

    def __init__(self, scene: CellScene, arm: int, spec: RobotSpec, rng: np.random.Generator) -> None:
        self.scene, self.arm, self._rng = scene, arm, rng
        self.delay_range = spec.delay_range
        self.contract = fetch_reach_contract(spec.delay_range[1])
        self.history = ActionHistory(self.contract.history_len, self.contract.action_dim)
        self.delay = spec.delay_range[1]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        """HOME: this arm at its start pose, its delay line empty (``seed`` picks nothing: the runtime has the goal)."""
        self.scene.reset_arm(self.arm)
        self.history.clear()
        lo, hi = self.delay_range
        self.delay = int(self._rng.integers(lo, hi + 1)) if lo < hi else hi
        return self.observe(), {}

    def step(self, action: np.ndarray) -> tuple[dict, ...]:
        raise RuntimeError("a cell arm does not step alone: SimCellRobot steps both arms' physics together")

    def applied(self, command: np.ndarray) -> np.ndarray:
        """Push this step's command into the delay line; the (clipped) command the physics applies now."""
        return apply_delay(self.history, np.clip(command, -1.0, 1.0), self.delay)

    def observe(self) -> dict[str, np.ndarray]:
        return {"observation": np.concatenate((self.scene.arm_state(self.arm), self.history.flat()))}

    def _physics_state(self) -> np.ndarray:
        """The arm's true state in its frame (``SimRobot.gripper_position_m`` reads the position from it)."""
        return self.scene.arm_state(self.arm)

    def close(self) -> None:
        """Nothing to close: the scene belongs to the cell."""


@dataclass
class SeparationRecord:
    """The truth about the arms' separation over a run (metres, control steps). Two kinds of violation: the gripper
    centres closer than ``min_separation_m`` at a substep (``separation``), and any geom of one arm touching one of
    the other (``contact``: links behind the grippers can touch while the centres are well apart)."""

    min_separation_m: float
    steps: int = 0
    separation_steps: int = 0  # steps whose closest centre distance fell below min_separation_m
    contact_steps: int = 0  # steps in which the arms touched
    violation_steps: int = 0  # steps with either
    closest_m: float = math.inf
    violations: list[dict[str, Any]] = field(default_factory=list)  # step, closest_m, contact, episode of each arm
    contact_links: Counter[str] = field(default_factory=Counter)  # steps with a touch, by the links that met
    contacts_after_home: int = 0  # steps with a touch within JUST_HOMED_STEPS of either arm's HOME

    def add(
        self,
        step: int,
        closest_m: float,
        touched: bool,
        episodes: tuple[int, ...],
        links: tuple[str, str] | None = None,
        since_home: tuple[int, ...] = (),
    ) -> None:
        """One control step: its closest centre distance (metres), whether the arms touched, each arm's episode,
        the links of the first touch (arm 0's, arm 1's; ``CellScene.last_contact``) and each arm's control steps
        since its latest HOME (a HOME puts an arm back at once: a touch right after one is the HOME's)."""
        self.steps += 1
        self.closest_m = min(self.closest_m, closest_m)
        too_close = closest_m < self.min_separation_m
        self.separation_steps += too_close
        self.contact_steps += touched
        named = " / ".join(links) if touched and links else ""
        if touched:
            self.contact_links[named or "unknown"] += 1
            self.contacts_after_home += bool(since_home) and min(since_home) <= JUST_HOMED_STEPS
        if touched or too_close:
            self.violation_steps += 1
            if len(self.violations) < VIOLATIONS_KEPT:
                self.violations.append(
                    {
                        "step": step,
                        "closest_m": closest_m,
                        "contact": touched,
                        "links": named,
                        "episodes": list(episodes),
                        "steps_since_home": list(since_home),
                    }
                )

    def summary(self) -> dict[str, Any]:
        separation = {tuple(v["episodes"]) for v in self.violations if v["closest_m"] < self.min_separation_m}
        contact = {tuple(v["episodes"]) for v in self.violations if v["contact"]}
        return {
            "min_separation_m": self.min_separation_m,
            "steps": self.steps,
            "separation_steps": self.separation_steps,
            "contact_steps": self.contact_steps,
            "violation_steps": self.violation_steps,
            "separation_episode_pairs": len(separation),
            "contact_episode_pairs": len(contact),
            "violation_episode_pairs": len(separation | contact),
            "closest_m": self.closest_m,
            "contact_links": dict(self.contact_links.most_common()),
            "contacts_after_home": self.contacts_after_home,
            "contacts": [v for v in self.violations if v["contact"]][:CONTACTS_SUMMARIZED],
        }


class SimCellRobot:
    """Both arms of the cell on their own ptys, one physics, one clock (module docstring).

    :param spec: the robot spec of both arms (None: ``calibration/sim_fetch.yaml``).
    :param start_gap_m: distance between the grippers' start positions (``CellScene``), metres.
    :param min_separation_m: the separation a violation falls below, metres.
    :param control_period_s: the physics' control period (None: the contract's 0.04 s).
    :param seed: seed of the delay draws.
    """

    def __init__(
        self,
        spec: RobotSpec | str | None = None,
        start_gap_m: float = 0.3,
        min_separation_m: float = DEFAULT_MIN_SEPARATION_M,
        control_period_s: float | None = None,
        seed: int = 0,
    ) -> None:
        spec = as_robot_spec(spec)
        self.scene = CellScene((0, 1), start_gap_m)
        rng = np.random.default_rng(seed)
        self.arms = [CellArm(self.scene, arm, spec, rng) for arm in self.scene.arms]
        self.robots = [SimRobot(mode="realtime", control_period_s=control_period_s, plant=arm) for arm in self.arms]
        self.period_s = self.robots[0].period_s
        self.separation = SeparationRecord(float(min_separation_m))
        self.distance_trace: deque[float] = deque(maxlen=TRACE_LEN)  # closest distance per control step (metres)
        self.step_times: deque[float] = deque(maxlen=TRACE_LEN)  # time.monotonic() of each control step
        self.counts: dict[str, Any] = {"overruns": 0}
        self.steps = 0
        self._homes_seen = [0] * len(self.arms)  # each arm's HOMEs so far, and the step of its latest
        self._home_step = [0] * len(self.arms)
        self.link_error: LinkError | None = None
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def port_names(self) -> tuple[str, ...]:
        return tuple(robot.port_name for robot in self.robots)

    @property
    def port_name(self) -> tuple[str, ...]:  # SimRobotProcess reads this name
        return self.port_names

    def faults(self, arm: int) -> SimFaults:
        """Arm ``arm``'s fault switches."""
        return self.robots[arm].faults

    def layout(self) -> CellLayout:
        """The cell's frames, as each arm's runtime is configured with them."""
        return self.scene.layout()

    def home_m(self, arm: int) -> tuple[float, float, float]:
        """Where a HOME leaves arm ``arm``'s gripper, in the cell (world) frame, metres."""
        return tuple(float(v) for v in self.scene.start_grip[arm])  # type: ignore[return-value]

    def grip_world(self) -> np.ndarray:
        """Both grippers' true positions in the cell (world) frame ``[2, 3]``, metres."""
        return np.stack([self.scene.grip_pos(arm) for arm in self.scene.arms])

    # Lifecycle ------------------------------------------------------------------------------------------------
    def start(self) -> SimCellRobot:
        if self._thread is not None:
            raise RuntimeError("SimCellRobot already started")
        self._thread = threading.Thread(target=self.serve, name="sim-cell-robot", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close both ports (idempotent)."""
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for robot in self.robots:
            robot.stop()

    def __enter__(self) -> SimCellRobot:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Serving --------------------------------------------------------------------------------------------------
    def serve(self) -> None:
        """Serve both arms until ``stop()`` or a port fails (``link_error``)."""
        try:
            self._serve()
        except LinkError as err:
            self.link_error = err
        self.counts.update(self.separation.summary(), steps=self.steps)

    def _serve(self) -> None:
        robots = self.robots
        fds = [robot.fileno for robot in robots]
        next_step = time.monotonic() + self.period_s
        while not self._stop_event.is_set():
            due = min(next_step, *(robot.next_due_s() for robot in robots))
            select.select(fds, [], [], max(0.0, due - time.monotonic()))
            for robot in robots:
                robot.service()
            if time.monotonic() >= next_step:
                self._step_all()
                next_step += self.period_s
                if time.monotonic() > next_step:  # fell behind by a whole period: resynchronise, count it
                    self.counts["overruns"] += 1
                    next_step = time.monotonic() + self.period_s
        for robot in robots:  # what the runtimes wrote before stop() (their final e-stops) still counts
            robot.service()

    def _step_all(self) -> None:
        """One control step of the cell: both arms' commands through their delay lines, the physics, the states."""
        inputs = [robot.take_step_input() for robot in self.robots]
        applied = {arm.arm: arm.applied(action) for arm, (action, _, _) in zip(self.arms, inputs, strict=True)}
        closest, touched = self.scene.control_step(applied)
        episodes = tuple(robot.counts["homes"] for robot in self.robots)
        for arm, homes in enumerate(episodes):
            if homes != self._homes_seen[arm]:
                self._homes_seen[arm], self._home_step[arm] = homes, self.steps
        since_home = tuple(self.steps - step for step in self._home_step)
        self.separation.add(self.steps, closest, touched, episodes, self.scene.last_contact, since_home)
        self.distance_trace.append(closest)
        self.step_times.append(time.monotonic())
        self.steps += 1
        for robot, arm, (_, seq, holding) in zip(self.robots, self.arms, inputs, strict=True):
            robot.step_done(arm.observe(), seq, holding)


def cell_goals(first_seed: int, n: int, **env_kwargs: Any) -> np.ndarray:
    """The goal pairs ``[n, 2, 3]`` the cell env draws for seeds ``first_seed, first_seed + 1, ...``, each in its own
    arm's frame (what each arm's runtime is given): the same pairs a pure-sim evaluation with those seeds serves."""
    env = TwoArmCellEnv(**env_kwargs)
    goals = []
    for seed in range(first_seed, first_seed + n):
        env.reset(seed=seed)
        goals.append(env.goals.copy())
    env.close()
    return np.stack(goals)
