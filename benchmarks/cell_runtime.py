"""The two-arm cell through its runtimes: separation judged by the physics, the barrier's interventions and cost.

Four processes per case, as on a cell: the simulated cell (``envs.sim_cell_robot.SimCellRobot`` in its own process,
both arms on their own ptys, real-time at 25 Hz), the supervisor (``python -m deploy.cell.supervisor``), and one
runtime per arm (``deploy.cell.arm_runtime``: the single-arm ``Controller`` with the arm's separation barrier and the
partner's reported position spliced into its policy input), each in a fresh interpreter that imports only the robot
side. Each arm serves the same ``--episodes`` goal pairs (``envs.sim_cell_robot.cell_goals``, seeds from 7000: crossing
goals in a good share), ``--steps`` commands each, homing between them on its own.

Cases: the policy (``goal_seeker``: straight at its goal, blind to the partner, the scripted stand-in for a trained
cell policy, see below; ``adversary``: full speed at the partner's reported position), each with the separation
barrier on and off (the ablation: the supervisor still shares the positions the policies read, no command is cut).
The truth is the physics': a control step whose gripper centres came closer than ``min_separation_m`` at any of its
2 ms substeps, or in which the arms touched, is a violation; it is attributed to the episode pair under way (each
arm's HOMEs so far). Per runtime: its tick latency (state in -> command out, which includes the barrier's cut),
overruns, the barrier's own cost per call (the cut of a RUN command, and the report sent after every command),
interventions by reason.

Policy: no trained cell package is shipped (``benchmarks/results/learning_cell.md``: the trained cell policies reach
37% team success at 100k steps), so the main case runs the scripted goal seeker; ``--packages A,B`` runs two
exported arm packages (``deploy.export.cell_arm``) instead.

    .venv/bin/python benchmarks/cell_runtime.py [--episodes 200] [--steps 50] [--adversary-episodes 200]

Writes benchmarks/results/cell_runtime.json and .md.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
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

from deploy.runtime.separation import SeparationBarrier  # noqa: E402  (robot side only: light to import)

RESULTS = ROOT / "benchmarks" / "results"
GOAL_SEED = 7000
SUPERVISOR_PORT = 47311
MIN_SEPARATION_M = 0.10
STALE_S = 0.12
TARGET_TICK_P99_S = 1e-3
RUN_SLACK_S = 120.0  # beyond the episodes' own time, before a runtime is declared hung


class TimedBarrier(SeparationBarrier):
    """The separation barrier with its calls timed (a benchmark-only subclass: what the barrier adds per tick)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cut_s: list[float] = []
        self.sent_s: list[float] = []

    def cut(self, result: Any, bound: Any) -> Any:
        t0 = time.perf_counter()
        out = super().cut(result, bound)
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


def _arm_child(conn: Any, arm: int, port: str, case: dict[str, Any], goals: np.ndarray, cell: dict[str, Any]) -> None:
    """One arm's runtime in its own interpreter (robot side only); sends back its results."""
    from deploy.cell.layout import CellLayout
    from deploy.cell.partner_link import PartnerLink
    from deploy.cell.policy_input import PartnerInput, cell_arm_contract, robot_contract
    from deploy.cell.scripted import Adversary, GoalSeeker
    from deploy.contract import fetch_reach_contract
    from deploy.robot_spec import load_robot_spec
    from deploy.runtime.goals import GoalSource
    from deploy.runtime.loop import Controller
    from deploy.runtime.loop_config import LoopConfig
    from deploy.runtime.separation import SeparationConfig

    spec = load_robot_spec()
    if case["policy"] == "package":
        from deploy.runtime.package import load_package

        package = load_package(case["packages"][arm])
        contract = robot_contract(package.contract)
        policy = package.make_backend("ort-cpu")
    else:
        contract = fetch_reach_contract(spec.delay_range[1])
        policy = (GoalSeeker if case["policy"] == "goal_seeker" else Adversary)(cell_arm_contract(contract))
    layout = CellLayout(tuple(cell["centre_xy"]))
    separation = SeparationConfig(
        arm,
        layout,
        min_separation_m=MIN_SEPARATION_M,
        stale_s=STALE_S,
        partner_home_m=tuple(cell["homes"][1 - arm]),
        enforce=case["barrier"],
    )
    link = PartnerLink(arm, ("127.0.0.1", SUPERVISOR_PORT))
    barrier = TimedBarrier(separation, link)
    fallback = layout.point_to_cell(arm, separation.partner_home_m)
    wrapped = PartnerInput(policy, barrier.partner_position, contract.state_dim, fallback)
    config = LoopConfig(max_episode_steps=case["steps"], startup_timeout_s=30.0)
    controller = Controller(port, contract, wrapped, spec, GoalSource(goals), config, separation=barrier)
    try:
        report = controller.run()
    finally:
        link.close()
    conn.send(
        {
            "arm": arm,
            "episodes": [
                {
                    "index": e.index,
                    "success": bool(e.success),
                    "aborted": bool(e.aborted),
                    "distance_m": e.final_distance_m,
                }
                for e in report.episodes
            ],
            "timing": report.timing,
            "interventions": report.interventions,
            "counts": {k: int(v) for k, v in report.counts.items()},
            "barrier_counts": dict(barrier.counts),
            "link_counts": dict(link.counts),
            **_percentiles(barrier.cut_s, "cut_s"),
            **_percentiles(barrier.sent_s, "report_s"),
        }
    )


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    from envs.sim_cell_robot import SimCellRobot, cell_goals
    from envs.sim_robot_process import SimRobotProcess

    goals = cell_goals(GOAL_SEED, case["episodes"])
    probe = SimCellRobot()  # the layout and homes, as the runtimes are configured with them
    cell_facts = {"centre_xy": list(probe.layout().centre_xy), "homes": [list(probe.home_m(a)) for a in (0, 1)]}
    probe.stop()
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "deploy.cell.supervisor", "--port", str(SUPERVISOR_PORT), "--stale-s", str(STALE_S)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    supervisor.stdout.readline()
    robot = SimRobotProcess(robot_class=SimCellRobot, min_separation_m=MIN_SEPARATION_M)
    ctx = mp.get_context("spawn")
    pipes, processes = [], []
    started = time.monotonic()
    try:
        for arm in (0, 1):
            parent, child = ctx.Pipe()
            process = ctx.Process(
                target=_arm_child, args=(child, arm, robot.port_name[arm], case, goals[:, arm], cell_facts)
            )
            process.start()
            child.close()
            pipes.append(parent)
            processes.append(process)
        budget = case["episodes"] * (case["steps"] + 8) * 0.04 * 2 + RUN_SLACK_S
        arms = []
        for parent in pipes:
            if not parent.poll(max(1.0, budget - (time.monotonic() - started))):
                raise RuntimeError(f"case {case['name']}: a runtime did not finish within {budget:.0f} s")
            arms.append(parent.recv())
        for process in processes:
            process.join()
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
        truth = robot.stop()
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait()
    wall_s = time.monotonic() - started
    return summarize(case, arms, truth, wall_s)


