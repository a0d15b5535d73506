"""The study pages' figures and run tables, made from the stored results (no training; seconds of CPU).

The push study (``docs/benchmarks/push-study.md``) and the continual fine-tuning study
(``docs/benchmarks/continual-study.md``) keep their runs in one JSON each under ``docs/benchmarks/data/`` (per source
name: the markdown table the benchmark wrote, with its command, and its JSON result). This script draws the pages'
figures into ``docs/benchmarks/img/`` and writes each page's run table between its ``<!-- table:NAME -->`` and
``<!-- /table:NAME -->`` markers; ``--print SOURCE`` prints one source's original table instead.

    .venv/bin/python benchmarks/study_figures.py
    .venv/bin/python benchmarks/study_figures.py --print push_probe_restart_1m
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "benchmarks" / "data"
IMG = ROOT / "docs" / "benchmarks" / "img"
RESULTS = ROOT / "benchmarks" / "results"
PUSH_PAGE = ROOT / "docs" / "benchmarks" / "push-study.md"
CONTINUAL_PAGE = ROOT / "docs" / "benchmarks" / "continual-study.md"
ZERO_ACTIONS_SUCCESS = 0.06  # what zero actions score on learning.py's 50 fixed push episodes (the block on its goal)
PUSH_TARGET = 0.90  # the push target: deterministic success over 50 fixed episodes
PUSH_ZOOM = 0.35  # the probe overview's success axis ends here (no run comes near the target)
CONTINUAL_TARGET = 0.90  # the continual target on the new condition
DPI = 110
# The 1M env-step runs of the decay figure: (label, source, variant or None for any); learning.py's launch-file runs
# come from benchmarks/results/learning_push_approach.json (the push benchmark's current table).
DECAY_RUNS = (
    ("launch file (reaching bonus)", "learning_push_approach", "grpo"),
    ("+ 16 future goals", "push_probe_future_16_1m", None),
    ("+ 16 future goals, std floor 0.37", "push_probe_std_floor_1m", None),
    ("restart_fraction 0.5", "push_probe_restart_1m", None),
    ("pushing-pose potential", "push_probe_over_block_1m", None),
)
SECTORS = ("straight on", "sideways +", "sideways -", "back")
CURRENT_CONTINUAL = "continual_penalty_0p25_unseen101112"  # the continual benchmark's current table (results/)


def load(name: str) -> dict[str, Any]:
    """One study's stored sources: ``{source: {"table_md": str, "result": dict}}``."""
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))["sources"]


def second_half_mean(curve: list[dict[str, float]]) -> float:
    """Mean success over the evaluations in the second half of a run's env steps (as push_probe.py reports it)."""
    half = curve[-1]["steps"] / 2
    return float(np.mean([p["success"] for p in curve if p["steps"] >= half]))


def _at(curve: list[dict[str, float]], key: str, index: int) -> str:
    points = [p for p in curve if key in p]
    return f"{points[index][key]:.2f}" if points else "-"


def push_rows(sources: dict[str, Any]) -> list[dict[str, Any]]:
    """One summary row per (source, variant, seed) of the push probes, the fixed-goal runs and learning.py's runs."""
    rows = []
    for source, entry in sources.items():
        for run in entry["result"].get("runs", []):
            curve = run.get("curve") or []
            if not curve or run.get("seed") is None:
                continue
            rows.append(
                {
                    "source": source,
                    "variant": run["variant"],
                    "seed": run["seed"],
                    "steps": curve[-1]["steps"],
                    "best": max(p["success"] for p in curve),
                    "last": curve[-1]["success"],
                    "second_half": second_half_mean(curve),
                    "moved": f"{_at(curve, 'block_moved', 0)} / {_at(curve, 'block_moved', -1)}",
                    "std": f"{_at(curve, 'std', 0)} / {_at(curve, 'std', -1)}",
                }
            )
    return rows


