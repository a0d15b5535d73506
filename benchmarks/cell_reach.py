"""Where the simulated Fetch can hold still, and what the cell's far goals cost a trained policy behind its runtimes.

A trained cell policy scores 95% in pure simulation and about 60% through the runtimes on the simulated cell
(``docs/guides/cell.md``); the failures gather at goals far out over the table. This benchmark measures why, in two
parts:

1. Hold drift (always): one arm of the cell scene (``envs.cell_scene``, the other arm absent) is driven to a grid of
   points across and beyond the goal box (0.6 of the remaining distance per step, 60 steps) and then held (zero
   commands) for ``HOLD_STEPS`` steps; the drift per step is how far it moves by itself. FetchReach re-bases its
   mocap target on the gripper every step, so nothing holds an arm that gravity pulls on: where it sags, a hold
   command is not a hold. A runtime cannot tell an arm sagging against its commands from one that does not follow
   them (a frozen sensor, a blocked arm): ``not_following`` stops it.
2. A trained cell model behind both runtimes (``--model runs/<name>/model.zip``: ``TwoArmCellEnv(safety_spec=...)``,
   the runtime's own filter, barrier, bound and stops; 100 goal pairs, seeds 7000 on, the pairs ``robot-grpo cell``
   and ``benchmarks/cell_runtime.py`` serve) with the spec as shipped and with its workspace's far face (x, the arm's
   own frame) moved in to each of ``--caps``: the filter then keeps the arm out of the sag, and the table shows
   whether that buys success or only trades the stops for misses. Team success and stops, split by whether a goal
   lies beyond ``FAR_X_M``.

    .venv/bin/python benchmarks/cell_reach.py [--model runs/cell_1002/model.zip] [--caps 1.50,1.52,1.54]

Writes benchmarks/results/cell_reach.json, .md and .png (the hold drift); the findings are in
docs/benchmarks/cell-study.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from deploy.robot_spec import RobotSpec, load_robot_spec  # noqa: E402
from envs.cell_scene import ACTION_SCALE_M, CellScene  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
SEEKER_GAIN = 0.6  # share of the remaining distance commanded per step while driving to a grid point
DRIVE_STEPS = 60  # control steps to reach a grid point (it is within 1 mm by then where the arm can get there)
HOLD_STEPS = 5  # control steps held (zero commands) after it
GRID_X_M = (1.30, 1.35, 1.40, 1.45, 1.48, 1.50, 1.52, 1.54, 1.56, 1.58, 1.60, 1.62, 1.64)  # the arm's frame
GRID_Y_M = (0.60, 0.75, 0.90)  # across the goal box (its centre line 0.749)
GRID_Z_M = (0.45, 0.55, 0.65)  # the goal box's heights
FAR_X_M = 1.50  # goals beyond this (the arm's frame) are "far" in the tables (where the hold drift starts)
EVAL_SEED = 7000  # the goal pairs the cell benchmarks serve
EVAL_EPISODES = 100


def hold_drift_at(scene: CellScene, target: np.ndarray) -> tuple[np.ndarray, float]:
    """Arm 0 from its start pose driven at ``target`` (metres, its frame = the world's), then held: where it got and
    how far it moved per held step (metres)."""
    scene.set_state(scene.initial_state)
    for _ in range(DRIVE_STEPS):
        command = np.clip(SEEKER_GAIN * (target - scene.grip_pos(0)) / ACTION_SCALE_M, -1.0, 1.0)
        scene.control_step({0: command})
    reached = scene.grip_pos(0)
    for _ in range(HOLD_STEPS):
        scene.control_step({0: np.zeros(3)})
    return reached, float(np.linalg.norm(scene.grip_pos(0) - reached) / HOLD_STEPS)


def hold_drift() -> list[dict[str, Any]]:
    """Per grid point: where the arm got (metres, its frame) and its drift per held step (metres)."""
    scene = CellScene(arms=(0,))
    rows = []
    for z in GRID_Z_M:
        for y in GRID_Y_M:
            for x in GRID_X_M:
                reached, drift = hold_drift_at(scene, np.array([x, y, z]))
                rows.append({"target_m": [x, y, z], "reached_m": reached.tolist(), "drift_m_per_step": drift})
    return rows


def capped(spec: RobotSpec, far_x_m: float) -> RobotSpec:
    """The spec with its workspace's far x face at ``far_x_m`` (metres, the arm's frame)."""
    high = (far_x_m, *spec.workspace_high[1:])
    return dataclasses.replace(spec, workspace_high=high)


def behind_runtimes(model_path: str, spec: RobotSpec | None) -> dict[str, Any]:
    """The model's team success behind both runtimes (``spec``'s filter; None: pure simulation, no runtimes) on the
    cell benchmarks' goal pairs."""
    from envs.two_arm_cell import TwoArmCellEnv
    from robot_grpo import CellGRPO

    model = CellGRPO.load(model_path)
    env = TwoArmCellEnv(safety_spec=spec)
    stops: Counter[str] = Counter()
    split = {"near": [0, 0], "far": [0, 0]}  # [episodes, successes]
    for episode in range(EVAL_EPISODES):
        obs, _ = env.reset(seed=EVAL_SEED + episode)
        far = "far" if float(np.max(env.goals[:, 0])) > FAR_X_M else "near"
        for _ in range(env.max_episode_steps):
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(np.asarray(action).reshape(2, -1))
            if terminated or truncated:
                break
        if info.get("safe_stop"):
            stops[info["safe_stop"].split(": ", 1)[1]] += 1
        split[far][0] += 1
        split[far][1] += bool(info["is_success"])
    return {
        "workspace_high_x_m": None if spec is None else spec.workspace_high[0],
        "team_success": (split["near"][1] + split["far"][1]) / EVAL_EPISODES,
        "near": {"episodes": split["near"][0], "successes": split["near"][1]},
        "far": {"episodes": split["far"][0], "successes": split["far"][1]},
        "safe_stops": dict(stops),
    }


