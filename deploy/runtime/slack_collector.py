"""Python's garbage collector moved off the tick's latency path: it runs in the slack after each command.

stdlib only, robot side. CPython collects whenever allocations cross a threshold, which can be in the middle of a
tick, between a state coming in and its command going out: on the two-arm cell that was a third of the tick's p99
(SCHED_FIFO, 30 episode pairs: 1.09-1.20 ms with the collector automatic, 0.93-0.95 ms without it). During a run
the automatic collector is off; the loop calls :meth:`SlackCollector.after_command` once its tick's command is out,
and the collection CPython would have run by now runs there: the oldest generation whose count is past its threshold
(``gc.get_count`` against ``gc.get_threshold``: the young one after 700 net allocations, the middle one every 10
young collections, the oldest every 10 middle ones), so cycles are collected as often as without the loop, only
never inside a tick. Everything allocated before the run is frozen first (``gc.freeze``): a collection only scans the
run's own objects.
"""

from __future__ import annotations

import gc

GENERATIONS = (2, 1, 0)  # oldest first: CPython collects the oldest generation past its threshold


class SlackCollector:
    """Owns the collector's state for one run: ``start()`` before the first message, ``after_command()`` after each
    tick's answer went out, ``stop()`` at the end (restores what it found: automatic or not)."""

    def __init__(self) -> None:
        self.collections = [0, 0, 0]  # per generation, this run
        self._was_enabled = False
        self._running = False

    def start(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.collect()
        gc.freeze()
        gc.disable()
        self._running = True

    def after_command(self) -> None:
        """One tick's slack: the collection CPython's thresholds call for by now (usually none)."""
        if not self._running:
            return
        counts, thresholds = gc.get_count(), gc.get_threshold()
        for generation in GENERATIONS:
            if counts[generation] > thresholds[generation]:
                gc.collect(generation)
                self.collections[generation] += 1
                return

    def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        gc.unfreeze()
        if self._was_enabled:
            gc.enable()
