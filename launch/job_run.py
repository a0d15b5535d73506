"""``robot-grpo run``: the safe controller on the simulated robot (a pty) or a real serial port.

Robot side: this job imports the runtime (numpy, pyserial, onnxruntime, mcap) and, only for the simulated robot,
MuJoCo. Writes the MCAP tick log (``ticks.mcap``, with the run's metadata and the robot spec, launch config and
manifest attached), ``run_report.json`` and a latency histogram under ``runs/<name>/``; with ``live.enabled``
it also serves the run over the Foxglove WebSocket protocol (``launch.run_telemetry``).
"""

from __future__ import annotations

import json
import logging
import math
import sys
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from launch.jobs import write_resolved
from launch.robot_jobs import ROBOT
from launch.schema import LaunchError

logger = logging.getLogger(__name__)

TICKLOG_NAME = "ticks.mcap"
HOME_TICKS_PER_EPISODE = 4  # ticks spent homing and holding between episodes
EXTRA_TICKS = 50  # startup hold and slack before the tick limit ends a run
LOSSY_LINK_TICKS = 2.0  # tick budget per episode tick: a lossy link costs held ticks and resent HOMEs
# robot.* keys that only the simulated robot reads; on a serial robot they must stay at their defaults (off).
SIM_ONLY_ROBOT_KEYS = ("delay", "obs_noise_std_m", "action_gain", "lockstep", "byte_error_rate")


def sim_goals(
    first_seed: int,
    n_targets: int,
    delay: int,
    box: tuple[Any, Any],
    max_draws: int = 100_000,
    task: str = "reach",
) -> tuple[np.ndarray, list[int], int]:
    """The first ``n_targets`` goals the simulated task (``"reach"``, or ``"push"``: the block's goals on the push
    cell) draws from seeds ``first_seed, first_seed + 1, ...`` that lie inside the workspace ``box`` (the same goals a
    pure-sim evaluation with those seeds serves); returns the goals, their seeds, and how many seeds were skipped
    because their goal lies outside the box."""
    from envs.sim_robot import TASK_ENVS

    low, high = np.asarray(box[0]), np.asarray(box[1])
    env = TASK_ENVS[task](delay=delay)
    goals: list[np.ndarray] = []
    seeds: list[int] = []
    seed = first_seed
    try:
        while len(goals) < n_targets:
            if seed - first_seed >= max_draws:
                raise LaunchError(f"fewer than {n_targets} of {max_draws} sim goals lie in the workspace {box}")
            env.reset(seed=seed)
            if np.all(env.goal >= low) and np.all(env.goal <= high):
                goals.append(env.goal.copy())
                seeds.append(seed)
            seed += 1
    finally:
        env.close()
    return np.stack(goals), seeds, seed - first_seed - n_targets


def sim_task(contract: Any) -> str:
    """The simulated robot's task for a package: the push cell when its contract reads a block, else the reach arm."""
    return "push" if contract.has_block else "reach"


def read_goals_file(path: str | Path, episodes: int) -> np.ndarray:
    """Targets from a YAML list of [x, y, z] (metres), cycled to ``episodes`` targets."""
    path = Path(path)
    if not path.is_file():
        raise LaunchError(f"goals file {path} does not exist; 'goals_file' must be a YAML list of [x, y, z] metres")
    try:
        data = yaml.safe_load(path.read_text())
        goals = np.asarray(data, dtype=np.float64) if isinstance(data, list) and data else None
    except (yaml.YAMLError, ValueError, TypeError):
        goals = None
    if goals is None or goals.ndim != 2 or goals.shape[1] != 3 or not np.all(np.isfinite(goals)):
        raise LaunchError(f"{path}: expected a YAML list of finite [x, y, z] targets in metres, e.g. [[1.3, 0.7, 0.5]]")
    return goals[np.arange(episodes) % len(goals)]


