"""The two-arm cell through its runtimes: separation judged by the physics, the barrier's interventions and cost.

Four processes per case, as on a cell: the simulated cell (``envs.sim_cell_robot.SimCellRobot`` in its own process,
both arms on their own ptys, real-time at 25 Hz), the supervisor (``python -m deploy.cell.supervisor``), and one
runtime per arm (``deploy.cell.arm_runtime``: the single-arm ``Controller`` with the arm's separation barrier and the
partner's reported position spliced into its policy input), each in a fresh interpreter that imports only the robot
side. Each arm serves the same ``--episodes`` goal pairs (``envs.sim_cell_robot.cell_goals``, seeds from 7000: crossing
goals in a good share), ``--steps`` commands each, homing between them on its own (``--start-together``: once its
partner has ended as many episodes, as ``robot-grpo cell`` runs them).

Cases: the main policy supervised (``goal_seeker``: straight at its goal, blind to the partner, the scripted
stand-in for a trained cell policy, see below; ``--episodes``); the ``adversary`` (full speed at the partner's
reported position) supervised; both with the supervisor off (the ablation: no supervisor process, no barrier cut,
each arm alone as a single-arm runtime would be); the ``wrist_hunter`` (full speed at a point behind and above the
partner's reported gripper, where its wrist and forearm are, ``deploy.cell.scripted``) supervised; and the main
policy with the supervisor SIGKILLed ``KILL_AFTER_STEPS`` into both arms' first episode and restarted
``OUTAGE_STEPS`` later (the cell then serves in this process, so what each arm was commanded and how far it truly
moved while its partner was stale can be judged). With ``--cpu-latency-us``, each runtime holds that CPU idle latency
request (``LoopConfig.cpu_latency_us``) and one more case runs beside the main one: the main policy supervised without
the request (``main-no-hold``, ``--ablation-episodes``), so the request's effect on the tick is measured in one run.
The truth is the physics': a control step whose gripper centres
came closer than ``min_separation_m`` at any of its 2 ms substeps is a separation violation, one in which any links
of the two arms touched a contact (counted apart: the barrier plans for the gripper centres); each is attributed to
the episode pair under way (each arm's HOMEs so far). Per runtime: its tick latency (state in -> command out, which
includes the barrier's cut), overruns, the barrier's own cost per call (the cut of a RUN command, and the report
sent after every command), interventions by reason.

Policy: the main case runs the scripted goal seeker by default (no trained cell package ships with the project);
``--packages A,B`` runs two exported arm packages (``deploy.export.cell_arm``; a trained cell policy's int8 misses its
parity tolerance, so export it with ``variants=[fp32, fp16]``, docs/guides/cell.md) instead.

    nice -n 10 .venv/bin/python benchmarks/cell_runtime.py [--episodes 1000] [--adversary-episodes 200] \
        [--ablation-episodes 200] [--kill-episodes 4] [--steps 50] [--start-together] [--realtime] \
        [--cpu-latency-us 0]

Writes benchmarks/results/cell_runtime.json and .md.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from deploy.runtime.retract import CELL_RETRACT_STEPS  # noqa: E402
from deploy.runtime.separation import SeparationBarrier  # noqa: E402  (robot side only: light to import)

RESULTS = ROOT / "benchmarks" / "results"
GOAL_SEED = 7000
SUPERVISOR_PORT = 29311  # below the ephemeral port range, as the supervisor's default (deploy.cell.supervisor)
MIN_SEPARATION_M = 0.10
STALE_S = 0.12
TARGET_TICK_P99_S = 1e-3
RUN_SLACK_S = 120.0  # beyond the episodes' own time, before a runtime is declared hung
KILL_AFTER_STEPS = 20  # the kill case: control steps into both arms' first episode before the supervisor is killed
OUTAGE_STEPS = 25  # the kill case: control steps (1 s at 25 Hz) before the supervisor is restarted
STARTUP_TIMEOUT_S = 30.0  # a runtime's wait for its first state: fresh interpreters on a loaded 2-core machine
RT_PRIORITY = 50  # --realtime: SCHED_FIFO of the runtimes (arm i pinned to CPU i) and the supervisor (the cell: 49)
CASE_KEYS = (
    "main",
    "main-no-hold",
    "main-off",
    "adversary",
    "adversary-off",
    "wrist-hunter",
    "kill",
)  # what --cases selects


class TimedBarrier(SeparationBarrier):
    """The separation barrier with its calls timed (a benchmark-only subclass: what the barrier adds per tick)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cut_s: list[float] = []
        self.sent_s: list[float] = []

    def summary(self) -> dict[str, Any]:
        return {**super().summary(), **_percentiles(self.cut_s, "cut_s"), **_percentiles(self.sent_s, "report_s")}

    def cut(self, result: Any, bound: Any, poll: bool = True) -> Any:
        t0 = time.perf_counter()
        out = super().cut(result, bound, poll)
        self.cut_s.append(time.perf_counter() - t0)
        return out

    def sent(self, command: np.ndarray) -> None:
        t0 = time.perf_counter()
        super().sent(command)
        self.sent_s.append(time.perf_counter() - t0)


