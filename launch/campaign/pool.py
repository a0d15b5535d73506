"""Campaign workers: processes that each hold a ``CampaignRig`` (robot + policy made once) and run samples, with a
wall-clock timeout per run. A run past its timeout is a hang: its worker is killed and replaced, and the hang is
that sample's outcome, so one stuck run never stalls the campaign.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection, wait
from typing import Any

from launch.campaign.settings import CampaignSettings

WORKER_START_TIMEOUT_S = 180.0  # spawn + importing MuJoCo and onnxruntime on a loaded 2-core machine
POLL_S = 0.5


def _worker(conn: Connection, settings: dict[str, Any]) -> None:
    from launch.campaign.rig import CampaignRig

    rig = CampaignRig(CampaignSettings(**settings))
    conn.send(("ready", None))
    try:
        while (seed := conn.recv()) is not None:
            conn.send(("done", rig.run_confirmed(seed)))
    finally:
        rig.close()


class _Worker:
    def __init__(self, settings: CampaignSettings) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker, args=(child, settings.as_dict()), daemon=True)
        self.process.start()
        child.close()
        self.seed: int | None = None
        self.started = 0.0
        try:
            if not self.conn.poll(WORKER_START_TIMEOUT_S):
                raise EOFError
            self.conn.recv()
        except EOFError:
            self.kill()
            raise RuntimeError(
                f"a campaign worker did not start within {WORKER_START_TIMEOUT_S} s (exit code "
                f"{self.process.exitcode}); run launch.campaign.rig.CampaignRig in this process to see its error"
            ) from None

    def give(self, seed: int) -> None:
        self.seed, self.started = seed, time.monotonic()
        self.conn.send(seed)

    def kill(self) -> None:
        self.process.kill()
        self.process.join()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.kill()


def hang_outcome(seed: int, settings: CampaignSettings, detail: str) -> dict[str, Any]:
    """The outcome of a run that did not finish within its timeout (or whose worker died)."""
    from launch.campaign.rig import describe_sample

    return {
        **describe_sample(seed, settings),
        "ticks": 0,
        "physics_steps": 0,
        "steps_outside": 0,
        "max_outside_m": 0.0,
        "safe_stops": 0,
        "episodes": 0,
        "aborted_episodes": 0,
        "stop_reasons": [],
        "end_reason": detail,
        "hang": True,
        "violations": [{"invariant": "hang", "detail": detail}],
        "unconfirmed": [],
        "rejected_states": {},
        "overruns": 0,
        "wall_s": settings.run_timeout_s,
    }


def run_campaign(settings: CampaignSettings, seeds: list[int], workers: int) -> Iterator[dict[str, Any]]:
    """Outcomes of the runs of ``seeds`` (in the order they finish) on ``workers`` processes."""
    pool = [_Worker(settings) for _ in range(max(1, min(workers, len(seeds))))]
    todo = list(reversed(seeds))
    try:
        for worker in pool:
            if todo:
                worker.give(todo.pop())
        while any(w.seed is not None for w in pool):
            busy = {w.conn: w for w in pool if w.seed is not None}
            first_due = min(w.started for w in busy.values()) + settings.run_timeout_s
            for conn in wait(list(busy), timeout=min(POLL_S, max(0.0, first_due - time.monotonic()))):
                worker = busy[conn]
                if time.monotonic() - worker.started > settings.run_timeout_s:
                    continue  # its answer came too late: judged a hang below
                try:
                    _, result = conn.recv()
                except EOFError:
                    result = hang_outcome(
                        worker.seed, settings, f"the worker died (exit code {worker.process.exitcode})"
                    )
                    pool[pool.index(worker)] = worker = _replace(worker, settings)
                yield result
                worker.seed = None
                if todo:
                    worker.give(todo.pop())
            now = time.monotonic()
            for worker in [w for w in pool if w.seed is not None and now - w.started > settings.run_timeout_s]:
                seed = worker.seed
                yield hang_outcome(seed, settings, f"no end within {settings.run_timeout_s} s (hang)")
                fresh = _replace(worker, settings)
                pool[pool.index(worker)] = fresh
                if todo:
                    fresh.give(todo.pop())
    finally:
        for worker in pool:
            worker.close()


def _replace(worker: _Worker, settings: CampaignSettings) -> _Worker:
    worker.kill()
    return _Worker(settings)
