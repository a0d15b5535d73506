"""One arm's runtime as a process of its own: what ``robot-grpo cell`` starts once per arm.

numpy + the runtime only (robot side). An :class:`ArmJob` says everything the process needs (picklable: it crosses
a ``spawn``): the arm's link, its policy (an arm package exported by ``deploy.export.cell_arm``, or a scripted cell
policy), its goals, the separation rule and the supervisor's address. :func:`arm_policy` loads the package the
normal way (``load_package``: digest, files, self-test) and refuses one that is not this arm's: a cell arm's
contract, and the manifest's agent is this arm (the agent is baked into the weights). :func:`run_arm` runs the
arm's ``Controller`` with its separation barrier to the end of its goals and returns a plain summary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deploy.cell.lingering_goals import LingeringGoals
from deploy.cell.policy_input import cell_arm_contract, is_cell_arm, robot_contract
from deploy.cell.scripted import SCRIPTED, scripted_policy
from deploy.contract import ObservationContract
from deploy.runtime.loop_config import LoopConfig
from deploy.runtime.retract import CELL_RETRACT_STEPS
from deploy.runtime.separation import SeparationBarrier, SeparationConfig

# park episodes an arm serves at most while its partner finishes (a partner that lost this many episodes' time to
# stops is not coming back in a useful time; an arm that then ends leaves it holding, which is safe)
MAX_PARK_EPISODES = 200


class ArmPackageError(ValueError):
    """An arm package that cannot serve this arm (not a cell arm's, or another agent's)."""


@dataclass(frozen=True)
class ArmJob:
    """What one arm's runtime process runs.

    :param port: the arm's link (a pty of the simulated cell, a serial port).
    :param policy: an arm package folder, or one of ``SCRIPTED``.
    :param goals: the arm's targets ``[n, 3]`` (metres, its own frame), one episode each.
    :param episode_steps: control steps per target.
    :param separation: the arm's separation rule (its ``arm`` is this job's arm).
    :param supervisor: the supervisor's (host, UDP port).
    :param home_m: where a HOME leaves this arm's gripper (metres, its own frame): where it parks, reporting, once
        its goals are served until the partner's are too (``deploy.cell.lingering_goals``).
    :param spec: the robot spec file (None: the shipped ``calibration/sim_fetch.yaml``).
    :param backend: the package's inference backend (``deploy.runtime.backends``).
    :param variant: the package variant.
    :param realtime_priority: the runtime's SCHED_FIFO priority (its loop and policy threads; None: the default
        scheduler), as ``LoopConfig.realtime_priority``.
    :param cpu: the CPU the runtime's loop and policy threads are pinned to (None: free), as ``LoopConfig.cpu``.
    :param cpu_latency_us: the CPUs' idle exit latency held while the runtime runs (microseconds; None: not asked),
        as ``LoopConfig.cpu_latency_us``.
    :param startup_timeout_s: seconds to wait for the arm's first valid state (``LoopConfig.startup_timeout_s``).
    :param retract_steps: after each episode, control steps the arm may take back toward home under its filter and
        barrier before its HOME (``LoopConfig.retract_max_steps``; 0: it homes at once).
    """

    port: str
    policy: str
    goals: tuple[tuple[float, float, float], ...]
    episode_steps: int
    separation: SeparationConfig
    supervisor: tuple[str, int]
    home_m: tuple[float, float, float]
    spec: str | None = None
    backend: str = "ort-cpu"
    variant: str = "fp32"
    realtime_priority: int | None = None
    cpu: int | None = None
    cpu_latency_us: int | None = None
    startup_timeout_s: float = LoopConfig.startup_timeout_s
    retract_steps: int = CELL_RETRACT_STEPS

    @property
    def arm(self) -> int:
        return self.separation.arm


def check_arm_package(package: Any, arm: int) -> None:
    """Refuse a package that is not arm ``arm``'s (``ArmPackageError``, one line naming the fix)."""
    if not is_cell_arm(package.contract):
        raise ArmPackageError(
            f"{package.folder} is a single-arm package (contract {package.contract.name!r}); a cell arm runs a "
            "package exported from a cell model (robot-grpo export on a TwoArmCell-v0 checkpoint)"
        )
    cell = package.manifest.get("provenance", {}).get("cell", {})
    if cell.get("agent_index") != arm:
        raise ArmPackageError(
            f"{package.folder} is the package of {cell.get('agent', 'no agent')}, not arm_{arm}: each arm runs its "
            "own agent's package (arm_0/ and arm_1/ of the export)"
        )