def _percentiles(values: list[float], prefix: str) -> dict[str, float]:
    a = np.asarray(values, dtype=np.float64)
    if not a.size:
        return {f"{prefix}_n": 0}
    return {
        f"{prefix}_n": int(a.size),
        f"{prefix}_p50": float(np.percentile(a, 50)),
        f"{prefix}_p99": float(np.percentile(a, 99)),
        f"{prefix}_max": float(a.max()),
    }


def _arm_child(
    conn: Any, arm: int, port: str, case: dict[str, Any], goals: np.ndarray, cell: dict[str, Any], done: Any
) -> None:
    """One arm's runtime in its own interpreter (robot side only): what ``robot-grpo cell`` runs per arm
    (``deploy.cell.arm_process``), with the barrier's calls timed."""
    from deploy.cell.arm_process import ArmJob, arm_process_main
    from deploy.cell.layout import CellLayout
    from deploy.runtime.separation import SeparationConfig

    layout = CellLayout(tuple(cell["centre_xy"]))
    separation = SeparationConfig(
        arm,
        layout,
        min_separation_m=MIN_SEPARATION_M,
        stale_s=STALE_S,
        partner_home_m=tuple(cell["homes"][1 - arm]),
        enforce=case["barrier"],
        start_together=case["start_together"],
    )
    job = ArmJob(
        port=port,
        policy=case["packages"][arm] if case["policy"] == "package" else case["policy"],
        goals=tuple(tuple(map(float, g)) for g in goals),
        episode_steps=case["steps"],
        separation=separation,
        supervisor=("127.0.0.1", SUPERVISOR_PORT),
        home_m=layout.point_to_cell(arm, cell["homes"][arm]),
        realtime_priority=case["rt_priority"],
        cpu=arm if case["rt_priority"] is not None else None,  # each arm's runtime on a CPU of its own
        cpu_latency_us=case["cpu_latency_us"],
        startup_timeout_s=STARTUP_TIMEOUT_S,
    )
    arm_process_main(conn, job, done, TimedBarrier)


def _start_supervisor(case: dict[str, Any]) -> subprocess.Popen:
    """The supervisor in its own interpreter, on ``SUPERVISOR_PORT``, at the case's priority."""
    from deploy.cell.supervisor import spawn_supervisor

    return spawn_supervisor(SUPERVISOR_PORT, STALE_S, case["rt_priority"], cwd=ROOT)


def _cell_facts() -> dict[str, Any]:
    """The layout and homes, as the runtimes are configured with them."""
    from envs.sim_cell_robot import SimCellRobot

    probe = SimCellRobot()
    facts = {"centre_xy": list(probe.layout().centre_xy), "homes": [list(probe.home_m(a)) for a in (0, 1)]}
    probe.stop()
    return facts


