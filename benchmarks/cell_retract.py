"""Homing in the two-arm cell: a HOME at once against a retract under both barriers first, in the cell's simulation.

At an episode's end the two arms stand at their goals, often crossed. A HOME puts an arm's whole posture back at its
start pose (the simulated cell's HOME is instant; a real arm's homing path is its own), planned by no barrier. This
benchmark runs the cell in simulation behind both runtimes' own filters and separation barriers
(``TwoArmCellEnv(safety_spec=...)``, ``envs/cell_shield.py``), the scripted goal seeker on the task's goal pairs for an
episode, then, from the same snapshot:

- ``home at once``: one arm homed while the partner stands where its episode left it (either arm first); a contact
  between the arms right after is a HOME that touched;
- ``retract``: both arms drive back to their homes under their barriers with the runtime's own retract
  (``deploy.runtime.retract.Retraction``: its law with its give-way, tolerance and budget; each arm is given the
  partner's gripper in its frame, as its barrier's report gives it) until both are over, then both HOME; the same
  with the barrier's reserve set to 0 (``SeparationBarrier.reserve_m``), which shows why the reserve is there.

Counted per goal pair, judged by the physics at every 2 ms substep: contacts at HOME, contacts and separation
violations while retracting, retracts over within the tolerance, retracts that stalled short of home (neither arm
safe-stopped: the barriers held them), pairs with an arm its runtime would have safe-stopped (the simulated Fetch's
sag far out), the retract's length, and the give-ways (``deploy.runtime.retract_detour``: started, and pairs with one).

    .venv/bin/python benchmarks/cell_retract.py [--pairs 1000] [--seed 7000]

Writes benchmarks/results/cell_retract.json and .md; the findings are in docs/guides/cell.md.
"""

from __future__ import annotations

import argparse
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

from deploy.runtime.retract import CELL_RETRACT_STEPS, RETRACTS_COMPLETE, Retraction  # noqa: E402
from deploy.runtime.retract_detour import RETRACT_DETOURS  # noqa: E402
from envs.cell_scene import ACTION_SCALE_M  # noqa: E402
from envs.sim_cell_robot import cell_goals  # noqa: E402
from envs.two_arm_cell import ACTION_DIM, GOALS_OPTION, N_ARMS, TwoArmCellEnv  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
SAFETY_SPEC = "shipped:calibration/sim_fetch.yaml"
SEEKER_GAIN = 0.6  # share of the remaining distance commanded per step (the cell's scripted goal seeker's)
RETRACT_TOLERANCE_M = 0.02  # LoopConfig.retract_tolerance_m's default