def push_table(rows: list[dict[str, Any]]) -> str:
    """The push study's run table (markdown), longest runs first."""
    lines = [
        "| source (table in the data file) | variant | seed | env steps | success best / last | 2nd-half mean | "
        "block moved: first / last | std: first / last |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (-r["steps"], r["source"], r["variant"], r["seed"])):
        lines.append(
            f"| {r['source']} | {r['variant']} | {r['seed']} | {r['steps']:,} | {r['best']:.2f} / {r['last']:.2f} | "
            f"{r['second_half']:.2f} | {r['moved']} | {r['std']} |"
        )
    return "\n".join(lines)


def continual_rows(sources: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (source, seed or variant): the new condition and the original task before and after each round."""
    rows = []
    for source, entry in sources.items():
        result = entry["result"]
        config = result["config"]
        drift = f"delay {config['delay']}, gain {config['gain']}"
        if "seeds" in result:  # per-seed runs (one EWC variant each)
            tuned = set(config.get("tuned_seeds") or [])
            for seed, run in result["seeds"].items():
                for variant, v in run["variants"].items():
                    rows.append(_continual_row(source, config, drift, f"{seed}", int(seed) in tuned, variant, run, v))
        else:  # one seed, several variants side by side
            for variant, v in result["variants"].items():
                rows.append(_continual_row(source, config, drift, "-", True, variant, result, v))
    return rows


def _continual_row(
    source: str,
    config: dict[str, Any],
    drift: str,
    seed: str,
    tuned: bool,
    variant: str,
    run: dict[str, Any],
    v: dict[str, Any],
) -> dict[str, Any]:
    rounds = v["rounds"]
    return {
        "source": source,
        "drift": drift,
        "seed": seed,
        "tuned": tuned,
        "variant": variant,
        "explore": config.get("explore_scale"),
        "penalty": config.get("intervention_penalty"),
        "gate": bool(config.get("gate")),
        "new": [run["before"]["new"]["success"]] + [r["new"]["success"] for r in rounds],
        "original": [run["before"]["original"]["success"]] + [r["original"]["success"] for r in rounds],
        "interventions": rounds[-1]["new"]["interventions_per_episode"],
        "promoted": sum(bool(r.get("promoted")) for r in rounds) if "promoted" in rounds[0] else None,
    }


def continual_table(rows: list[dict[str, Any]]) -> str:
    """The continual study's run table (markdown)."""
    lines = [
        "| source (table in the data file) | drift | seed | variant | explore std x | penalty | gate | "
        "new condition: before -> each round | original: before -> last | interventions / episode, last |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        seed = r["seed"] if r["seed"] == "-" else f"{r['seed']} ({'tuned' if r['tuned'] else 'unseen'})"
        gate = f"yes ({r['promoted']} of {len(r['new']) - 1} promoted)" if r["gate"] else "no"
        lines.append(
            f"| {r['source']} | {r['drift']} | {seed} | {r['variant']} | {r['explore'] or 1.0:g} | "
            f"{r['penalty'] or 0:g} | {gate} | {' -> '.join(f'{x:.2f}' for x in r['new'])} | "
            f"{r['original'][0]:.2f} -> {r['original'][-1]:.2f} | {r['interventions']:.2f} |"
        )
    return "\n".join(lines)


def replace_block(page: Path, name: str, body: str) -> None:
    """Write ``body`` between the page's ``<!-- table:name -->`` and ``<!-- /table:name -->`` markers."""
    text = page.read_text(encoding="utf-8")
    pattern = re.compile(rf"(<!-- table:{re.escape(name)} -->\n)(?:.*?\n)?(<!-- /table:{re.escape(name)} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"{page}: no <!-- table:{name} --> ... <!-- /table:{name} --> markers")
    page.write_text(pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text), encoding="utf-8")


def _runs(sources: dict[str, Any], source: str, variant: str | None) -> list[dict[str, Any]]:
    if source in sources:
        result = sources[source]["result"]
    else:
        result = json.loads((RESULTS / f"{source}.json").read_text(encoding="utf-8"))
    return [r for r in result["runs"] if variant is None or r["variant"] == variant]


def plot_push(sources: dict[str, Any], plt: Any) -> None:
    """The push study's four figures."""
    # 1. The decay: every 1M run peaks early and falls back while the std and the pushes fall.
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for i, (label, source, variant) in enumerate(DECAY_RUNS):
        color = f"C{i}"
        for j, run in enumerate(_runs(sources, source, variant)):
            curve = run["curve"]
            steps = [p["steps"] / 1e3 for p in curve]
            name = label if j == 0 else None
            axes[0].plot(steps, [p["success"] for p in curve], color=color, alpha=0.8, label=name)
            for ax, key in ((axes[1], "std"), (axes[2], "block_moved")):
                pts = [(p["steps"] / 1e3, p[key]) for p in curve if key in p]
                if pts:
                    ax.plot(*zip(*pts, strict=True), color=color, alpha=0.8)
    axes[0].axhline(ZERO_ACTIONS_SUCCESS, color="k", ls=":", label="zero actions")
    axes[0].set_ylabel("deterministic success (50 fixed episodes)")
    axes[1].set_ylabel("policy std (mean over action components)")
    axes[2].set_ylabel("share of training episodes that move the block > 5 cm")
    for ax in axes:
        ax.set_xlabel("env steps (thousands)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Delayed FetchPush, 1M env steps: every setting peaks early and falls back (one line per seed)")
    fig.tight_layout()
    fig.savefig(IMG / "push_decay.png", dpi=DPI)
    plt.close(fig)

    # 2. Every probe run at a glance: best and second-half mean success.
    rows = [r for r in push_rows(sources) if r["source"].startswith("push_probe")]
    rows.sort(key=lambda r: (r["steps"], r["second_half"]))
    fig, ax = plt.subplots(figsize=(10, 0.2 * len(rows) + 1.2))
    y = np.arange(len(rows))
    ax.barh(y, [r["best"] for r in rows], color="C0", alpha=0.35, label="best evaluation")
    ax.barh(y, [r["second_half"] for r in rows], color="C0", label="mean over the second half")
    ax.axvline(ZERO_ACTIONS_SUCCESS, color="k", ls=":", label="zero actions")
    ax.set_yticks(y, [f"{r['variant']} s{r['seed']} ({r['steps'] // 1000}k)" for r in rows], fontsize=7)
    ax.set_xlabel("deterministic success")
    ax.set_xlim(0, PUSH_ZOOM)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"Every push probe run (variant, seed, env steps); the target, {PUSH_TARGET:.0%}, is off the scale")
    fig.tight_layout()
    fig.savefig(IMG / "push_probes.png", dpi=DPI)
    plt.close(fig)

    # 3. Where the goals lie and where the pushes go.
    runs = sources["push_directions"]["result"]["runs"]
    bars = [("goals", np.mean([[r["before"]["goal_sectors"][s] for s in SECTORS] for r in runs], axis=0))]
    bars.append(("pushes, untrained", np.mean([[r["before"]["push_sectors"][s] for s in SECTORS] for r in runs], 0)))
    for r in runs:
        after = [r["after"]["push_sectors"][s] for s in SECTORS]
        bars.append((f"pushes, seed {r['seed']} after {r['budget'] // 1000}k", after))
    fig, ax = plt.subplots(figsize=(8, 3.8))
    x = np.arange(len(SECTORS))
    width = 0.8 / len(bars)
    for i, (label, shares) in enumerate(bars):
        ax.bar(x + (i - (len(bars) - 1) / 2) * width, shares, width, label=label)
    ax.set_xticks(x, [f"{s}" for s in SECTORS])
    ax.set_ylabel("share")
    ax.set_xlabel("direction from the block's start, against gripper start -> block start")
    ax.legend(fontsize=8)
    ax.set_title("Most goals lie behind the block; the pushes go straight on")
    fig.tight_layout()
    fig.savefig(IMG / "push_directions.png", dpi=DPI)
    plt.close(fig)

    # 4. One fixed goal rule: the scripted controller against GRPO and PPO.
    fig, ax = plt.subplots(figsize=(7, 3.8))
    controllers = {}
    for source in ("push_fixed_goal", "push_fixed_goal_unseen"):
        for run in sources[source]["result"]["runs"]:
            curve = run["curve"]
            if run["seed"] is None:
                controllers[run["variant"]] = curve[0]["success"]
                continue
            color = "C0" if run["variant"] == "grpo" else "C1"
            ls = "-" if run["seed"] == 0 else "--"
            ax.plot(
                [p["steps"] / 1e3 for p in curve],
                [p["success"] for p in curve],
                color=color,
                ls=ls,
                label=f"{run['variant'].upper()} seed {run['seed']}",
            )
    for name, success in sorted(controllers.items()):
        ax.axhline(success, color="k", ls=":" if name == "zero" else "-.", alpha=0.7, label=f"{name}: {success:.2f}")
    ax.set_xlabel("env steps (thousands)")
    ax.set_ylabel("deterministic success (50 fixed episodes)")
    ax.set_ylim(-0.02, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Every goal 12 cm in +y of the block: a scripted push scores 84%")
    fig.tight_layout()
    fig.savefig(IMG / "push_fixed_goal.png", dpi=DPI)
    plt.close(fig)


def plot_continual(rows: list[dict[str, Any]], plt: Any) -> None:
    """The continual study's figure: the new condition and the original task, round by round, per line setting."""
    settings = (
        ("full std, no gate (continual_sent)", "continual_sent"),
        ("full std, gate (continual_gated)", "continual_gated"),
        ("std x0.5, gate (continual_explore_0p5)", "continual_explore_0p5"),
        ("std x0.5, gate, penalty 1.0 (continual_penalty_1)", "continual_penalty_1"),
        ("std x0.5, gate, penalty 0.25: the defaults (continual_penalty_0p25)", "continual_penalty_0p25"),
    )
    unseen = (
        ("full std (continual_explore_1p0_unseen), seeds 4-6", "continual_explore_1p0_unseen"),
        ("std x0.5 (continual_explore_0p5_unseen), seeds 4-6", "continual_explore_0p5_unseen"),
        ("std x0.5, penalty 1.0 (continual_penalty_1_unseen), seeds 4-6", "continual_penalty_1_unseen"),
        ("std x0.5, penalty 1.0 (continual_penalty_1_unseen789), seeds 7-9", "continual_penalty_1_unseen789"),
        (f"the defaults ({CURRENT_CONTINUAL}), seeds 10-12", CURRENT_CONTINUAL),
    )
    fig, axes = plt.subplots(1, 3, figsize=(18, 4.4))
    panels = (
        (axes[0], settings, "new", "new condition (delay 6, gain 1.5), seeds 1-3"),
        (axes[1], settings, "original", "original task (delay 2), seeds 1-3"),
        (axes[2], unseen, "new", "new condition, seeds never tuned on (all gated)"),
    )
    for ax, lines, key, title in panels:
        for i, (label, source) in enumerate(lines):
            median = np.median([r[key] for r in rows if r["source"] == source], axis=0)
            ax.plot(range(len(median)), median, marker="o", color=f"C{i + (5 if lines is unseen else 0)}", label=label)
        ax.axhline(CONTINUAL_TARGET, color="C3", ls="--", alpha=0.6)
        ax.set_xticks(range(len(median)))
        ax.set_xlabel("round (0: the deployed policy)")
        ax.set_ylabel("deterministic success, median of 3 seeds")
        ax.set_title(title)
        ax.set_ylim(0.5, 1.02)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    axes[2].legend(fontsize=7)
    fig.suptitle("Continual fine-tuning with EWC (lambda 30, gamma 0.9): what each line setting adds")
    fig.tight_layout()
    fig.savefig(IMG / "continual_rounds.png", dpi=DPI)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print", dest="source", help="print one stored source's original table and exit")
    args = parser.parse_args(argv)
    push, continual = load("push_study"), load("continual_study")
    if args.source:
        everything = {**push, **continual, **load("scale_out_sweeps")}
        if args.source not in everything:
            print(f"no stored source {args.source!r}; one of: {', '.join(sorted(everything))}", file=sys.stderr)
            raise SystemExit(2)
        print(everything[args.source]["table_md"])
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    IMG.mkdir(parents=True, exist_ok=True)
    plot_push(push, plt)
    current = json.loads((RESULTS / f"{CURRENT_CONTINUAL}.json").read_text(encoding="utf-8"))
    rows = continual_rows({**continual, CURRENT_CONTINUAL: {"result": current}})
    plot_continual(rows, plt)
    replace_block(PUSH_PAGE, "push-runs", push_table(push_rows(push)))
    replace_block(CONTINUAL_PAGE, "continual-runs", continual_table(rows))
    print(f"wrote {IMG.relative_to(ROOT)}/*.png and the run tables of {PUSH_PAGE.name}, {CONTINUAL_PAGE.name}")


if __name__ == "__main__":
    main()
