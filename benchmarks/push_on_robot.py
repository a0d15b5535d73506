"""The push package end to end: the same policy on the simulated push cell over a pty and in pure simulation.

Three runs of one policy package (its fp32 ONNX on onnxruntime CPU), over the same seeded episodes (block start and
goal drawn from the seed):

- pure simulation: ``DelayedFetchPush-v0``, the training task (no tracker noise, no link), the env's own success;
  and the same task through the cell's safety filter (``safety_spec``, ``envs.safety_shield``: the barrier with the
  true position), which tells how much of a gap the barrier alone makes;
- on the robot: ``envs.sim_robot.SimRobot(task="push")`` serving the wire protocol on a pty (``--mode realtime``: paced
  at 25 Hz; ``lockstep``: one step per command), driven by ``deploy.runtime.loop.Controller`` with the push spec
  (``calibration/sim_fetch_push.yaml``: tracker noise 1 mm, 25 Hz), its state checks, the block check and the
  unchanged safety filter; success judged by the runtime on the reported block. The true gripper positions the
  simulator recorded are checked against the spec's workspace box (steps outside, largest excursion);
- a tracker glitch: the first ``--jump-episodes`` episodes again, with the block reported ``--jump-m`` metres away
  for one state at policy step ``JUMP_AT_STEP`` of each; the runtime must reject each with ``implausible_block_jump``.

Must show (issue 33): success on the robot within 5 pp of pure simulation over 50 episodes; the jump rejected with a
named reason; 0 gripper steps outside the box. Writes benchmarks/results/push_on_robot.json and .md.

    .venv/bin/python benchmarks/push_on_robot.py --package PATH [--episodes 50] [--mode realtime]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

RESULTS = ROOT / "benchmarks" / "results"
SPEC_FILE = ROOT / "calibration" / "sim_fetch_push.yaml"
SIM_ENV_ID = "DelayedFetchPush-v0"
FIRST_SEED = 10_000  # the exporter's closed-loop seeds
JUMP_AT_STEP = 20  # policy step of an episode at which the tracker glitches
TOLERANCE_PP = 5.0  # the must-show: robot within this many percentage points of pure simulation


def sim_success(act: Any, contract: Any, seeds: list[int], env_kwargs: dict[str, Any] | None = None) -> list[bool]:
    """The env's own ``is_success`` at the end of each seeded episode of the training task (``env_kwargs``: e.g. the
    cell's safety filter)."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the ids)

    env = gym.make(SIM_ENV_ID, **(env_kwargs or {}))
    results = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        done, info = False, {}
        while not done:
            action = np.asarray(act(contract.flatten(obs)[None])[0], dtype=np.float64)
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        results.append(bool(info["is_success"]))
    env.close()
    return results


def episode_goals(seeds: list[int]) -> np.ndarray:
    """The goals of the seeded episodes (the robot draws the same block and goal from the seed it is homed with)."""
    import gymnasium as gym

    import envs  # noqa: F401

    env = gym.make(SIM_ENV_ID)
    goals = np.stack([env.reset(seed=seed)[0]["desired_goal"] for seed in seeds])
    env.close()
    return goals


def robot_run(act: Any, contract: Any, seeds: list[int], mode: str, jump_m: float | None) -> dict[str, Any]:
    """Run the episodes on the simulated push cell over a pty; with ``jump_m``, glitch the tracker once each."""
    from deploy.robot_spec import load_robot_spec
    from deploy.runtime.goals import GoalSource
    from deploy.runtime.loop import Controller
    from envs.sim_robot import SimRobot

    spec = load_robot_spec(SPEC_FILE)
    glitched: set[int] = set()

    def on_tick(ctl: Controller, _record: Any) -> None:
        episode = ctl.episodes.current
        if jump_m is None or episode is None or episode.index in glitched or ctl.episodes.steps != JUMP_AT_STEP:
            return
        glitched.add(episode.index)
        robot.faults.block_jump((jump_m, 0.0, 0.0), frames=1)

    robot = SimRobot(mode=mode, task="push", spec=spec, seed=seeds[0]).start()
    start = time.perf_counter()
    try:
        controller = Controller(
            robot.port_name, contract, act, spec, GoalSource(episode_goals(seeds), seeds), on_tick=on_tick
        )
        report = controller.run()
    finally:
        robot.stop()
    trace = np.asarray(robot.trace)
    low, high = np.asarray(spec.workspace_low), np.asarray(spec.workspace_high)
    excursion = np.maximum(low - trace, trace - high).max(axis=1)  # > 0: outside, metres
    return {
        "success": [bool(e.success) for e in report.episodes],
        "end_reasons": {str(e.index): e.end_reason for e in report.episodes if e.end_reason},
        "aborted": sum(e.aborted for e in report.episodes),
        "robot_steps": len(trace),
        "gripper_steps_outside_box": int((excursion > 0).sum()),
        "largest_excursion_m": float(max(0.0, excursion.max())),
        "counts": {k: v for k, v in sorted(report.counts.items()) if k.startswith(("implausible_", "safe_stops"))},
        "interventions": {k: v for k, v in sorted(report.interventions.items()) if v},
        "glitched_episodes": sorted(glitched),
        "tick_p99_ms": 1e3 * report.timing.get("latency_p99_s", float("nan")),
        "wall_s": time.perf_counter() - start,
    }


