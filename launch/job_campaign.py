"""``robot-grpo campaign``: the fault campaign (``launch.campaign``). Runs samples ``seed .. seed + runs - 1`` on
worker processes, prints each failing sample with the line that replays it, and writes ``campaign.json`` (every
outcome) and ``campaign.md`` (faults x outcomes, the distinct failures) under ``runs/<name>/``. Exit status 1 when
any run broke an invariant.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from deploy.runtime.package import load_package
from launch.campaign.pool import run_campaign
from launch.campaign.settings import CampaignSettings
from launch.campaign.summary import replay_command, summarize, write_summary
from launch.jobs import write_resolved

logger = logging.getLogger(__name__)

PROGRESS_EVERY_S = 30.0


def settings_from_config(config: dict[str, Any]) -> tuple[CampaignSettings, list[str]]:
    """The campaign settings of a launch config, and the ``key=value`` overrides that differ from the defaults (a
    replay line carries them)."""
    settings = CampaignSettings.from_mapping(dict(config))
    defaults = CampaignSettings()
    overrides = [f"{k}={config[k]}" for k, v in defaults.as_dict().items() if config.get(k, v) != v]
    return settings, overrides


def main(config: dict[str, Any]) -> int:
    settings, overrides = settings_from_config(config)
    load_package(settings.package_path)  # a missing or tampered package: one line here, not a worker failing to start
    run_dir = Path(config["output"]) / config["name"]
    write_resolved(config, run_dir)
    seeds = list(range(config["seed"], config["seed"] + config["runs"]))
    logger.info("campaign: %d runs (seeds %d..%d) on %d workers", len(seeds), seeds[0], seeds[-1], config["workers"])
    outcomes = []
    t0 = last = time.perf_counter()
    for result in run_campaign(settings, seeds, config["workers"]):
        outcomes.append(result)
        for v in result["violations"]:
            logger.warning(
                "FAIL seed %d %s: %s [%s; %s]  replay: %s",
                result["seed"],
                v["invariant"],
                v["detail"],
                result["policy"],
                ", ".join(result["faults"]) or "no faults",
                replay_command(result["seed"], overrides),
            )
        if time.perf_counter() - last > PROGRESS_EVERY_S:
            last = time.perf_counter()
            logger.info("campaign: %d/%d runs, %.2f runs/s", len(outcomes), len(seeds), len(outcomes) / (last - t0))
    summary = summarize(outcomes, settings.as_dict(), overrides, time.perf_counter() - t0)
    write_summary(summary, outcomes, run_dir / "campaign.json", run_dir / "campaign.md")
    logger.info(
        "campaign: %d runs, %.2f runs/s, %d steps outside the box, %d hangs, %d failed runs, %d distinct failures; "
        "table in %s",
        summary["runs"],
        summary["runs_per_s"],
        summary["steps_outside"],
        summary["hangs"],
        summary["failed_runs"],
        len(summary["distinct_failures"]),
        run_dir / "campaign.md",
    )
    return 1 if summary["failed_runs"] else 0