def _seek(achieved: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """The goal seeker's commands [2, 4] for grippers at ``achieved`` [2, 3] (each arm's frame)."""
    action = np.zeros((N_ARMS, ACTION_DIM))
    action[:, :3] = np.clip(SEEKER_GAIN * (goals - achieved) / ACTION_SCALE_M, -1.0, 1.0)
    return action


def _a_home_touches(env: TwoArmCellEnv, snapshot: Any) -> bool:
    """From ``snapshot``, home one arm alone (the scene's HOME of one arm; each arm first in turn): whether the arms
    touch right after either."""
    for first in range(N_ARMS):
        env.reset(options={"snapshot": snapshot})
        env.scene.reset_arm(first)
        if env.scene.arms_in_contact():
            return True
    return False


def _retract(env: TwoArmCellEnv, obs: dict[str, np.ndarray], homes: np.ndarray) -> dict[str, Any]:
    """Both arms retract under the shield until both are over; what happened."""
    parts = [
        Retraction(homes[arm], RETRACT_TOLERANCE_M, CELL_RETRACT_STEPS, ACTION_SCALE_M, 1.0, ACTION_DIM, Counter())
        for arm in range(N_ARMS)
    ]
    for part in parts:
        part.start()
    steps = 0
    while True:
        grips = obs["achieved_goal"]  # each arm's frame; a partner's report is its gripper in this arm's frame
        partners = [env.scene.to_arm(arm, env.scene.to_arm(1 - arm, grips[1 - arm])) for arm in range(N_ARMS)]
        commands = [part.command(grips[arm], partners[arm]) if part.active else None for arm, part in enumerate(parts)]
        if all(c is None for c in commands):
            break
        action = np.stack([np.zeros(ACTION_DIM) if c is None else c for c in commands])
        obs, _, _, _, _ = env.step(action)
        steps += 1
    complete = [part.counts[RETRACTS_COMPLETE] == 1 for part in parts]  # each over within the tolerance
    give_ways = sum(part.counts[RETRACT_DETOURS] for part in parts)
    return {"obs": obs, "steps": steps, "complete": all(complete), "give_ways": give_ways}


def run(pairs: int, seed: int, reserve: bool) -> dict[str, Any]:
    """The goal pairs of seeds ``seed, seed + 1, ...``: home at once, and retract-then-home (``reserve``: the
    barrier's reserve as shipped, or 0)."""
    env = TwoArmCellEnv(safety_spec=SAFETY_SPEC, end_on_violation=False)
    if not reserve:
        for barrier in env.shield.barriers:  # type: ignore[union-attr]
            barrier.reserve_m = 0.0
    homes = np.stack([env.scene.to_arm(arm, env.scene.start_grip[arm]) for arm in range(N_ARMS)])
    goals = cell_goals(seed, pairs)
    counts: Counter[str] = Counter()
    lengths: list[int] = []
    started = time.perf_counter()
    for pair in range(pairs):
        obs, _ = env.reset(options={GOALS_OPTION: goals[pair]})
        for _ in range(env.max_episode_steps):
            obs, _, _, _, info = env.step(_seek(obs["achieved_goal"], env.goals))
        counts["team_success"] += bool(info["is_success"])
        if env.violation:
            counts["episode_violation"] += 1
            continue
        snapshot = env.snapshot()
        counts["home_at_once_contact"] += _a_home_touches(env, snapshot)
        env.reset(options={"snapshot": snapshot})
        stopped_before = env.safe_stop is not None
        done = _retract(env, obs, homes)
        lengths.append(done["steps"])
        if env.violation == "contact":
            counts["retract_contact"] += 1
        elif env.violation:
            counts["retract_separation"] += 1
        stopped = env.safe_stop is not None
        counts["safe_stopped"] += stopped
        counts["safe_stopped_before_retract"] += stopped_before
        counts["retract_complete"] += done["complete"]
        counts["give_ways"] += done["give_ways"]
        counts["pairs_with_give_way"] += done["give_ways"] > 0
        counts["retract_stalled"] += not done["complete"] and not stopped
        counts["retract_then_home_contact"] += _a_home_touches(env, env.snapshot())
    length = np.asarray(lengths or [0])
    return {
        "reserve_m": float(env.shield.barriers[0].reserve_m),  # type: ignore[union-attr]
        "pairs": pairs,
        "counts": dict(counts),
        "retract_steps_p50": float(np.percentile(length, 50)),
        "retract_steps_p90": float(np.percentile(length, 90)),
        "retract_steps_max": int(length.max()),
        "wall_s": time.perf_counter() - started,
    }


def write_markdown(results: dict[str, Any], path: Path) -> None:
    lines = [
        "# Two-arm cell: HOME at once vs retract first (benchmarks/cell_retract.py)",
        "",
        f"Machine: {results['machine']}. The cell in simulation behind both runtimes' filters and separation "
        f"barriers (`TwoArmCellEnv(safety_spec={SAFETY_SPEC})`); the scripted goal seeker for one 50-step episode on "
        f"each goal pair (`cell_goals({results['seed']}, n)`), then from the same snapshot: one arm homed at once "
        "(either first), or both retracting under their barriers with the runtime's retract (tolerance "
        f"{RETRACT_TOLERANCE_M} m, at most {CELL_RETRACT_STEPS} steps) and then homed. Contacts and separation: the "
        "physics' at every 2 ms substep. Counts are goal pairs.",
        "",
        "| barrier reserve (mm) | pairs | contacts, home at once | contacts, retract then home | contacts / separation "
        "while retracting | retracts over (within 2 cm) | stalled short (no safe stop) | safe-stopped arm | retract "
        "steps p50 / p90 / max | give-ways (pairs with one) | goal seeker team success |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["runs"]:
        c = r["counts"]
        lines.append(
            f"| {1000 * r['reserve_m']:.1f} | {r['pairs']} | {c.get('home_at_once_contact', 0)} | "
            f"{c.get('retract_then_home_contact', 0)} | {c.get('retract_contact', 0)} / "
            f"{c.get('retract_separation', 0)} | {c.get('retract_complete', 0)} | {c.get('retract_stalled', 0)} | "
            f"{c.get('safe_stopped', 0)} | {r['retract_steps_p50']:.0f} / {r['retract_steps_p90']:.0f} / "
            f"{r['retract_steps_max']} | {c.get('give_ways', 0)} ({c.get('pairs_with_give_way', 0)}) | "
            f"{c.get('team_success', 0) / r['pairs']:.0%} |"
        )
    lines += ["", f"Command: `{results['command']}` ({results['wall_s']:.0f} s)", ""]
    path.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000, help="goal pairs")
    parser.add_argument("--seed", type=int, default=7000, help="seed of the first goal pair (cell_goals)")
    parser.add_argument("--out", default="cell_retract", help="results file stem")
    args = parser.parse_args(argv)
    if args.pairs < 1:
        print("error: --pairs must be >= 1", file=sys.stderr)
        return 2
    started = time.perf_counter()
    runs = []
    for reserve in (True, False):
        result = run(args.pairs, args.seed, reserve)
        runs.append(result)
        print(f"reserve {1000 * result['reserve_m']:.1f} mm: {result['counts']} ({result['wall_s']:.0f} s)", flush=True)
    results = {
        "machine": f"{platform.node()} ({platform.machine()})",
        "command": " ".join(["benchmarks/cell_retract.py", *(sys.argv[1:] if argv is None else argv)]),
        "seed": args.seed,
        "runs": runs,
        "wall_s": time.perf_counter() - started,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(results, indent=1))
    write_markdown(results, RESULTS / f"{args.out}.md")
    print(f"wrote {RESULTS / args.out}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
