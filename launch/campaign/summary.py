"""The campaign's figures: faults x outcomes, the distinct failures with the seeds that replay them; JSON + markdown.

A failure is distinct by (invariant, the sample's fault kinds, policy family): the first seed of each is its
replay. ``replay_command`` gives the one line that reruns a seed.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from launch.campaign.invariants import INVARIANTS

REASON_CHARS = 100  # a named reason is shortened to this many characters in the table, numbers replaced by '#'
TOP_REASONS = 3


def short_reason(reason: str) -> str:
    """A reason with its numbers replaced by '#', cut to ``REASON_CHARS``: runs that stopped alike group together."""
    text = re.sub(r"\d+(\.\d+)?", "#", reason.split(";")[0]).replace(", no valid state for # s", "")
    return text[:REASON_CHARS].strip()


def replay_command(seed: int, overrides: list[str]) -> str:
    """The one line that replays sample ``seed`` with the campaign's settings."""
    sets = "".join(f" --set {o}" for o in overrides)
    return f"robot-grpo campaign --runs 1 --seed {seed}{sets}"


def fault_table(outcomes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per fault kind (a run counts under each kind it has): runs, physics steps outside, runs outside, safe stops,
    aborted episodes, hangs, runs that broke an invariant, and the commonest stop and end reasons."""
    rows: dict[str, dict[str, Any]] = defaultdict(
        lambda: {
            "runs": 0,
            "steps_outside": 0,
            "runs_outside": 0,
            "safe_stops": 0,
            "aborted_episodes": 0,
            "hangs": 0,
            "failed_runs": 0,
            "unconfirmed_runs": 0,
            "reasons": Counter(),
        }
    )
    for o in outcomes:
        for kind in sorted(set(o["fault_kinds"])):
            row = rows[kind]
            row["runs"] += 1
            row["steps_outside"] += o["steps_outside"]
            row["runs_outside"] += bool(o["steps_outside"])
            row["safe_stops"] += o["safe_stops"]
            row["aborted_episodes"] += o["aborted_episodes"]
            row["hangs"] += bool(o["hang"])
            row["failed_runs"] += bool(o["violations"])
            row["unconfirmed_runs"] += bool(o.get("unconfirmed"))
            row["reasons"].update(short_reason(r) for r in o["stop_reasons"])
    return {k: {**v, "reasons": dict(v["reasons"].most_common(TOP_REASONS))} for k, v in sorted(rows.items())}


def distinct_failures(outcomes: list[dict[str, Any]], overrides: list[str]) -> list[dict[str, Any]]:
    """One entry per (invariant, fault kinds, policy family): how many runs, the first seed, its replay line."""
    found: dict[tuple[str, tuple[str, ...], str], dict[str, Any]] = {}
    for o in sorted(outcomes, key=lambda o: o["seed"]):
        for v in o["violations"]:
            key = (v["invariant"], tuple(sorted(set(o["fault_kinds"]))), o["policy_family"])
            if key not in found:
                found[key] = {
                    "invariant": v["invariant"],
                    "fault_kinds": list(key[1]),
                    "policy": o["policy"],
                    "seed": o["seed"],
                    "faults": o["faults"],
                    "detail": v["detail"],
                    "runs": 0,
                    "replay": replay_command(o["seed"], overrides),
                }
            found[key]["runs"] += 1
    return sorted(found.values(), key=lambda f: (INVARIANTS.index(f["invariant"]), f["seed"]))


def summarize(
    outcomes: list[dict[str, Any]], settings: dict[str, Any], overrides: list[str], wall_s: float
) -> dict[str, Any]:
    invariant_runs = Counter(
        v["invariant"] for o in outcomes for v in {x["invariant"]: x for x in o["violations"]}.values()
    )
    return {
        "settings": settings,
        "runs": len(outcomes),
        "wall_s": wall_s,
        "runs_per_s": len(outcomes) / wall_s if wall_s > 0 else float("nan"),
        "physics_steps": sum(o["physics_steps"] for o in outcomes),
        "steps_outside": sum(o["steps_outside"] for o in outcomes),
        "hangs": sum(bool(o["hang"]) for o in outcomes),
        "failed_runs": sum(bool(o["violations"]) for o in outcomes),
        "unconfirmed_runs": sum(bool(o.get("unconfirmed")) for o in outcomes),
        "within_spec_runs": sum(bool(o["within_spec"]) for o in outcomes),
        "within_spec_judged": sum(bool(o["within_spec"]) and not o["overruns"] for o in outcomes),
        "runs_by_invariant": {k: invariant_runs.get(k, 0) for k in INVARIANTS},
        "faults": fault_table(outcomes),
        "distinct_failures": distinct_failures(outcomes, overrides),
    }


def markdown(summary: dict[str, Any]) -> str:
    """The summary as a markdown page: headline figures, faults x outcomes, distinct failures."""
    lines = [
        "# Fault campaign",
        "",
        f"{summary['runs']} runs in {summary['wall_s']:.0f} s ({summary['runs_per_s']:.2f} runs/s), "
        f"{summary['physics_steps']} physics steps; {summary['steps_outside']} steps outside the box; "
        f"{summary['hangs']} hangs; {summary['failed_runs']} runs broke an invariant; "
        f"{summary['unconfirmed_runs']} more broke a timing-sensitive one once but not on 2 replays "
        "(unconfirmed: a loaded machine starving the loop). "
        f"{summary['within_spec_runs']} runs had only faults the spec allows; "
        f"{summary['within_spec_judged']} of them kept the loop's period and were judged for stop_within_spec.",
        "",
        "Settings: " + ", ".join(f"{k}={v}" for k, v in summary["settings"].items()),
        "",
        "## Runs per invariant broken",
        "",
        "| invariant | runs |",
        "|---|---:|",
        *[f"| {k} | {v} |" for k, v in summary["runs_by_invariant"].items()],
        "",
        "## Faults x outcomes",
        "",
        "A run counts under every fault kind it has. Steps outside: physics steps with the true gripper more than the "
        "tolerance outside the box.",
        "",
        "| fault | runs | steps outside | runs outside | safe stops | aborted episodes | hangs | failed runs "
        "| unconfirmed | commonest stop reasons |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for kind, row in summary["faults"].items():
        reasons = "; ".join(f"{r} ({n})" for r, n in row["reasons"].items()) or "-"
        lines.append(
            f"| {kind} | {row['runs']} | {row['steps_outside']} | {row['runs_outside']} | {row['safe_stops']} | "
            f"{row['aborted_episodes']} | {row['hangs']} | {row['failed_runs']} | {row['unconfirmed_runs']} | "
            f"{reasons} |"
        )
    lines += ["", f"## Distinct failures ({len(summary['distinct_failures'])})", ""]
    if summary["distinct_failures"]:
        lines += ["| invariant | faults | policy | runs | seed | replay | detail |", "|---|---|---|---:|---:|---|---|"]
        for f in summary["distinct_failures"]:
            lines.append(
                f"| {f['invariant']} | {', '.join(f['fault_kinds'])} | {f['policy']} | {f['runs']} | {f['seed']} | "
                f"`{f['replay']}` | {f['detail']} |"
            )
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"


def write_summary(
    summary: dict[str, Any], outcomes: list[dict[str, Any]], json_path: Path, md_path: Path, failed_only: bool = False
) -> None:
    """JSON (the summary and the outcomes: all, or only the failed ones) and the markdown page."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    kept = [o for o in outcomes if o["violations"]] if failed_only else outcomes
    json_path.write_text(json.dumps({**summary, "outcomes": kept}, indent=1, default=str))
    md_path.write_text(markdown(summary))