def _run_arms(
    case: dict[str, Any], ports: Any, goals: np.ndarray, during: Any = None
) -> tuple[list[dict[str, Any]], float]:
    """Both arms' runtimes, each in its own interpreter, to the end of their goals; ``during()`` runs meanwhile on
    this thread. Returns each arm's results and the wall time (seconds)."""
    facts = _cell_facts()
    ctx = mp.get_context("spawn")
    pipes, processes = [], []
    done = (ctx.Event(), ctx.Event())
    started = time.monotonic()
    try:
        for arm in (0, 1):
            parent, child = ctx.Pipe()
            process = ctx.Process(target=_arm_child, args=(child, arm, ports[arm], case, goals[:, arm], facts, done))
            process.start()
            child.close()
            pipes.append(parent)
            processes.append(process)
        if during is not None:
            during()
        budget = case["episodes"] * (case["steps"] + CELL_RETRACT_STEPS + 8) * 0.04 * 2 + RUN_SLACK_S
        arms = []
        for parent in pipes:
            if not parent.poll(max(1.0, budget - (time.monotonic() - started))):
                raise RuntimeError(f"case {case['name']}: a runtime did not finish within {budget:.0f} s")
            result = parent.recv()
            if "error" in result:
                raise RuntimeError(f"case {case['name']}: arm {result['arm']}'s runtime failed: {result['error']}")
            arms.append(result)
        for process in processes:
            process.join()
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
    return arms, time.monotonic() - started


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    from envs.sim_cell_robot import SimCellRobot, cell_goals
    from envs.sim_robot_process import SimRobotProcess

    if case.get("kill"):
        return run_kill_case(case)
    goals = cell_goals(GOAL_SEED, case["episodes"])
    supervisor = _start_supervisor(case) if case["supervisor"] else None
    robot_priority = None if case["rt_priority"] is None else case["rt_priority"] - 1  # as control_loop's robot
    robot = SimRobotProcess(robot_priority, robot_class=SimCellRobot, min_separation_m=MIN_SEPARATION_M)
    try:
        arms, wall_s = _run_arms(case, robot.port_name, goals)
    finally:
        truth = robot.stop()
        if supervisor is not None:
            supervisor.send_signal(signal.SIGTERM)
            supervisor.wait()
    return summarize(case, arms, truth, wall_s)


def _wait_steps(cell: Any, steps: int, deadline: float) -> None:
    """Wait until the cell has stepped ``steps`` more control steps (raises past ``deadline``, monotonic seconds)."""
    target = cell.steps + steps
    while cell.steps < target:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the cell stepped {cell.steps - target + steps} of {steps} control steps in time")
        time.sleep(cell.period_s)


def run_kill_case(case: dict[str, Any]) -> dict[str, Any]:
    """The supervisor SIGKILLed once both arms are in their first episode, restarted ``OUTAGE_STEPS`` control steps
    later; the cell serves in this process so its records (commands heard, true positions per step) can be judged."""
    from deploy.robot_spec import load_robot_spec
    from envs.sim_cell_robot import SimCellRobot, cell_goals

    goals = cell_goals(GOAL_SEED, case["episodes"])
    cell = SimCellRobot(min_separation_m=MIN_SEPARATION_M).start()
    supervisor = [_start_supervisor(case)]
    events: dict[str, float] = {}

    def kill_and_restart() -> None:
        deadline = time.monotonic() + RUN_SLACK_S
        while min(robot.counts["homes"] for robot in cell.robots) < 1:
            if time.monotonic() > deadline:
                raise RuntimeError("an arm never homed: its runtime did not start")
            time.sleep(cell.period_s)
        _wait_steps(cell, KILL_AFTER_STEPS, deadline)  # both arms are in their first episode, moving to their goals
        supervisor[0].send_signal(signal.SIGKILL)
        supervisor[0].wait()
        events["killed"] = time.monotonic()
        _wait_steps(cell, OUTAGE_STEPS, deadline)
        events["back"] = time.monotonic()
        supervisor[0] = _start_supervisor(case)

    try:
        arms, wall_s = _run_arms(case, cell.port_names, goals, during=kill_and_restart)
    finally:
        cell.stop()
        supervisor[0].kill()
        supervisor[0].wait()
    result = summarize(case, arms, dict(cell.separation.summary(), steps=cell.steps), wall_s)
    result["outage"] = judge_outage(cell, events, load_robot_spec().delay_range[1])
    return result


def judge_outage(cell: Any, events: dict[str, float], delay_steps: int) -> dict[str, Any]:
    """What each arm was commanded and how far it truly moved while its partner's report was stale: from the kill
    plus ``STALE_S`` and the commands still in the delay line, until the supervisor was back."""
    from deploy.wire import CommandMsg, HomeMsg

    held_from = events["killed"] + STALE_S + (delay_steps + 2) * cell.period_s
    back = events["back"]
    per_arm = []
    for robot in cell.robots:
        heard = [(t, m) for t, m, ok in robot.received if ok]
        commands = [(t, m.action) for t, m in heard if isinstance(m, CommandMsg)]
        held = [a for t, a in commands if held_from <= t <= back]
        steps = [i for i, t in enumerate(cell.step_times) if held_from + cell.period_s <= t <= back]
        positions = np.array([robot.trace[i] for i in steps]).reshape(-1, 3)
        per_arm.append(
            {
                "commands_while_stale": len(held),
                "moving_commands_while_stale": int(sum(bool(np.any(a[:3])) for a in held)),
                "homes_while_stale": sum(isinstance(m, HomeMsg) and held_from <= t <= back for t, m in heard),
                "max_drift_while_stale_m": float(np.abs(positions - positions[0]).max()) if len(positions) else 0.0,
                "resumed": any(bool(np.any(a[:3])) for t, a in commands if t > back),
                "homes": int(robot.counts["homes"]),
            }
        )
    return {"stale_window_s": back - held_from, "arms": per_arm}