def arm_policy(job: ArmJob, robot: ObservationContract) -> tuple[Callable[[np.ndarray], Any], ObservationContract]:
    """The policy on the cell arm's flat layout and the robot contract the arm's link speaks."""
    if job.policy in SCRIPTED:
        return scripted_policy(job.policy, cell_arm_contract(robot), job.arm), robot
    from deploy.runtime.package import load_package

    package = load_package(Path(job.policy))
    check_arm_package(package, job.arm)
    return package.make_backend(job.backend, job.variant), robot_contract(package.contract)


def run_arm(
    job: ArmJob, done: Sequence[Any], barrier_class: type[SeparationBarrier] = SeparationBarrier
) -> dict[str, Any]:
    """Run the arm's runtime to the end of its goals, parked after them until the partner is done too; its real
    episodes, timing, interventions and counts, and the barrier's ``summary()``.

    :param done: one flag per arm (``set()``, ``is_set()``: ``multiprocessing.Event`` across processes): an arm sets
        its own once its goals are served.
    :param barrier_class: the separation barrier (a subclass that also times its calls: the cell benchmark).
    """
    from deploy.cell.arm_runtime import cell_arm_runtime
    from deploy.contract import fetch_reach_contract
    from deploy.robot_spec import load_robot_spec
    from deploy.runtime.goals import GoalSource

    spec = load_robot_spec(job.spec) if job.spec else load_robot_spec()
    policy, contract = arm_policy(job, fetch_reach_contract(spec.delay_range[1]))
    own = GoalSource(np.asarray(job.goals, dtype=np.float64))
    goals = LingeringGoals(own, job.home_m, done[job.arm].set, done[1 - job.arm].is_set, MAX_PARK_EPISODES)
    runtime = cell_arm_runtime(
        job.port,
        contract,
        policy,
        spec,
        goals,
        job.separation,
        job.supervisor,
        LoopConfig(
            max_episode_steps=job.episode_steps,
            realtime_priority=job.realtime_priority,
            cpu=job.cpu,
            cpu_latency_us=job.cpu_latency_us,
            startup_timeout_s=job.startup_timeout_s,
            retract_max_steps=job.retract_steps,
        ),
        barrier_class=barrier_class,
    )
    report = runtime.run()
    return {
        "arm": job.arm,
        "episodes": [
            {"index": e.index, "success": bool(e.success), "aborted": bool(e.aborted), "distance_m": e.final_distance_m}
            for e in report.episodes
            if not goals.is_park(e.index)
        ],
        "park_episodes": goals.parked,
        "timing": dict(report.timing),
        "interventions": dict(report.interventions),
        "counts": {k: int(v) for k, v in report.counts.items()},
        "link_counts": dict(runtime.link.counts),
        **runtime.barrier.summary(),
    }


def arm_process_main(
    conn: Any, job: ArmJob, done: Sequence[Any], barrier_class: type[SeparationBarrier] = SeparationBarrier
) -> None:
    """The process's entry (``multiprocessing`` spawn): run the arm and send back its summary, or its error."""
    try:
        conn.send(run_arm(job, done, barrier_class))
    except Exception as err:  # the parent reports it; a traceback in a child's stderr is easy to miss
        conn.send({"arm": job.arm, "error": f"{type(err).__name__}: {err}"})
    finally:
        conn.close()