def summarize(case: dict[str, Any], arms: list[dict[str, Any]], truth: dict[str, Any], wall_s: float) -> dict[str, Any]:
    n = case["episodes"]
    per_arm = [{e["index"]: e for e in arm["episodes"]} for arm in arms]
    team = [all(p.get(i, {}).get("success", False) for p in per_arm) for i in range(n)]
    pairs = int(truth.get("violation_episode_pairs", 0))
    return {
        **case,
        "wall_s": wall_s,
        "truth": {
            k: truth[k] for k in ("steps", "violation_steps", "contact_steps", "closest_m", "violation_episode_pairs")
        },
        "violations_per_1000_episode_pairs": 1000.0 * pairs / n,
        "team_success_runtime": float(np.mean(team)),
        "arms": arms,
    }


def _us(seconds: float) -> str:
    return "-" if seconds is None or not math.isfinite(seconds) else f"{seconds * 1e6:.0f}"


def write_markdown(results: dict[str, Any], path: Path) -> None:
    lines = [
        "# Two-arm cell through the runtimes (benchmarks/cell_runtime.py)",
        "",
        f"Machine: {results['machine']}; {results['note']}",
        "",
        "Separation as the physics saw it at every 2 ms substep: a separation violation is a control step whose "
        f"gripper centres came closer than {MIN_SEPARATION_M} m (what the barrier plans against); a contact, one in "
        "which any link of one arm touched the other (links behind the grippers, which the barrier does not model). "
        "Episode pairs: each arm serves the same goal pairs and homes on its own between its episodes.",
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
    lines += ["", f"Command: `{results['command']}`", ""]
    path.write_text("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200, help="episode pairs of the main policy, per case")
    parser.add_argument("--adversary-episodes", type=int, default=200, help="episode pairs of the adversary cases")
    parser.add_argument("--steps", type=int, default=50, help="commands per episode")
    parser.add_argument("--packages", default="", help="two arm packages 'A,B' instead of the scripted goal seeker")
    parser.add_argument("--cases", default="", help="comma-separated case names to run (default: all)")
    parser.add_argument("--out", default="cell_runtime", help="results file stem")
    args = parser.parse_args()
    if args.episodes < 1 or args.adversary_episodes < 1 or args.steps < 1:
        print("error: --episodes, --adversary-episodes and --steps must be >= 1", file=sys.stderr)
        return 2
    packages = [p for p in args.packages.split(",") if p]
    if packages and len(packages) != 2:
        print("error: --packages takes two arm packages, 'ARM0,ARM1'", file=sys.stderr)
        return 2
    main_policy = "package" if packages else "goal_seeker"
    cases = [
        {"name": f"{main_policy}, barrier on", "policy": main_policy, "barrier": True, "episodes": args.episodes},
        {"name": f"{main_policy}, barrier off", "policy": main_policy, "barrier": False, "episodes": args.episodes},
        {"name": "adversary, barrier on", "policy": "adversary", "barrier": True, "episodes": args.adversary_episodes},
        {
            "name": "adversary, barrier off",
            "policy": "adversary",
            "barrier": False,
            "episodes": args.adversary_episodes,
        },
    ]
    wanted = {c.strip() for c in args.cases.split(",") if c.strip()}
    cases = [dict(c, steps=args.steps, packages=packages) for c in cases if not wanted or c["name"] in wanted]
    results: dict[str, Any] = {
        "machine": f"{platform.node()} ({platform.processor() or platform.machine()}, {mp.cpu_count()} cores)",
        "note": (
            "main policy: "
            + (
                "the arm packages " + ", ".join(packages)
                if packages
                else "the scripted goal seeker (no trained cell package ships; see the module docstring)"
            )
        ),
        "command": " ".join(["benchmarks/cell_runtime.py", *sys.argv[1:]]),
        "cases": [],
    }
    for case in cases:
        print(f"case {case['name']}: {case['episodes']} episode pairs", flush=True)
        results["cases"].append(run_case(case))
        r = results["cases"][-1]
        print(f"  {r['truth']}; team success {r['team_success_runtime']:.0%}; {r['wall_s']:.0f} s", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(results, indent=1, default=float))
    write_markdown(results, RESULTS / f"{args.out}.md")
    print(f"wrote {RESULTS / args.out}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
