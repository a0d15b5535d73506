"""Python's garbage collector moved off the tick's latency path: it runs in the slack after each command.

stdlib only, robot side. CPython collects whenever allocations cross a threshold, which can be in the middle of a
tick, between a state coming in and its command going out: on the two-arm cell that was a third of the tick's p99
(SCHED_FIFO, 30 episode pairs: 1.09-1.20 ms with the collector automatic, 0.93-0.95 ms without it). During a run
the automatic collector is off; the loop calls :meth:`SlackCollector.after_command` once its tick's command is out,
and the collector runs there on CPython's own schedule counted in ticks (the youngest generation every tick, the
middle one every ``MIDDLE_EVERY_TICKS``, the oldest every ``OLDEST_EVERY_TICKS``), so cycles are still collected.
Everything allocated before the run is frozen first (``gc.freeze``): a collection only scans the run's own objects.
"""

from __future__ import annotations

import gc

MIDDLE_EVERY_TICKS = 10  # CPython's default threshold1: a middle collection per 10 young ones
OLDEST_EVERY_TICKS = 100  # and an oldest one per 10 middle ones (threshold2)


class SlackCollector:
    """Owns the collector's state for one run: ``start()`` before the first message, ``after_command()`` after each
    tick's answer went out, ``stop()`` at the end (restores what it found: automatic or not)."""

    def __init__(self) -> None:
        self.ticks = 0
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
        """One tick's slack: collect the generation that CPython's thresholds would have reached by now."""
        if not self._running:
            return
        self.ticks += 1
        generation = 2 if self.ticks % OLDEST_EVERY_TICKS == 0 else 1 if self.ticks % MIDDLE_EVERY_TICKS == 0 else 0
        gc.collect(generation)
        self.collections[generation] += 1

    def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        gc.unfreeze()
        if self._was_enabled:
            gc.enable()