def _share(part: dict[str, int]) -> str:
    return f"{part['successes']}/{part['episodes']}" if part["episodes"] else "-"


def write_markdown(results: dict[str, Any], path: Path) -> None:
    lines = [
        "# Two-arm cell: where the simulated Fetch holds still (benchmarks/cell_reach.py)",
        "",
        f"Machine: {results['machine']}. Hold drift: one arm driven to each point ({DRIVE_STEPS} steps), then "
        f"{HOLD_STEPS} steps of zero commands; mm moved per held step, the worst over y {GRID_Y_M} and z "
        f"{GRID_Z_M} (m, the arm's frame), and the farthest x it reached.",
        "",
        "| x asked (m) | drift per held step, worst (mm) | x reached, least (m) |",
        "|---|---|---|",
    ]
    for x in GRID_X_M:
        at = [r for r in results["hold"] if r["target_m"][0] == x]
        worst = max(r["drift_m_per_step"] for r in at)
        reached = min(r["reached_m"][0] for r in at)
        lines.append(f"| {x:.2f} | {worst * 1e3:.1f} | {reached:.3f} |")
    if results.get("behind_runtimes"):
        lines += [
            "",
            f"The model `{results['model']}` behind both runtimes on {EVAL_EPISODES} goal pairs (seeds {EVAL_SEED} "
            f"on); far: a goal beyond x {FAR_X_M} m in its arm's frame.",
            "",
            "| workspace far face x (m) | team success | near pairs | far pairs | safe stops |",
            "|---|---|---|---|---|",
        ]
        for r in results["behind_runtimes"]:
            stops = ", ".join(f"{k} {v}" for k, v in r["safe_stops"].items()) or "0"
            face = (
                "no runtimes (pure simulation)" if r["workspace_high_x_m"] is None else f"{r['workspace_high_x_m']:.2f}"
            )
            lines.append(f"| {face} | {r['team_success']:.0%} | {_share(r['near'])} | {_share(r['far'])} | {stops} |")
    lines += ["", f"Command: `{results['command']}` ({results['wall_s']:.0f} s)", ""]
    path.write_text("\n".join(lines))


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for y in GRID_Y_M:
        for z in GRID_Z_M:
            at = [r for r in results["hold"] if r["target_m"][1] == y and r["target_m"][2] == z]
            ax.plot([r["target_m"][0] for r in at], [r["drift_m_per_step"] * 1e3 for r in at], color="C0", alpha=0.5)
    ax.axvline(FAR_X_M, color="C3", linestyle="--", label=f"x = {FAR_X_M} m")
    ax.set_xlabel("x asked, the arm's frame (m)")
    ax.set_ylabel("drift per held step (mm)")
    ax.set_title("Simulated Fetch under zero commands (9 heights and sides)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a trained TwoArmCell-v0 model.zip (part 2; none: part 1 only)")
    parser.add_argument("--spec", default=None, help="the runtimes' robot spec (default: the shipped sim_fetch)")
    parser.add_argument("--caps", default="1.50,1.52,1.54", help="workspace far faces to try, metres (comma list)")
    parser.add_argument("--out", default="cell_reach", help="results file stem")
    args = parser.parse_args(argv)
    try:
        caps = [float(v) for v in args.caps.split(",") if v.strip()]
    except ValueError:
        print(f"error: --caps takes metres separated by commas, got {args.caps!r}", file=sys.stderr)
        return 2
    if args.model is not None and not Path(args.model).is_file():
        print(
            f"error: --model {args.model} is not a file (robot-grpo train writes runs/<name>/model.zip)",
            file=sys.stderr,
        )
        return 2
    started = time.perf_counter()
    results: dict[str, Any] = {
        "machine": f"{platform.node()} ({platform.machine()})",
        "command": " ".join(["benchmarks/cell_reach.py", *(sys.argv[1:] if argv is None else argv)]),
        "model": args.model,
        "hold": hold_drift(),
    }
    if args.model is not None:
        spec = load_robot_spec(args.spec) if args.spec else load_robot_spec()
        specs = (None, spec, *(capped(spec, c) for c in caps))
        results["behind_runtimes"] = [behind_runtimes(args.model, s) for s in specs]
    results["wall_s"] = time.perf_counter() - started
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(results, indent=1))
    write_markdown(results, RESULTS / f"{args.out}.md")
    plot(results, RESULTS / f"{args.out}.png")
    print(f"wrote {RESULTS / args.out}.json, .md and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