def render(result: dict[str, Any]) -> str:
    sim, robot, jump = result["sim"], result["robot"], result["jump"]
    n = result["episodes"]
    lines = [
        "# Push package on the simulated robot vs pure simulation",
        "",
        f"Package `{result['package']}` ({result['variant']}, ort-cpu); {n} episodes, seeds {result['seeds'][0]}.."
        f"{result['seeds'][-1]}; robot over a pty in {result['mode']} mode with spec `{result['spec']}`. "
        f"Command: `{result['command']}`.",
        "",
        "| run | success | vs pure sim (pp) | gripper steps outside box | block jumps rejected | ended early |",
        "|---|---|---|---|---|---|",
        f"| pure simulation ({SIM_ENV_ID}) | {sim['rate']:.1%} | - | - | - | - |",
        f"| simulation through the cell's safety filter | {result['shielded']['rate']:.1%} | "
        f"{100.0 * (result['shielded']['rate'] - sim['rate']):+.1f} | - | - | - |",
        f"| robot over the pty | {robot['rate']:.1%} | {result['gap_pp']:+.1f} | "
        f"{robot['gripper_steps_outside_box']} of {robot['robot_steps']} | "
        f"{robot['counts'].get('implausible_block_jump', 0)} | {robot['end_reasons'] or 'none'} |",
        f"| robot, tracker glitch ({result['jump_m'] * 100:.0f} cm, {len(jump['glitched_episodes'])} episodes) | "
        f"{jump['rate']:.1%} | - | {jump['gripper_steps_outside_box']} of {jump['robot_steps']} | "
        f"{jump['counts'].get('implausible_block_jump', 0)} | {jump['end_reasons'] or 'none'} |",
        "",
        f"Same outcome on {result['agree']} of {n} episodes. Robot run rejections: {robot['counts'] or 'none'}; "
        f"glitch run rejections: {jump['counts'] or 'none'}.",
        "",
        f"Must show: within {TOLERANCE_PP:g} pp of pure simulation: "
        f"**{'yes' if abs(result['gap_pp']) <= TOLERANCE_PP else 'NO'}** ({result['gap_pp']:+.1f}); of simulation "
        f"behind the cell's safety filter (the training env of a package trained behind it, `env.safety_spec`): "
        f"**{'yes' if abs(result['shielded_gap_pp']) <= TOLERANCE_PP else 'NO'}** "
        f"({result['shielded_gap_pp']:+.1f}); "
        f"every glitch rejected as `implausible_block_jump`: **{'yes' if result['jumps_rejected'] else 'NO'}**; "
        f"0 gripper steps outside the box: **{'yes' if result['outside_total'] == 0 else 'NO'}**.",
        "",
        f"Machine: {result['machine']}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", required=True, help="a push policy package (contract fetch_push)")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--first-seed", type=int, default=FIRST_SEED)
    parser.add_argument("--mode", choices=("realtime", "lockstep"), default="realtime")
    parser.add_argument("--variant", default="fp32")
    parser.add_argument("--jump-m", type=float, default=0.10, help="tracker glitch: block reported this far away")
    parser.add_argument("--jump-episodes", type=int, default=10)
    parser.add_argument("--allow-failed-checks", action="store_true", help="a package whose export checks failed")
    parser.add_argument("--out", default=str(RESULTS / "push_on_robot"), help="output path without suffix")
    args = parser.parse_args(argv)

    from deploy.runtime.package import load_package

    package = load_package(args.package, allow_failed_checks=args.allow_failed_checks)
    contract = package.contract
    if not contract.has_block:
        print(
            f"error: package {args.package} has no block in its contract ({contract.name}); pass a push package",
            file=sys.stderr,
        )
        return 2
    act = package.make_backend("ort-cpu", args.variant)
    seeds = list(range(args.first_seed, args.first_seed + args.episodes))
    sim = sim_success(act, contract, seeds)
    shielded = sim_success(act, contract, seeds, {"safety_spec": str(SPEC_FILE)})
    robot = robot_run(act, contract, seeds, args.mode, None)
    jump = robot_run(act, contract, seeds[: args.jump_episodes], args.mode, args.jump_m)
    for run, outcomes in ((robot, robot["success"]), (jump, jump["success"])):
        run["rate"] = float(np.mean(outcomes)) if outcomes else 0.0
    sim_rate = float(np.mean(sim))
    result = {
        "package": str(args.package),
        "variant": args.variant,
        "spec": str(SPEC_FILE.relative_to(ROOT)),
        "mode": args.mode,
        "episodes": args.episodes,
        "seeds": seeds,
        "jump_m": args.jump_m,
        "command": "python benchmarks/push_on_robot.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "sim": {"success": sim, "rate": sim_rate},
        "shielded": {"success": shielded, "rate": float(np.mean(shielded))},
        "robot": robot,
        "jump": jump,
        "gap_pp": round(100.0 * (robot["rate"] - sim_rate), 6),
        "shielded_gap_pp": round(100.0 * (robot["rate"] - float(np.mean(shielded))), 6),
        "agree": int(sum(a == b for a, b in zip(sim, robot["success"], strict=False))),
        "jumps_rejected": jump["counts"].get("implausible_block_jump", 0) >= len(jump["glitched_episodes"]) > 0,
        "outside_total": robot["gripper_steps_outside_box"] + jump["gripper_steps_outside_box"],
        "machine": f"{platform.processor() or platform.machine()}, Python {platform.python_version()}",
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    out.with_suffix(".md").write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
