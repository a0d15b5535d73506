"""One campaign worker's rig: a lock-step simulated robot on a pty and the shipped policy, both made once and reused
for every run (the MuJoCo model and the ONNX session load once); ``run(seed)`` runs one sample over the real wire
code (``deploy.runtime.loop.Controller``) and checks it.
"""

from __future__ import annotations

import logging
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from deploy.runtime.goals import GoalSource
from deploy.runtime.loop import Controller
from deploy.runtime.package import load_package
from deploy.runtime.state_machine import LoopState
from deploy.runtime.tick_record import TickRecord
from deploy.runtime.ticklog import TickLogWriter, read_ticklog
from deploy.wire import LinkError
from envs.faults.schedule import FaultSchedule
from envs.sim_faults import SimFaults
from envs.sim_robot import SimRobot
from launch.campaign.invariants import RunEvidence, check_run, steps_outside
from launch.campaign.policies import build_policy
from launch.campaign.policy_faults import FaultyPolicy
from launch.campaign.sample import Sample, draw_sample
from launch.campaign.settings import CampaignSettings

NAMED_ERRORS = (TimeoutError, LinkError)  # how the runtime ends a run by name when no robot answers properly
QUIET_LOGGERS = ("deploy", "envs")
CONFIRM_REPLAYS = 2  # replays of a run that broke a timing-sensitive invariant
LOAD_PROOF = ("outside_box", "command_out_of_limits", "ticklog_incomplete", "traceback")  # no timing explains these
REJECTION_PREFIXES = (
    "implausible_",
    "malformed_",
    "nan_states",
)  # counts of states the loop rejected  # the loop logs every stop; a campaign reports them in its table instead


def read_logged_ticks(path: Path) -> list[int]:
    """The tick numbers a tick log holds, in order (the one place the campaign reads the log format)."""
    return [record.tick for record in read_ticklog(path)]


