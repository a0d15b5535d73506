"""``robot-grpo cell``: the two-arm cell on the simulated robots, run apart and kept apart.

Starts what a cell runs: the simulated cell (``envs.sim_cell_robot.SimCellRobot``: both arms in one physics, each on
its own pty, real time), the cell supervisor (``python -m deploy.cell.supervisor``, loopback UDP) and one runtime
process per arm (``deploy.cell.arm_process``: the single-arm controller with its separation barrier, its own
package, its own link). Each arm serves its goal of the same cell episodes (``cell_goals``: the goal pairs
``TwoArmCell-v0`` draws from seeds ``seed, seed + 1, ...``). The policies: ``packages``, the folder ``robot-grpo
export`` writes for a cell checkpoint (``arm_0/``, ``arm_1/``; each checked to be its arm's), or a scripted
``policy`` (``goal_seeker``, ``adversary``, ``wrist_hunter``). Writes ``runs/<name>/cell_report.json`` and
``report.md``: team success, each arm's episodes, the separation as the physics saw it (centre distance and contacts
at every 2 ms substep), the barrier's interventions and each runtime's tick latency.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from launch.jobs import write_resolved
from launch.schema import LaunchError

SUPERVISOR_START_S = 30.0  # a fresh interpreter on a loaded 2-core machine
RUN_SLACK_S = 120.0  # beyond the episodes' own time (homing included), before a runtime is declared hung
HOMING_STEPS = 8  # control steps an episode spends homing and holding, for the wait budget


def arm_policies(config: dict[str, Any]) -> list[str]:
    """Each arm's policy: its package folder (checked here, before anything starts) or the scripted policy."""
    if config["packages"] is None:
        return [config["policy"]] * 2
    from deploy.cell.arm_process import ArmPackageError, check_arm_package
    from deploy.runtime.package import load_package

    folders = [Path(config["packages"]) / f"arm_{arm}" for arm in (0, 1)]
    for arm, folder in enumerate(folders):
        if not folder.is_dir():
            raise LaunchError(
                f"'packages': {folder} does not exist; give the folder robot-grpo export wrote for a cell checkpoint "
                "(it holds arm_0/ and arm_1/)"
            )
        try:
            check_arm_package(load_package(folder), arm)
        except ArmPackageError as err:
            raise LaunchError(f"'packages': {err}") from None
    return [str(folder) for folder in folders]


def start_supervisor(port: int, stale_s: float, realtime_priority: int | None = None) -> subprocess.Popen:
    """The supervisor in its own interpreter on loopback ``port``; returns once it listens."""
    from deploy.cell.supervisor import SupervisorStartError, spawn_supervisor

    try:
        return spawn_supervisor(port, stale_s, realtime_priority)
    except SupervisorStartError as err:
        raise LaunchError(str(err)) from None


def run_cell(config: dict[str, Any]) -> dict[str, Any]:
    """Run the cell as ``config`` says; returns the report (also written under ``runs/<name>/``)."""
    from deploy.cell.arm_process import ArmJob, arm_process_main
    from deploy.runtime.separation import SeparationConfig
    from envs.sim_cell_robot import SimCellRobot, cell_goals

    policies = arm_policies(config)
    goals = cell_goals(config["seed"], config["episodes"], min_separation_m=config["min_separation_m"])
    spec = str(config["calibration"]) if config["calibration"] else None
    cell = SimCellRobot(spec, min_separation_m=config["min_separation_m"]).start()
    supervisor = start_supervisor(config["supervisor_port"], config["stale_s"], config["realtime_priority"])
    ctx = mp.get_context("spawn")
    processes, pipes = [], []
    done = (ctx.Event(), ctx.Event())  # each arm's goals served (it then parks until the other's are)
    started = time.monotonic()
    try:
        for arm in (0, 1):
            separation = SeparationConfig(
                arm,
                cell.layout(),
                min_separation_m=config["min_separation_m"],
                stale_s=config["stale_s"],
                partner_home_m=cell.home_m(1 - arm),
                enforce=config["barrier"],
                start_together=config["start_together"],
            )
            job = ArmJob(
                port=cell.port_names[arm],
                policy=policies[arm],
                goals=tuple(tuple(map(float, g)) for g in goals[:, arm]),
                episode_steps=config["episode_steps"],
                separation=separation,
                supervisor=("127.0.0.1", config["supervisor_port"]),
                home_m=cell.layout().point_to_cell(arm, cell.home_m(arm)),
                spec=spec,
                backend=config["backend"],
                variant=config["variant"],
                realtime_priority=config["realtime_priority"],
                cpu=None if config["arm_cpus"] is None else config["arm_cpus"][arm],
                cpu_latency_us=config["cpu_latency_us"],
                retract_steps=config["retract_steps"],
            )
            parent, child = ctx.Pipe()
            process = ctx.Process(target=arm_process_main, args=(child, job, done), name=f"cell-arm-{arm}")
            process.start()
            child.close()
            processes.append(process)
            pipes.append(parent)
        steps = config["episode_steps"] + config["retract_steps"] + HOMING_STEPS
        budget = config["episodes"] * steps * cell.period_s * 2 + RUN_SLACK_S
        arms = []
        for arm, parent in enumerate(pipes):
            if not parent.poll(max(1.0, budget - (time.monotonic() - started))):
                raise TimeoutError(f"arm {arm}'s runtime did not finish within {budget:.0f} s")
            arms.append(parent.recv())
        for process in processes:
            process.join()
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
        cell.stop()
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait()
    for arm in arms:
        if "error" in arm:
            raise LaunchError(f"arm {arm['arm']}'s runtime failed: {arm['error']}")
    return cell_report(config, arms, cell.separation.summary(), time.monotonic() - started)