def summarize(case: dict[str, Any], arms: list[dict[str, Any]], truth: dict[str, Any], wall_s: float) -> dict[str, Any]:
    n = case["episodes"]
    per_arm = [{e["index"]: e for e in arm["episodes"]} for arm in arms]
    team = [all(p.get(i, {}).get("success", False) for p in per_arm) for i in range(n)]
    keys = (
        "steps",
        "separation_steps",
        "contact_steps",
        "violation_steps",
        "closest_m",
        "separation_episode_pairs",
        "contact_episode_pairs",
        "violation_episode_pairs",
        "contact_links",
        "contacts_after_home",
        "contacts",  # the first contacts' records: which episodes, how many steps after each arm's HOME
    )
    return {
        **case,
        "wall_s": wall_s,
        "truth": {k: truth[k] for k in keys if k in truth},
        "separation_violations_per_1000": 1000.0 * truth["separation_episode_pairs"] / n,
        "contacts_per_1000": 1000.0 * truth["contact_episode_pairs"] / n,
        "team_success_runtime": float(np.mean(team)),
        "arms": arms,
    }


def _load(load: Any) -> str:
    return "-" if not load else " ".join(f"{v:.2f}" for v in load)


def _us(seconds: float) -> str:
    return "-" if seconds is None or not math.isfinite(seconds) else f"{seconds * 1e6:.0f}"


