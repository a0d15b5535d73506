"""Search the two-arm cell for contacts the separation barrier cannot see: the links behind the grippers.

The separation barrier (``deploy/runtime/separation.py``) keeps the two grippers' reaches ``min_separation_m`` apart.
The arms' other links (wrist, forearm, elbow) are not in its model: a runtime's state says where its gripper is, not
where its joints are. This search drives the cell through both arms' runtimes (``TwoArmCellEnv(safety_spec=...)``:
each command through the runtime's own safety filter and separation barrier, planned from its own position bound,
``envs/cell_shield.py``) with searchers that try to make the arms touch, and counts what the physics sees (a geom of
one arm touching one of the other at any 2 ms substep ends the episode), by the links that met. The same searchers
without the runtimes show what the barrier buys. Over every step searched behind the runtimes it also measures how far
each arm's links reach from its gripper (in the arm's own frame): the envelope a barrier that knows only the gripper
would have to keep clear of the partner.

Searchers (both arms, every step, 50-step episodes):

- ``goal_seeker``: 0.6 of the remaining distance to its goal per step, on the goal pairs the env draws;
- ``unfiltered``: the same on pairs drawn uniformly in the goal box with none of the draw's filters (what arms out of
  phase meet: one on its goal while the other heads for another pair's; the draw refuses pairs whose arms would
  touch on their goals);
- ``scissor``: both goals past the cell centre toward the partner, on opposite sides of the line between the arms
  (the arms must pass each other sideways);
- ``wrist_hunter``: full speed at a point drawn per episode in the partner's link envelope (behind and above its
  reported gripper);
- ``random``: uniform commands in [-1, 1].

    .venv/bin/python benchmarks/cell_contacts.py [--episodes 500] [--bare-episodes 200] [--seed 0]

Writes benchmarks/results/cell_contacts.json and .md; the findings are in docs/benchmarks/cell-study.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from envs.cell_scene import ACTION_SCALE_M, arm_prefix  # noqa: E402
from envs.two_arm_cell import GOALS_OPTION, TwoArmCellEnv  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
SAFETY_SPEC = "shipped:calibration/sim_fetch.yaml"
SEEKER_GAIN = 0.6  # share of the remaining distance commanded per step (the cell's scripted goal seeker's)
SEED_BASE = 40_000  # episode seeds: SEED_BASE + searcher index * 100_000 + episode
# The wrist hunter's target about the partner's reported gripper, in the hunter's frame (metres): toward the
# partner's base (+x), either side, above (the partner's wrist and forearm, as the envelope measures them)
HUNT_LOW, HUNT_HIGH = np.array([0.0, -0.1, 0.1]), np.array([0.3, 0.1, 0.4])
SCISSOR_PAST_M = (0.0, 0.15)  # how far past the cell centre each scissor goal lies, along the arms' line (metres)
SCISSOR_SIDE_M = (0.03, 0.15)  # how far from the line, on opposite sides for the two arms (metres)
LINK_GROUPS = {  # gymnasium-robotics Fetch bodies, gripper outward
    "gripper": ("gripper_link", "r_gripper_finger_link", "l_gripper_finger_link"),
    "wrist": ("wrist_roll_link", "wrist_flex_link"),
    "forearm": ("forearm_roll_link",),
    "elbow": ("elbow_flex_link", "upperarm_roll_link"),
}
FETCH_PREFIX = "robot0:"  # gymnasium-robotics' prefix of every Fetch body name (left out of the tables)
CORNERS = np.array(list(itertools.product((-1.0, 1.0), repeat=3)))

Searcher = Callable[[dict[str, np.ndarray], np.random.Generator, dict[str, Any]], np.ndarray]


# Searchers --------------------------------------------------------------------------------------------------------
def _seek(obs: dict[str, np.ndarray], rng: np.random.Generator, episode: dict[str, Any]) -> np.ndarray:
    action = np.zeros((2, 4))
    gap = obs["desired_goal"] - obs["achieved_goal"]
    action[:, :3] = np.clip(SEEKER_GAIN * gap / ACTION_SCALE_M, -1.0, 1.0)
    return action


def _hunt(obs: dict[str, np.ndarray], rng: np.random.Generator, episode: dict[str, Any]) -> np.ndarray:
    partner = obs["observation"][:, -3:]  # the partner's gripper in each arm's frame (the cell shares it)
    toward = partner + episode["offset"] - obs["achieved_goal"]
    action = np.zeros((2, 4))
    action[:, :3] = toward / np.maximum(np.abs(toward).max(axis=1, keepdims=True), 1e-9)
    return action


def _random(obs: dict[str, np.ndarray], rng: np.random.Generator, episode: dict[str, Any]) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=(2, 4))


def _scissor_goals(env: TwoArmCellEnv, rng: np.random.Generator) -> np.ndarray:
    """Both goals past the centre toward the partner, on opposite sides of the arms' line (each in its arm's frame:
    the frames are half turns of each other, so "past the centre, to the left" is the same numbers for both)."""
    centre_x, centre_y = env.scene.centre
    side = rng.choice((-1.0, 1.0))
    goals = np.empty((2, 3))
    for arm, sign in ((0, side), (1, -side)):
        past, off = rng.uniform(*SCISSOR_PAST_M), rng.uniform(*SCISSOR_SIDE_M)
        z = rng.uniform(env.goal_low[2], env.goal_high[2])
        goals[arm] = (centre_x + past, centre_y + sign * off, z)
    return goals


SEARCHERS: dict[str, tuple[Searcher, str]] = {  # name -> (policy, where its goal pairs come from)
    "goal_seeker": (_seek, "drawn"),
    "unfiltered": (_seek, "box"),
    "scissor": (_seek, "scissor"),
    "wrist_hunter": (_hunt, "drawn"),
    "random": (_random, "drawn"),
}


# The link envelope -----------------------------------------------------------------------------------------------
class LinkEnvelope:
    """How far each group of an arm's links reaches from its gripper site, each arm in its own frame (metres): the
    per-axis extremes of the links' bounding boxes, over every step observed."""

    def __init__(self, env: TwoArmCellEnv) -> None:
        self.scene = env.scene
        m = self.scene.model
        self.geoms = {
            (arm, group): [
                g
                for g in range(m.ngeom)
                for body in bodies
                if m.geom_bodyid[g] == mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, f"{arm_prefix(arm)}robot0:{body}")
            ]
            for arm in (0, 1)
            for group, bodies in LINK_GROUPS.items()
        }
        self.low = {group: np.full(3, np.inf) for group in LINK_GROUPS}
        self.high = {group: np.full(3, -np.inf) for group in LINK_GROUPS}

    def observe(self) -> None:
        m, d = self.scene.model, self.scene.data
        for (arm, group), geoms in self.geoms.items():
            grip = self.scene.to_arm(arm, d.site_xpos[self.scene.indices[arm].grip_site])
            for g in geoms:
                centre, half = m.geom_aabb[g, :3], m.geom_aabb[g, 3:]
                corners = d.geom_xpos[g] + (centre + CORNERS * half) @ d.geom_xmat[g].reshape(3, 3).T
                offsets = self.scene.to_arm(arm, corners) - grip
                self.low[group] = np.minimum(self.low[group], offsets.min(axis=0))
                self.high[group] = np.maximum(self.high[group], offsets.max(axis=0))

    def summary(self) -> dict[str, dict[str, list[float]]]:
        return {g: {"low_m": self.low[g].tolist(), "high_m": self.high[g].tolist()} for g in LINK_GROUPS}