def cell_report(
    config: dict[str, Any], arms: list[dict[str, Any]], truth: dict[str, Any], wall_s: float
) -> dict[str, Any]:
    """Team success (both arms on their goals in the same episode), each arm's, and the physics' separation."""
    n = config["episodes"]
    by_index = [{e["index"]: e for e in arm["episodes"]} for arm in arms]
    team = [all(episodes.get(i, {}).get("success", False) for episodes in by_index) for i in range(n)]
    return {
        "episodes": n,
        "policies": config["packages"] or config["policy"],
        "barrier": config["barrier"],
        "team_success": sum(team) / n,
        "arm_success": [sum(e["success"] for e in arm["episodes"]) / n for arm in arms],
        "separation": truth,
        "wall_s": wall_s,
        "arms": arms,
    }


def write_report(report: dict[str, Any], run_dir: Path) -> Path:
    """``cell_report.json`` and ``report.md`` (the cell section) under ``run_dir``; returns the markdown's path."""
    (run_dir / "cell_report.json").write_text(json.dumps(report, indent=1, default=float))
    truth = report["separation"]
    lines = [
        "# Cell run",
        "",
        f"Policies: {report['policies']}; separation barrier {'on' if report['barrier'] else 'off (ablation)'}.",
        "",
        "## Cell",
        "",
        f"- team success: {report['team_success']:.0%} of {report['episodes']} episodes (arm 0: "
        f"{report['arm_success'][0]:.0%}, arm 1: {report['arm_success'][1]:.0%})",
        f"- separation (physics, every 2 ms substep): {truth['separation_steps']} control steps closer than "
        f"{truth['min_separation_m']} m, {truth['contact_steps']} with the arms in contact; closest "
        f"{truth['closest_m']:.3f} m",
        "",
        "| arm | separation cuts | partner-stale holds | tick p50 (us) | tick p99 (us) | overruns |",
        "|---|---|---|---|---|---|",
    ]
    for arm in report["arms"]:
        cuts = arm["interventions"].get("separation_barrier", 0) + arm["interventions"].get("separation_inside", 0)
        timing = arm["timing"]
        lines.append(
            f"| {arm['arm']} | {cuts} | {arm['interventions'].get('partner_stale', 0)} | "
            f"{timing.get('latency_s_p50', float('nan')) * 1e6:.0f} | "
            f"{timing.get('latency_s_p99', float('nan')) * 1e6:.0f} | {int(timing.get('overruns', 0))} |"
        )
    out = run_dir / "report.md"
    out.write_text("\n".join([*lines, ""]))
    return out


def main(config: dict[str, Any]) -> int:
    run_dir = Path(config["output"]) / config["name"]
    write_resolved(config, run_dir)
    report = run_cell(config)
    out = write_report(report, run_dir)
    truth = report["separation"]
    print(
        f"cell: team success {report['team_success']:.0%} of {report['episodes']} episodes; "
        f"{truth['separation_steps']} steps closer than {truth['min_separation_m']} m, {truth['contact_steps']} in "
        f"contact (closest {truth['closest_m']:.3f} m); see {out}"
    )
    return 0