def start_robot(robot: dict[str, Any], seed: int, task: str = "reach") -> tuple[str, Any]:
    """The port to connect to, and the simulated robot process (None for a real port).

    The simulated robot (``task``: the reach arm, or the push cell for a package whose contract has a block) is what
    its own spec (``calibration/sim_fetch.yaml``, ``sim_fetch_push.yaml``) says, with the launch file's
    ``robot.delay`` / ``robot.obs_noise_std_m`` / ``robot.action_gain`` as explicit simulation settings (a drift);
    the runtime knows it only through the calibration file it is given, like a real arm.
    """
    if robot["kind"] == "serial":
        if not robot["port"]:
            raise LaunchError("'robot.port' is required when 'robot.kind' is serial (e.g. /dev/ttyUSB0)")
        set_for_sim = [key for key in SIM_ONLY_ROBOT_KEYS if robot[key] != ROBOT.fields[key].default]
        if set_for_sim:
            raise LaunchError(
                f"robot.{', robot.'.join(set_for_sim)}: simulated-robot settings, but 'robot.kind' is serial, where "
                "nothing reads them (a real robot's delay and noise come from its calibration file); remove them or "
                "set 'robot.kind: sim'"
            )
        return robot["port"], None
    from envs.sim_faults import SimFaults
    from envs.sim_robot_process import SimRobotProcess

    process = SimRobotProcess(
        faults=SimFaults(corrupt_prob=robot["byte_error_rate"]),
        mode="lockstep" if robot["lockstep"] else "realtime",
        delay=robot["delay"],
        obs_noise_std_m=robot["obs_noise_std_m"],
        action_gain=robot["action_gain"],
        seed=seed,
        task=task,
    )
    return process.port_name, process


def checked_package(config: dict[str, Any], spec: Any) -> tuple[Any, list[str]]:
    """Load the package and check it against the robot spec; a mismatch stops here unless overridden (logged)."""
    from deploy.runtime.compatibility import check_compatibility
    from deploy.runtime.package import load_package

    package = load_package(config["package"])
    override = config["override_compatibility"]
    problems = check_compatibility(
        spec, package.contract, package.action_delay_steps, str(package.folder), override=override
    )
    for problem in problems:
        logger.warning("override_compatibility: running although %s", problem)
    return package, problems