# Running ----------------------------------------------------------------------------------------------------------
def search(name: str, index: int, episodes: int, runtimes: bool, seed: int, envelope: bool = False) -> dict[str, Any]:
    """Run one searcher for ``episodes`` episodes, behind both runtimes or bare; what the physics saw."""
    policy, goals_from = SEARCHERS[name]
    env = TwoArmCellEnv(safety_spec=SAFETY_SPEC if runtimes else None, end_on_violation=True)
    links = LinkEnvelope(env) if envelope else None
    rng = np.random.default_rng([seed, index, int(runtimes)])
    contacts: Counter[str] = Counter()
    separation = stops = successes = steps = 0
    closest_at_contact: list[float] = []
    started = time.perf_counter()
    for episode in range(episodes):
        options = {}
        if goals_from == "box":
            options[GOALS_OPTION] = rng.uniform(env.goal_low, env.goal_high, size=(2, 3))
        elif goals_from == "scissor":
            options[GOALS_OPTION] = _scissor_goals(env, rng)
        obs, info = env.reset(seed=seed + SEED_BASE + index * 100_000 + episode, options=options)
        state = {"offset": rng.uniform(HUNT_LOW, HUNT_HIGH, size=(2, 3))}
        for _ in range(env.max_episode_steps):
            obs, _, terminated, truncated, info = env.step(policy(obs, rng, state))
            steps += 1
            if links is not None:
                links.observe()
            if terminated or truncated:
                break
        violation = info.get("violation")
        if violation == "contact":
            contacts[" / ".join(env.scene.last_contact or ("unknown", "unknown"))] += 1
            closest_at_contact.append(float(info["closest_m"]))
        separation += violation == "separation"
        stops += info.get("safe_stop") is not None
        successes += bool(info["is_success"])
    n_contacts = sum(contacts.values())
    return {
        "searcher": name,
        "runtimes": runtimes,
        "episodes": episodes,
        "steps": steps,
        "contact_episodes": n_contacts,
        "contacts_per_1000": 1000.0 * n_contacts / episodes,
        "separation_episodes": separation,
        "safe_stops": stops,
        "team_success": successes / episodes,
        "closest_at_contact_m": min(closest_at_contact) if closest_at_contact else None,
        "contact_links": dict(contacts.most_common()),
        "envelope": None if links is None else links.summary(),
        "wall_s": time.perf_counter() - started,
    }