def write_markdown(results: dict[str, Any], path: Path) -> None:
    lines = [
        "# Two-arm cell through the runtimes (benchmarks/cell_runtime.py)",
        "",
        f"Machine: {results['machine']}; {results['note']}. Scheduler: {results.get('scheduler', 'default')}; "
        f"load average at start {_load(results.get('load_start'))}, at end {_load(results.get('load_end'))}.",
        "",
        "Separation as the physics saw it at every 2 ms substep: a separation violation is a control step whose "
        f"gripper centres came closer than {MIN_SEPARATION_M} m (what the barrier plans against); a contact, one in "
        "which any link of one arm touched the other (links behind the grippers, which the barrier does not model). "
        "Episode pairs: each arm serves the same goal pairs; "
        + (
            "with the supervisor, an arm homes for its next episode once its partner has ended its own too "
            "(start_together; without it there are no reports to wait on: each homes on its own)."
            if results.get("start_together")
            else "each arm homes on its own between its episodes."
        ),
        "",
        "| case | episode pairs | separation violations: steps, pairs (per 1,000) | contacts: steps, pairs "
        "(per 1,000) | closest (m) | team success | separation cuts (arm 0 / 1) | partner-stale holds (arm 0 / 1) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results["cases"]:
        t = r["truth"]
        cuts = " / ".join(
            str(a["interventions"].get("separation_barrier", 0) + a["interventions"].get("separation_inside", 0))
            for a in r["arms"]
        )
        stale = " / ".join(str(a["interventions"].get("partner_stale", 0)) for a in r["arms"])
        lines.append(
            f"| {r['name']} | {r['episodes']} | {t['separation_steps']}, {t['separation_episode_pairs']} "
            f"({r['separation_violations_per_1000']:.0f}) | {t['contact_steps']}, {t['contact_episode_pairs']} "
            f"({r['contacts_per_1000']:.0f}) | {t['closest_m']:.3f} | {r['team_success_runtime']:.0%} | {cuts} | "
            f"{stale} |"
        )
    touched = [r for r in results["cases"] if r["truth"].get("contact_links")]
    if touched:
        from envs.sim_cell_robot import JUST_HOMED_STEPS  # here: the arms' processes import this module too

        lines += [
            "",
            "Contacts by the links that met (arm 0's / arm 1's; control steps), and how many came within "
            f"{JUST_HOMED_STEPS} steps of an arm's HOME (the simulated cell puts a homed arm back at once):",
            "",
        ]
        for r in touched:
            links = ", ".join(f"{pair.replace('robot0:', '')} {n}" for pair, n in r["truth"]["contact_links"].items())
            after = r["truth"].get("contacts_after_home")
            lines.append(f"- {r['name']}: {links}" + ("" if after is None else f"; {after} right after a HOME"))
    lines += [
        "",
        "Tick latency (state in -> command out, microseconds; the barrier's cut is inside it) and the barrier's own "
        f"cost per call; target tick p99 <= {TARGET_TICK_P99_S * 1e3:.0f} ms.",
        "",
        "| case | arm | tick p50 | tick p99 | tick max | overruns | cut p50 | cut p99 | cut max | report p50 | "
        "report p99 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["cases"]:
        for a in r["arms"]:
            tm = a["timing"]
            lines.append(
                f"| {r['name']} | {a['arm']} | {_us(tm.get('latency_s_p50'))} | {_us(tm.get('latency_s_p99'))} | "
                f"{_us(tm.get('latency_s_max'))} | {int(tm.get('overruns', 0))} | {_us(a.get('cut_s_p50'))} | "
                f"{_us(a.get('cut_s_p99'))} | {_us(a.get('cut_s_max'))} | {_us(a.get('report_s_p50'))} | "
                f"{_us(a.get('report_s_p99'))} |"
            )
    for r in results["cases"]:
        if "outage" not in r:
            continue
        o = r["outage"]
        lines += [
            "",
            f"Supervisor killed (SIGKILL) {KILL_AFTER_STEPS} control steps into both arms' first episode and restarted "
            f"{OUTAGE_STEPS} steps later; judged over the {o['stale_window_s']:.2f} s from the partner report's "
            f"staleness ({STALE_S} s) and the commands still in the delay line until the supervisor was back.",
            "",
            "| arm | commands heard while stale | of them moving | HOMEs while stale | true drift while stale (mm) | "
            "resumed after | episodes homed |",
            "|---|---|---|---|---|---|---|",
        ]
        for arm, a in enumerate(o["arms"]):
            lines.append(
                f"| {arm} | {a['commands_while_stale']} | {a['moving_commands_while_stale']} | "
                f"{a['homes_while_stale']} | {a['max_drift_while_stale_m'] * 1e3:.2f} | {a['resumed']} | {a['homes']} |"
            )
    lines += ["", f"Command: `{results['command']}`", ""]
    path.write_text("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000, help="episode pairs of the main policy, supervised")
    parser.add_argument(
        "--adversary-episodes",
        type=int,
        default=200,
        help="episode pairs of each supervised adversary (at the partner's gripper; at its wrist)",
    )
    parser.add_argument("--ablation-episodes", type=int, default=200, help="episode pairs of each supervisor-off case")
    parser.add_argument("--kill-episodes", type=int, default=4, help="episode pairs of the supervisor-killed case")
    parser.add_argument("--steps", type=int, default=50, help="commands per episode")
    parser.add_argument("--packages", default="", help="two arm packages 'A,B' instead of the scripted goal seeker")
    parser.add_argument(
        "--cases", default="", help=f"comma-separated case keys to run, of {', '.join(CASE_KEYS)} (default: all)"
    )
    parser.add_argument(
        "--realtime",
        action="store_true",
        help=f"runtimes and supervisor under SCHED_FIFO {RT_PRIORITY}, arm i's runtime pinned to CPU i, the simulated "
        f"cell at {RT_PRIORITY - 1} (as a real cell runs them; needs root or CAP_SYS_NICE)",
    )
    parser.add_argument(
        "--start-together",
        action="store_true",
        help="supervised arms home for each episode together (SeparationConfig.start_together; robot-grpo cell does)",
    )
    parser.add_argument(
        "--cpu-latency-us",
        type=int,
        default=None,
        help="each runtime holds a PM QoS request that no CPU idles in a state slower than this to leave "
        "(microseconds; 0: idle CPUs poll; LoopConfig.cpu_latency_us, needs root); default: not asked",
    )
    parser.add_argument("--out", default="cell_runtime", help="results file stem")
    args = parser.parse_args()
    # a SIGTERM (a killed benchmark) unwinds through the cases' cleanup: no supervisor is left holding the port
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    sizes = (args.episodes, args.adversary_episodes, args.ablation_episodes, args.kill_episodes, args.steps)
    if min(sizes) < 1:
        print("error: every episode count and --steps must be >= 1", file=sys.stderr)
        return 2
    packages = [p for p in args.packages.split(",") if p]
    if packages and len(packages) != 2:
        print("error: --packages takes two arm packages, 'ARM0,ARM1'", file=sys.stderr)
        return 2
    main_policy = "package" if packages else "goal_seeker"
    on = {"barrier": True, "supervisor": True, "start_together": args.start_together}
    off = {"barrier": False, "supervisor": False, "start_together": False}  # no supervisor: no reports to wait on
    cases = [
        {"key": "main", "name": f"{main_policy}, supervised", "policy": main_policy, **on, "episodes": args.episodes},
        {  # with --cpu-latency-us: the main case without the request, beside it in the same run
            "key": "main-no-hold",
            "name": f"{main_policy}, supervised, no CPU latency request",
            "policy": main_policy,
            **on,
            "episodes": args.ablation_episodes,
            "hold": False,
        },
        {
            "key": "main-off",
            "name": f"{main_policy}, supervisor off",
            "policy": main_policy,
            **off,
            "episodes": args.ablation_episodes,
        },
        {
            "key": "adversary",
            "name": "adversary, supervised",
            "policy": "adversary",
            **on,
            "episodes": args.adversary_episodes,
        },
        {
            "key": "adversary-off",
            "name": "adversary, supervisor off",
            "policy": "adversary",
            **off,
            "episodes": args.ablation_episodes,
        },
        {
            "key": "wrist-hunter",
            "name": "wrist hunter, supervised",
            "policy": "wrist_hunter",
            **on,
            "episodes": args.adversary_episodes,
        },
        {
            "key": "kill",
            "name": f"{main_policy}, supervisor killed mid-run",
            "policy": main_policy,
            **on,
            "kill": True,
            "episodes": args.kill_episodes,
        },
    ]
    wanted = {c.strip() for c in args.cases.split(",") if c.strip()}
    if wanted - set(CASE_KEYS):
        print(
            f"error: unknown case {sorted(wanted - set(CASE_KEYS))}; --cases takes {', '.join(CASE_KEYS)}",
            file=sys.stderr,
        )
        return 2
    if args.cpu_latency_us is not None and args.cpu_latency_us < 0:
        print("error: --cpu-latency-us is a number of microseconds >= 0", file=sys.stderr)
        return 2
    priority = RT_PRIORITY if args.realtime else None
    cases = [
        dict(
            c,
            steps=args.steps,
            packages=packages,
            rt_priority=priority,
            cpu_latency_us=args.cpu_latency_us if c.get("hold", True) else None,
        )
        for c in cases
        if (not wanted or c["key"] in wanted) and (c["key"] != "main-no-hold" or args.cpu_latency_us is not None)
    ]
    results: dict[str, Any] = {
        "machine": f"{platform.node()} ({platform.processor() or platform.machine()}, {mp.cpu_count()} cores)",
        "note": (
            "main policy: "
            + (
                "the arm packages " + ", ".join(packages)
                if packages
                else "the scripted goal seeker (no trained cell package ships with the project)"
            )
        ),
        "scheduler": (
            f"SCHED_FIFO {RT_PRIORITY}, arm i's runtime on CPU i (the simulated cell {RT_PRIORITY - 1}, unpinned)"
            if args.realtime
            else "default"
        )
        + (
            ""
            if args.cpu_latency_us is None
            else f"; each runtime holds a CPU idle exit latency <= {args.cpu_latency_us} us (/dev/cpu_dma_latency)"
        ),
        "start_together": args.start_together,
        "load_start": os.getloadavg(),
        "command": " ".join(["benchmarks/cell_runtime.py", *sys.argv[1:]]),
        "cases": [],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    for case in cases:
        print(f"case {case['name']}: {case['episodes']} episode pairs", flush=True)
        results["cases"].append(run_case(case))
        r = results["cases"][-1]
        print(f"  {r['truth']}; team success {r['team_success_runtime']:.0%}; {r['wall_s']:.0f} s", flush=True)
        results["load_end"] = os.getloadavg()
        # after every case: an hour of cases is not lost to a failure in the next one
        (RESULTS / f"{args.out}.json").write_text(json.dumps(results, indent=1, default=float))
        write_markdown(results, RESULTS / f"{args.out}.md")
    print(f"wrote {RESULTS / args.out}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
