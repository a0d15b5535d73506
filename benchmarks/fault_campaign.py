"""The fault campaign at scale: N seeded samples (default 10,000) of robot faults x policies x goals, each run in
lock-step over the real wire code against the simulated robot and checked against the invariants
(docs/guides/fault-campaign.md). Writes benchmarks/results/fault_campaign.json (the table, the distinct failures with
their replay lines, the failed runs' outcomes) and .md (faults x outcomes: runs, physics steps outside the box, safe
stops, aborted episodes, hangs, the commonest named stop reasons), and the campaign's runs/s.

    .venv/bin/python benchmarks/fault_campaign.py [--runs 10000] [--seed 0] [--workers 2] [--period-s 0.01]

The figure that matters: 0 physics steps outside the box, 0 hangs, 0 failed runs. Runs/s depends on the machine's
idle cores (one robot + one controller per worker process).
"""

from __future__ import annotations

import argparse
import logging
import platform
import time
from pathlib import Path

from launch.campaign.pool import run_campaign
from launch.campaign.settings import CampaignSettings
from launch.campaign.summary import summarize, write_summary

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent
PROGRESS_EVERY_S = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0, help="first sample's seed")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (one per idle core)")
    parser.add_argument("--period-s", type=float, default=CampaignSettings.period_s, help="loop period, seconds")
    parser.add_argument("--name", default="fault_campaign", help="results/<name>.json and .md")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    settings = CampaignSettings(period_s=args.period_s, package=str(ROOT / "models" / "default"))
    overrides = [] if args.period_s == CampaignSettings.period_s else [f"period_s={args.period_s}"]
    seeds = list(range(args.seed, args.seed + args.runs))
    outcomes = []
    t0 = last = time.perf_counter()
    for outcome in run_campaign(settings, seeds, args.workers):
        outcomes.append(outcome)
        if time.perf_counter() - last > PROGRESS_EVERY_S:
            last = time.perf_counter()
            logging.info("%d/%d runs, %.2f runs/s", len(outcomes), len(seeds), len(outcomes) / (last - t0))
    shown = {**settings.as_dict(), "package": "models/default"}  # not this machine's path
    summary = summarize(outcomes, shown, overrides, time.perf_counter() - t0)
    summary["machine"] = {"python": platform.python_version(), "cpu": platform.processor(), "workers": args.workers}
    write_summary(summary, outcomes, RESULTS / f"{args.name}.json", RESULTS / f"{args.name}.md", failed_only=True)
    print(
        f"{summary['runs']} runs, {summary['runs_per_s']:.2f} runs/s, {summary['steps_outside']} steps outside, "
        f"{summary['hangs']} hangs, {summary['failed_runs']} failed runs, "
        f"{len(summary['distinct_failures'])} distinct failures -> {RESULTS / args.name}.md"
    )


if __name__ == "__main__":
    main()