def write_markdown(results: dict[str, Any], path: Path) -> None:
    lines = [
        "# Two-arm cell: contacts the separation barrier cannot see (benchmarks/cell_contacts.py)",
        "",
        f"Machine: {results['machine']}. Behind the runtimes: each command through both arms' safety filter and "
        f"separation barrier (`TwoArmCellEnv(safety_spec={SAFETY_SPEC})`, the runtime's own code); bare: none. A "
        "contact: a geom of one arm touched one of the other at a 2 ms substep (the episode ends there); a "
        "separation violation: the gripper centres closer than 0.10 m. Links: arm 0's / arm 1's.",
        "",
        "| searcher | runtimes | episodes | contacts (per 1,000) | separation violations | closest centres in a "
        "contact (m) | safe stops | team success | links that met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["runs"]:
        closest = "-" if r["closest_at_contact_m"] is None else f"{r['closest_at_contact_m']:.3f}"
        links = ", ".join(f"{k.replace(FETCH_PREFIX, '')} {v}" for k, v in r["contact_links"].items()) or "-"
        lines.append(
            f"| {r['searcher']} | {'yes' if r['runtimes'] else 'bare'} | {r['episodes']} | {r['contact_episodes']} "
            f"({r['contacts_per_1000']:.0f}) | {r['separation_episodes']} | {closest} | {r['safe_stops']} | "
            f"{r['team_success']:.0%} | {links} |"
        )
    lines += [
        "",
        "How far each arm's links reached from its gripper site over every step searched behind the runtimes (each "
        "arm in its own frame: +x toward the partner, +z up; the links' bounding boxes; metres): what a barrier "
        "that knows only the gripper would have to keep clear of the partner.",
        "",
        "| links | x low | x high | y low | y high | z low | z high |",
        "|---|---|---|---|---|---|---|",
    ]
    for group, box in results["envelope"].items():
        cells = " | ".join(f"{lo:+.3f} | {hi:+.3f}" for lo, hi in zip(box["low_m"], box["high_m"], strict=True))
        lines.append(f"| {group} | {cells} |")
    lines += ["", f"Command: `{results['command']}` ({results['wall_s']:.0f} s)", ""]
    path.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=500, help="episodes of each searcher behind the runtimes")
    parser.add_argument("--bare-episodes", type=int, default=200, help="episodes of each searcher without them")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="cell_contacts", help="results file stem")
    args = parser.parse_args(argv)
    if min(args.episodes, args.bare_episodes) < 1:
        print("error: --episodes and --bare-episodes must be >= 1", file=sys.stderr)
        return 2
    started = time.perf_counter()
    runs, envelope = [], None
    for index, name in enumerate(SEARCHERS):
        for runtimes, episodes in ((True, args.episodes), (False, args.bare_episodes)):
            run = search(name, index, episodes, runtimes, args.seed, envelope=runtimes)
            if run["envelope"] is not None:
                envelope = _merge(envelope, run["envelope"])
            runs.append(run)
            print(
                f"{name} ({'runtimes' if runtimes else 'bare'}): {run['contact_episodes']} contacts in {episodes} "
                f"episodes, {run['separation_episodes']} separation violations, {run['wall_s']:.0f} s",
                flush=True,
            )
    results = {
        "machine": f"{platform.node()} ({platform.machine()})",
        "command": " ".join(["benchmarks/cell_contacts.py", *(sys.argv[1:] if argv is None else argv)]),
        "safety_spec": SAFETY_SPEC,
        "runs": runs,
        "envelope": envelope,
        "wall_s": time.perf_counter() - started,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(results, indent=1))
    write_markdown(results, RESULTS / f"{args.out}.md")
    print(f"wrote {RESULTS / args.out}.json and .md")
    return 0


def _merge(total: dict[str, Any] | None, more: dict[str, Any]) -> dict[str, Any]:
    """The per-axis extremes of two envelopes."""
    if total is None:
        return more
    return {
        g: {
            "low_m": np.minimum(total[g]["low_m"], more[g]["low_m"]).tolist(),
            "high_m": np.maximum(total[g]["high_m"], more[g]["high_m"]).tolist(),
        }
        for g in more
    }


if __name__ == "__main__":
    sys.exit(main())