def run(config: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """Run the controller as the launch config says; returns the run summary (also in run_report.json)."""
    from deploy.robot_spec import DEFAULT_SIM_SPEC, load_robot_spec
    from deploy.runtime.goals import GoalSource
    from deploy.runtime.hotswap import PolicySlot, StoreFollower, contract_probe
    from deploy.runtime.loop import Controller
    from deploy.runtime.loop_config import LoopConfig
    from deploy.runtime.ticklog import TickLogWriter
    from deploy.wire.messages import MAX_SEED
    from launch.run_telemetry import TransitionFeed, open_live_view, run_attachments, run_metadata

    spec_file = Path(config["calibration"] or DEFAULT_SIM_SPEC)
    spec = load_robot_spec(spec_file)
    package, mismatched = checked_package(config, spec)
    contract = package.contract
    policy: Any = package.make_backend(config["backend"], config["variant"])
    if config["explore"]:
        from deploy.runtime.exploration import line_exploration

        policy = line_exploration(policy, package, config["explore_std_scale"], seed=config["seed"])
    follower = None
    if config["follow_store"]:
        if config["explore"]:
            raise LaunchError("'follow_store' and 'explore' cannot be combined: a swapped-in package has no noise")
        if not Path(config["follow_store"]).is_dir():
            raise LaunchError(
                f"'follow_store' = {config['follow_store']} is not a folder: give the package store the promotions "
                "go to (robot-grpo finetune's 'store'; python -m deploy.finetune.promote status --store DIR shows one)"
            )
        # Every package the follower swaps in answers (and is warmed up on) an observation the controller builds.
        centre_m = (np.asarray(spec.workspace_low) + np.asarray(spec.workspace_high)) / 2.0
        probe = contract_probe(contract, centre_m)
        policy = PolicySlot(policy, label=package.folder.name, probe=probe, policy_id=package.policy_id)
        follower = StoreFollower(policy, config["follow_store"], spec, contract, config["backend"], config["variant"])
    episodes, robot = config["episodes"], config["robot"]
    # A production line repeats its targets: attempts at one target are consecutive and share its seed.
    attempts = config["attempts_per_target"]
    n_targets = -(-episodes // attempts)
    box = (spec.workspace_low, spec.workspace_high)
    skipped = 0
    if config["seed"] + n_targets - 1 > MAX_SEED:
        raise LaunchError(
            f"'seed' = {config['seed']}: the targets are seeded {config['seed']}.. {config['seed'] + n_targets - 1}, "
            f"past {MAX_SEED} (HOME carries a seed as an unsigned 64-bit integer); use a smaller seed"
        )
    if config["goals_file"]:
        targets = read_goals_file(config["goals_file"], n_targets)
        target_seeds = [config["seed"] + i for i in range(n_targets)]
    elif robot["kind"] == "sim":
        # The sim task's goals that lie in the calibrated box (FetchReach draws z down to 0.385 m, below a
        # measured floor): a target outside the workspace is not a task, the GoalSource would refuse it.
        delay = spec.delay_steps if robot["delay"] is None else robot["delay"]
        targets, target_seeds, skipped = sim_goals(config["seed"], n_targets, delay, box, task=sim_task(contract))
    else:
        raise LaunchError("'goals_file' is required on a real robot: the targets of the line, [x, y, z] metres")
    index = [i // attempts for i in range(episodes)]
    try:
        goals = GoalSource(targets[index], [target_seeds[i] for i in index], workspace=box)
    except ValueError as err:  # a target outside the robot spec's workspace
        source = f"goals_file {config['goals_file']}" if config["goals_file"] else "the simulated task's goals"
        raise LaunchError(f"{source}: {err} (the workspace of robot spec {spec.robot_id!r})") from None
    steps = config["episode_steps"]
    if config["period_s"] is not None and not (robot["kind"] == "sim" and robot["lockstep"]):
        raise LaunchError(
            "'period_s' may only shorten the period against the lock-step simulated robot (robot.lockstep: true); "
            "a real-time robot runs at the policy's control period"
        )
    period_s = config["period_s"] or contract.control_period_s
    startup_ticks = math.ceil(LoopConfig.startup_timeout_s / period_s)  # a silent robot fails at startup first
    episode_ticks = math.ceil(episodes * (steps + HOME_TICKS_PER_EPISODE) * LOSSY_LINK_TICKS)
    loop_config = LoopConfig(
        period_s=config["period_s"],
        max_episode_steps=steps,
        max_ticks=episode_ticks + startup_ticks + EXTRA_TICKS,
        realtime_priority=config["realtime_priority"],
        cpu=config["cpu"],
        cpu_latency_us=config["cpu_latency_us"],
    )
    with ExitStack() as cleanup:  # on the way out, in reverse: follower, transitions, tick log, live view, robot
        port, process = start_robot(robot, config["seed"], sim_task(contract))
        if process is not None:
            cleanup.callback(process.stop)
        live = open_live_view(config["live"], spec, contract)
        if live is not None:
            cleanup.callback(live.close)
        ticklog = TickLogWriter(
            run_dir / TICKLOG_NAME,
            metadata=run_metadata(config, spec, spec_file, package),
            attachments=run_attachments(config, spec_file, package),
            live=live,
        )
        cleanup.callback(ticklog.close)
        transitions = TransitionFeed(ticklog)
        cleanup.callback(transitions.finish)  # the shutdown's transitions, after the last tick
        logger.info(
            "run: %d episodes x %d steps at %.0f Hz on %s (%s robot)",
            episodes,
            steps,
            1.0 / (loop_config.period_s or contract.control_period_s),
            port,
            robot["kind"],
        )
        if follower is not None:
            follower.start()
            cleanup.callback(follower.stop)
        report = Controller(
            port,
            contract,
            policy,
            spec,
            goals,
            loop_config,
            ticklog=ticklog,
            on_tick=transitions.on_tick,
            baudrate=robot["baudrate"],
            policy_id=package.policy_id,
        ).run()
    summary = {
        "package": str(config["package"]),
        "policy_id": package.policy_id,
        "backend": config["backend"],
        "variant": config["variant"],
        "explore": config["explore"],
        "explore_std_scale": config["explore_std_scale"] if config["explore"] else None,
        "robot": robot,
        "robot_spec": {"robot_id": spec.robot_id, "file": str(spec_file)},
        "compatibility_overridden": mismatched,
        "swaps": follower.swaps if follower is not None else [],
        "follower": follower.health() if follower is not None else None,
        "episodes": len(report.episodes),
        "success_rate": report.success_rate,
        "timing": report.timing,
        "interventions": report.interventions,
        "counts": report.counts,
        "ticks": report.ticks,
        "skipped_goals_outside_workspace": skipped,
        "transitions": [
            {"tick": t.tick, "from": t.source.name, "to": t.target.name, "reason": t.reason} for t in report.transitions
        ],
        "ticklog": str(run_dir / TICKLOG_NAME),
        "live": {"url": f"ws://{live.host}:{live.port}", **live.stats.summary()} if live is not None else None,
        "episode_results": [
            {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in asdict(e).items()} for e in report.episodes
        ],
    }
    (run_dir / "run_report.json").write_text(json.dumps(summary, indent=2))
    return summary


def tick_latencies(ticklog_path: Path) -> np.ndarray:
    """Per-tick latency (seconds) of the commanded ticks, read back from the tick log."""
    from deploy.runtime.ticklog import read_ticklog

    return np.asarray([r.latency_s for r in read_ticklog(ticklog_path) if r.latency_s > 0], dtype=np.float64)


def shortfall(summary: dict[str, Any], wanted: int) -> str:
    """One line on a run that served fewer than ``wanted`` episodes: how it ended and what the link lost."""
    counts = summary["counts"]
    parts = [f"served {summary['episodes']} of {wanted} episodes"]
    if summary["transitions"]:
        last = summary["transitions"][-1]
        parts.append(f"the run ended in {last['from']}: {last['reason']}")
    if counts.get("safe_stops"):
        parts.append(f"{counts['safe_stops']} safe stops")
    states = counts.get("states", 0)
    gaps = counts.get("robot_frame_gaps", 0)
    if gaps:
        parts.append(f"{gaps} gaps in the robot's numbering over {states} states received: frames lost on the link")
    if counts.get("link_errors"):
        parts.append(f"{counts['link_errors']} link errors")
    return "; ".join(parts)


def main(config: dict[str, Any]) -> int:
    from launch.report import plot_latency_histogram, plotting_available

    run_dir = Path(config["output"]) / config["name"]
    write_resolved(config, run_dir)
    summary = run(config, run_dir)
    if plotting_available():
        latencies = tick_latencies(Path(summary["ticklog"]))
        plot_latency_histogram(latencies, run_dir / "latency.png", "control tick latency")
    else:  # the robot computer's [robot] install: the report and the tick log hold every figure of the plot
        print("robot-grpo: latency.png skipped: matplotlib is not installed (pip install matplotlib to draw it)")
    timing = summary["timing"]
    follower = summary["follower"]
    if follower and (follower["refusals"] or follower["watch_errors"]):
        print(
            f"robot-grpo: warning: the store follower refused {follower['refusals']} package(s) and had "
            f"{follower['watch_errors']} failed polls; last: {follower['last_error']} (see run_report.json)",
            file=sys.stderr,
        )
    if summary["episodes"] < config["episodes"]:
        print(
            f"robot-grpo: error: {shortfall(summary, config['episodes'])} (see {run_dir / 'run_report.json'})",
            file=sys.stderr,
        )
    print(
        f"{summary['episodes']} episodes, success {100 * summary['success_rate']:.0f}%, tick latency p99 "
        f"{timing['latency_s_p99'] * 1e3:.2f} ms, jitter p99 {timing['jitter_s_p99'] * 1e3:.2f} ms, "
        f"overruns {timing['overruns']:.0f}, interventions {summary['interventions']} -> {run_dir}"
    )
    return 0 if summary["episodes"] == config["episodes"] else 1
