"""Both arms' runtime filters inside the two-arm cell's simulation: the cell policy learns the motion the cell allows.

A cell policy trained in pure simulation (95% team success) reached 59% through the runtimes on the simulated cell:
each arm's separation barrier cut 35-38% of its commands and half of the failed episodes ended 5-17 cm short of a
goal (``benchmarks/results/cell_runtime_packages.md``). The barrier plans from reaches, not points: this arm's
position bound grown by its commands in flight at twice the spec's gain bound, against the partner's reported reach
grown by one more command, never closer than ``min_separation_m`` and closing at most ``approach_fraction`` of the
spare distance per command (``deploy.runtime.separation``). A policy that brushes past its partner at 12 cm in
simulation is stopped at 25 cm on the cell. So the barrier belongs to the task the cell policy is trained on, as the
workspace barrier does to the push task's (``envs.safety_shield``).

``CellShield`` runs, for each arm and each step, what that arm's runtime runs on a command: the safety filter
(``filter_action``: workspace barrier, action and rate limits) with the true gripper position, the bound the
runtime's state check gives it (``envs.checked_bound``: a moving arm's is centimetres wide) and the displacement
still owed by the commands sent, then the runtime's own ``SeparationBarrier`` (its cut, its partner-home keep-out
box) planning from that bound and the partner's report of the step before (each arm sends one after every command;
the partner decides within the next period, so the report is grown by one command, as on the cell). Both arms
decide on the same reports (they act together), then both publish. Not modelled: the wider bound of motion the
states have not confirmed yet, and a partner report that arrives late (both make the cell's barrier stricter).

numpy; the barrier and filter are the robot side's (``deploy.runtime``): one implementation, not a copy.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deploy.cell.layout import ARMS, CellLayout
from deploy.cell.report import PositionReport
from deploy.contract import fetch_reach_contract, in_flight_displacement_m
from deploy.robot_spec import RobotSpec
from deploy.runtime.safety import FilterResult, SafetyLimits, filter_action
from deploy.runtime.separation import (
    DEFAULT_APPROACH_FRACTION,
    DEFAULT_HOME_KEEPOUT_M,
    SeparationBarrier,
    SeparationConfig,
)
from envs.checked_bound import CheckedBound

POSITION_SLICE = (0, 3)  # the gripper position's place in a Fetch arm's state (metres)
REPORT_AGE_PERIODS = 0.5  # a partner's report is this many periods old when an arm decides (under one: one command)


@dataclass
class CellShieldState:
    """What the shield's next decisions depend on (picklable; part of the cell's snapshot)."""

    sent: tuple[np.ndarray, ...]  # per arm: the commands sent, newest last (its delay in flight + the newest applied)
    previous: np.ndarray  # [2, 4]: each arm's command sent last step (the rate limit's reference)
    reports: dict[int, PositionReport]  # each arm's newest report
    step: int  # steps decided (the reports' clock, in control periods)
    bounds: tuple[Any, ...]  # per arm: its CheckedBound's state


class _ArmView:
    """What one arm's barrier reads of its runtime: the bound, the state, the commands in flight."""

    def __init__(self, size: int, spec: RobotSpec, largest_command: float) -> None:
        self.size = size
        self.state = np.zeros(POSITION_SLICE[1])  # the true gripper position, arm frame (metres)
        self.bound = CheckedBound(spec, largest_command)
        self.sent: deque[np.ndarray] = deque()
        self.delay = 0
        self.published = False  # the newest command sent counts as in flight (after it went out)

    @property
    def bounds(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        return self.bound.bounds

    def observe(self, position: np.ndarray) -> None:
        """A new state at ``position``: its bound, from the command the arm applied in the step (the oldest of the
        ``delay + 1`` sent; none before the line filled)."""
        applied = self.sent[0] if len(self.sent) == self.delay + 1 else np.zeros(self.size)
        self.state = np.asarray(position, dtype=np.float64).copy()
        self.bound.update(self.state, applied)
        self.published = False

    @property
    def anchor(self) -> _ArmView:
        return self  # the barrier reads ``anchor.state``

    def in_flight(self) -> np.ndarray:
        """The commands the arm has not applied yet ([n, 4], oldest first): ``delay`` before this step's command goes
        out, ``delay + 1`` after."""
        n = self.delay + (1 if self.published else 0)
        rows = list(self.sent)[-n:] if n else []
        return np.asarray(rows, dtype=np.float64).reshape(-1, self.size)

    def in_flight_moves(self) -> list[list[float]]:
        """``in_flight``'s moves: the position part of each command (command units), as the barrier reads them."""
        dims = POSITION_SLICE[1] - POSITION_SLICE[0]
        return [row[:dims] for row in self.in_flight().tolist()]


class _Mailbox:
    """The supervisor, reduced to what the shield needs: each arm's newest report, readable by its partner."""

    def __init__(self, reports: dict[int, PositionReport], arm: int) -> None:
        self.reports, self.arm = reports, arm

    def send(self, report: PositionReport) -> None:
        self.reports[self.arm] = report

    def poll(self) -> PositionReport | None:
        return self.reports.get(1 - self.arm)


class CellShield:
    """Each arm's command through its runtime's filter and separation barrier (see the module docstring).

    :param spec: the robot spec of both arms (the filter's limits; the same spec the cell's runtimes load).
    :param layout: the cell's frames.
    :param homes_m: each arm's home in the cell frame (metres): the partner-home keep-out box.
    :param history_len: the longest delay (control steps): the contract's history.
    :param min_separation_m: the cell's rule (gripper centres, metres).
    :param approach_fraction: share of the spare distance a reach may close per command.
    :param home_keepout_m: half-width of the keep-out box about the partner's home (metres).
    """

    def __init__(
        self,
        spec: RobotSpec,
        layout: CellLayout,
        homes_m: Sequence[Sequence[float]],
        history_len: int,
        min_separation_m: float,
        approach_fraction: float = DEFAULT_APPROACH_FRACTION,
        home_keepout_m: float = DEFAULT_HOME_KEEPOUT_M,
    ) -> None:
        contract = fetch_reach_contract(history_len)
        try:
            self.limits = SafetyLimits.from_spec(spec, contract)
        except ValueError as err:
            raise ValueError(f"safety_spec {spec.robot_id!r}: {err}") from err
        self.period_s = contract.control_period_s
        self._size = contract.action_dim
        self._reports: dict[int, PositionReport] = {}
        self._step = 0
        self._previous = np.zeros((len(ARMS), self._size))
        largest = max(abs(float(contract.action_low)), abs(float(contract.action_high)))
        self.views = [_ArmView(self._size, spec, largest) for _ in ARMS]
        self.barriers = []
        for arm in ARMS:
            config = SeparationConfig(
                arm,
                layout,
                min_separation_m=min_separation_m,
                stale_s=self.period_s * (REPORT_AGE_PERIODS + 1.0),
                approach_fraction=approach_fraction,
                partner_home_m=tuple(float(v) for v in homes_m[1 - arm]),  # type: ignore[arg-type]
                home_keepout_m=home_keepout_m,
            )
            barrier = SeparationBarrier(config, _Mailbox(self._reports, arm), clock=self._clock)
            view = self.views[arm]
            barrier.attach(self.limits, self.period_s, POSITION_SLICE, view, view)
            self.barriers.append(barrier)
        self._deciding = False

    def _clock(self) -> float:
        """The shield's clock (seconds): step k's reports go out at k periods, step k + 1's decisions
        ``REPORT_AGE_PERIODS`` later."""
        late = 1.0 - REPORT_AGE_PERIODS if self._deciding else 0.0
        return (self._step - late) * self.period_s

    def reset(self, positions: np.ndarray, delays: Sequence[int]) -> None:
        """A new episode: nothing sent, each arm at ``positions[arm]`` (its frame, metres) with its delay; both
        publish their reach (as runtimes do after the HOME)."""
        self._reports.clear()
        self._step = 0
        self._previous = np.zeros((len(ARMS), self._size))
        for arm, view in enumerate(self.views):
            view.sent = deque(maxlen=int(delays[arm]) + 1)
            view.delay = int(delays[arm])
            view.state = np.asarray(positions[arm], dtype=np.float64).copy()
            view.bound.reset(view.state)
            view.published = False
            self.barriers[arm].sent(np.zeros(self._size))

    def filter(
        self, proposed: np.ndarray, positions: np.ndarray
    ) -> tuple[np.ndarray, tuple[bool, bool], tuple[str, str]]:
        """The commands ``[2, 4]`` the runtimes would send for the proposals ``[2, 4]`` (command units), each arm at
        ``positions[arm]`` (its frame, metres); per arm whether its command was changed, and the fault its runtime
        would have stopped it for by now ("": none; a stopped arm is held: its commands are zero)."""
        self._step += 1
        self._deciding = True
        results: list[FilterResult] = []
        for arm, view in enumerate(self.views):
            view.observe(positions[arm])
            if view.bound.fault:  # the runtime stopped this arm: it holds
                results.append(FilterResult(np.zeros(self._size), (view.bound.fault,), False))
                continue
            sent = np.asarray(view.sent, dtype=np.float64).reshape(-1, self._size)
            owed = in_flight_displacement_m(sent, self.limits.action_scale_m, self.limits.position_dims)
            limits, previous = self.limits, self._previous[arm]
            result = filter_action(view.state, owed, proposed[arm], previous, 0.0, limits, view.bounds)
            results.append(self.barriers[arm].cut(result, view.bounds))
        self._deciding = False
        commands = np.stack([result.action for result in results])
        for arm, view in enumerate(self.views):
            view.sent.append(commands[arm].copy())
            view.published = True
            self.barriers[arm].sent(commands[arm])
        self._previous = commands.copy()
        cut = tuple(bool(result.reasons) for result in results)
        return commands, cut, tuple(view.bound.fault for view in self.views)  # type: ignore[return-value]

    # Episode state (part of the cell's snapshot) -------------------------------------------------------------
    def get_state(self) -> CellShieldState:
        return CellShieldState(
            sent=tuple(np.asarray(view.sent, dtype=np.float64).reshape(-1, self._size) for view in self.views),
            previous=self._previous.copy(),
            reports=dict(self._reports),
            step=self._step,
            bounds=tuple(view.bound.get_state() for view in self.views),
        )

    def set_state(self, state: CellShieldState, positions: np.ndarray, delays: Sequence[int]) -> None:
        self._reports.clear()
        self._reports.update(state.reports)
        self._step = state.step
        self._previous = np.asarray(state.previous, dtype=np.float64).copy()
        for arm, view in enumerate(self.views):
            view.delay = int(delays[arm])
            view.sent = deque((row.copy() for row in state.sent[arm]), maxlen=view.delay + 1)
            view.state = np.asarray(positions[arm], dtype=np.float64).copy()
            view.bound.set_state(state.bounds[arm])
            view.published = True

    def summary(self) -> dict[str, Any]:
        """The barriers' counts by reason, per arm."""
        return {f"arm_{arm}": dict(barrier.counts) for arm, barrier in enumerate(self.barriers)}