class CampaignRig:
    """The robot and policies of one worker.

    :param settings: the campaign's settings.
    :param mode: the simulated robot's mode: ``"lockstep"`` (the campaign's: a run replays the same) or
        ``"realtime"`` (it steps on its own clock, so states are made while messages are in flight).
    """

    def __init__(self, settings: CampaignSettings, mode: str = "lockstep") -> None:
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        self.settings = settings
        self.spec = settings.spec()
        self.config = settings.loop_config()
        package = load_package(settings.package_path)
        self.contract = package.contract
        self.shipped = package.make_backend("ort-cpu", "fp32")
        self.robot = SimRobot(
            mode=mode,
            delay=self.spec.delay_steps,
            obs_noise_std_m=0.0,
            spec=settings.base_spec(),
            control_period_s=settings.period_s,
        )
        self._logdir = tempfile.TemporaryDirectory(prefix="campaign-")
        self._runs = 0

    def close(self) -> None:
        self.robot.stop()
        self._logdir.cleanup()

    def sample(self, seed: int) -> Sample:
        return draw_sample(seed, self.settings, self.spec, self.contract.action_dim)

    def run_confirmed(self, seed: int, replays: int = CONFIRM_REPLAYS) -> dict[str, Any]:
        """Run sample ``seed``; a broken invariant that wall-clock timing could explain (all but ``outside_box``:
        in lock-step the arm moves only on the loop's commands) counts only if it recurs in one of ``replays``
        replays; one that does not is kept under ``unconfirmed`` (a loaded machine can starve the 10 ms loop)."""
        first = self.run(seed)
        timing = [v for v in first["violations"] if v["invariant"] not in LOAD_PROOF]
        if not timing:
            return first
        again: set[str] = set()
        for _ in range(replays):
            again |= {v["invariant"] for v in self.run(seed)["violations"]}
            if {v["invariant"] for v in timing} <= again:
                break
        first["unconfirmed"] = [v for v in timing if v["invariant"] not in again]
        first["violations"] = [v for v in first["violations"] if v not in first["unconfirmed"]]
        return first

    def run(self, seed: int) -> dict[str, Any]:
        """Run sample ``seed`` and check it; returns its outcome (JSON-friendly)."""
        return self.run_sample(self.sample(seed))

    def run_sample(self, sample: Sample) -> dict[str, Any]:
        """Run ``sample`` (drawn, or made by a test for one fault) and check it; returns its outcome."""
        t0 = time.perf_counter()
        self.robot.halt()
        self.robot.rewind(sample.goal_seeds[0], SimFaults(schedule=FaultSchedule(sample.robot_faults)))
        self.robot.start()
        policy = FaultyPolicy(build_policy(sample.policy, self.contract, self.spec, self.shipped), sample.policy_faults)
        self._runs += 1
        log_path = Path(self._logdir.name) / f"run{self._runs}.mcap"
        hook_ticks: list[int] = []
        stop_times: list[float] = []
        idle_times: list[float] = []

        def on_tick(controller: Controller, record: TickRecord | None) -> None:
            if record is not None:
                hook_ticks.append(record.tick)
                if record.stop:
                    stop_times.append(record.t_s)
                if controller.sm.state is not LoopState.RUN:
                    idle_times.append(record.t_s)

        writer = TickLogWriter(log_path, fsync_interval_s=None)
        goals = GoalSource(sample.goals, sample.goal_seeds)
        controller = Controller(
            self.robot.port_name, self.contract, policy, self.spec, goals, self.config, writer, on_tick
        )
        error, named = "", False
        try:
            controller.run()
        except NAMED_ERRORS as err:
            error, named = f"{type(err).__name__}: {err}", True
        except Exception:  # the campaign's job is to find these: recorded as the run's outcome, never raised
            error = traceback.format_exc()
        finally:
            writer.close()
            self.robot.halt()
        report = controller.report()
        trace = np.array(self.robot.trace).reshape(-1, 3)
        evidence = RunEvidence(
            report=report,
            error=error,
            named_error=named,
            trace=trace,
            received=list(self.robot.received),
            hook_ticks=hook_ticks,
            logged_ticks=read_logged_ticks(log_path),
            stalls=policy.stalls,
            stop_times=stop_times,
            idle_times=idle_times,
            fault_kinds=sample.fault_kinds(),
            within_spec=sample.within_spec,
            fault_windows=[(i.fault.kind, i.start, i.duration) for i in sample.robot_faults],
            ticks_per_robot_s=1.0 / self.spec.control_period_s,
        )
        for path in Path(self._logdir.name).glob(f"{log_path.name}*"):
            path.unlink()
        violations = check_run(
            evidence, self.spec, self.settings.period_s, self.config.policy_fault_stop_s, self.settings.box_tolerance_m
        )
        outside, worst = steps_outside(trace, self.spec, self.settings.box_tolerance_m)
        return outcome(sample, evidence, violations, outside, worst, time.perf_counter() - t0)


def describe_sample(seed: int, settings: CampaignSettings) -> dict[str, Any]:
    """What sample ``seed`` is (its policy and faults), without running it (for a run that hung)."""
    action_dim = load_package(settings.package_path).contract.action_dim
    return draw_sample(seed, settings, settings.spec(), action_dim).describe()


def outcome(
    sample: Sample, ev: RunEvidence, violations: list[tuple[str, str]], outside: int, worst_m: float, wall_s: float
) -> dict[str, Any]:
    """A run's outcome record (JSON-friendly)."""
    report = ev.report
    last = report.transitions[-1].reason if report.transitions else ""
    return {
        **sample.describe(),
        "ticks": report.ticks,
        "physics_steps": len(ev.trace),
        "steps_outside": outside,
        "max_outside_m": worst_m,
        "safe_stops": int(report.counts.get("safe_stops", 0)),
        "episodes": len(report.episodes),
        "aborted_episodes": int(sum(e.aborted for e in report.episodes)),
        "stop_reasons": [t.reason for t in report.transitions if t.target is LoopState.SAFE_STOP],
        "rejected_states": {k: v for k, v in sorted(report.counts.items()) if k.startswith(REJECTION_PREFIXES)},
        "overruns": int(report.timing.get("overruns", 0)),
        "end_reason": ev.error.strip().splitlines()[-1] if ev.error.strip() else last,
        "hang": False,
        "violations": [{"invariant": name, "detail": detail} for name, detail in violations],
        "unconfirmed": [],
        "wall_s": wall_s,
    }
