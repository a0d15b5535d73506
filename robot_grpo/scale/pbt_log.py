"""The driver-side log of a PBT run: exploit events and, per interval, success, hyperparameters and diversity."""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from ray import tune

from robot_grpo.scale.diversity import pairwise_js
from robot_grpo.scale.pbt_member import METRIC

logger = logging.getLogger(__name__)


class PopulationLog(tune.Callback):
    """Driver-side log of a population run: exploit events and, per interval, success and diversity.

    Writes JSON lines to ``path`` ({"event": "exploit" | "collapse" | "interval", ...}) and logs them. An interval
    record carries the mean pairwise JS (the diversity figure), the closest pair's JS and how many pairs sat below
    ``min_pair_js`` when the interval ended (before that round's replacements).
    """

    def __init__(self, path: Path, members: int, min_pair_js: float) -> None:
        self.path, self.members, self.min_pair_js = Path(path), members, min_pair_js
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")
        self._results: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
        self._env_steps = 0  # env steps the population has run so far (all members, all intervals)
        self.exploits: list[dict[str, Any]] = []
        self.collapses: list[dict[str, Any]] = []
        self.intervals: list[dict[str, Any]] = []
        self._start = time.monotonic()

    @property
    def env_steps(self) -> int:
        return self._env_steps

    def _write(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as out:
            out.write(json.dumps(record) + "\n")

    def collapse(self, record: dict[str, Any]) -> None:
        """A member replaced for sitting closer than ``min_pair_js`` to another (called by the scheduler)."""
        self.collapses.append(record)
        self._write(record)
        logger.info(
            "PBT: %s is %.5f nats from %s (< %.5f): replaced and perturbed",
            record["member"],
            record["js"],
            record["close_to"],
            record["min_pair_js"],
        )

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        interval = int(result["training_iteration"])
        self._env_steps += int(result["timesteps_this_iter"])
        exploited = result.get("exploited") or {}
        if exploited:
            record = {"event": "exploit", "interval": interval - 1, "member": trial.trial_id, **exploited}
            self.exploits.append(record)
            self._write(record)
            logger.info(
                "PBT exploit after interval %d: %s copied %s and explored %s",
                interval - 1,
                trial.trial_id,
                exploited["from"],
                exploited["hyperparameters"],
            )
        self._results[interval][trial.trial_id] = result
        if len(self._results[interval]) == self.members:
            self._close_interval(interval)

    def _close_interval(self, interval: int) -> None:
        results = self._results.pop(interval)
        ids = sorted(results)
        js = pairwise_js(
            [np.asarray(results[i]["probe_mean"]) for i in ids], [np.asarray(results[i]["probe_log_std"]) for i in ids]
        )
        pairs = js[np.triu_indices(len(ids), k=1)]
        diversity = float(pairs.mean())
        record = {
            "event": "interval",
            "interval": interval,
            "env_steps_total": self._env_steps,  # synchronous PBT: no member is past this interval yet
            "diversity_js": diversity,
            "min_pair_js": float(pairs.min()),
            "pairs_below_threshold": int((pairs < self.min_pair_js).sum()),
            "threshold_js": self.min_pair_js,
            "elapsed_s": time.monotonic() - self._start,  # since the population started
            "success": {i: results[i][METRIC] for i in ids},
            "hyperparameters": {i: results[i]["hyperparameters"] for i in ids},
        }
        self.intervals.append(record)
        self._write(record)
        logger.info(
            "PBT interval %d: success %s, diversity (mean pairwise JS) %.4f nats, closest pair %.5f",
            interval,
            " ".join(f"{s:.2f}" for s in record["success"].values()),
            diversity,
            record["min_pair_js"],
        )
