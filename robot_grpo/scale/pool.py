"""A pool of rollout-worker actors that runs a rollout's groups and re-runs the groups of workers that died.

Groups are handed out one at a time (at most ``max_inflight`` queued per worker, so a worker never idles while
its next request travels). When a worker's actor dies (its process crashed, its node left the cluster), every
group it had in flight is queued again and runs on a live worker with the same (seed, update, group): the
rollout comes out exactly as if nothing had happened. When no worker is left, :class:`NoRolloutWorkersError`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, RayActorError

from robot_grpo.scale.group_runner import EnvFactory, GroupRollout
from robot_grpo.scale.worker import PolicySpec, RolloutWorker, Weights

DEFAULT_MAX_INFLIGHT = 2  # groups queued per worker: one running, one waiting (hides the call latency)
WORKER_CPUS = 1  # each worker steps its envs on one core

logger = logging.getLogger(__name__)


class NoRolloutWorkersError(RuntimeError):
    """Every rollout worker of the pool has died."""


@dataclass
class CollectStats:
    """Book-keeping of one :meth:`RolloutWorkerPool.collect` call (wall seconds, counts)."""

    wall_s: float = 0.0
    put_s: float = 0.0  # ray.put of the weights
    compute_s: float = 0.0  # sum over groups of the workers' own time on them
    groups_rerun: int = 0
    workers_lost: list[int] = field(default_factory=list)


@dataclass
class _Worker:
    index: int
    actor: Any
    inflight: int = 0
    alive: bool = True


class RolloutWorkerPool:
    """``n_workers`` :class:`RolloutWorker` actors (one CPU each, spread over the cluster's nodes).

    Needs a connected Ray (``ray.init(...)``); the caller owns the connection.

    :param env_factory: builds one env on a worker (picklable; e.g. ``functools.partial(make_env, id, kwargs)``).
    :param group_size: members per group (G); each worker owns G envs.
    :param n_workers: actors to start; at most the cluster's CPUs (one CPU each).
    :param max_inflight: groups queued per worker.
    """

    def __init__(
        self,
        env_factory: EnvFactory,
        group_size: int,
        n_workers: int,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
    ) -> None:
        if not ray.is_initialized():
            raise RuntimeError("RolloutWorkerPool needs a running Ray: call ray.init(...) (or ray.init(address=...))")
        if n_workers < 1:
            raise ValueError(f"n_workers must be >= 1, got {n_workers}")
        if max_inflight < 1:
            raise ValueError(f"max_inflight must be >= 1, got {max_inflight}")
        cpus = int(ray.cluster_resources().get("CPU", 0))
        if n_workers * WORKER_CPUS > cpus:
            raise ValueError(
                f"{n_workers} rollout workers need {n_workers * WORKER_CPUS} CPUs but the Ray cluster has {cpus}; "
                "use fewer workers or add nodes (ray start --address=<head>:6379 on each machine)"
            )
        self.env_factory = env_factory
        self.group_size = group_size
        self.max_inflight = max_inflight
        actor_class = ray.remote(num_cpus=WORKER_CPUS, max_restarts=0)(RolloutWorker)
        self._workers = [
            _Worker(i, actor_class.options(scheduling_strategy="SPREAD").remote(env_factory, group_size))
            for i in range(n_workers)
        ]
        ray.get([w.actor.ready.remote() for w in self._workers])  # env construction errors surface here
        self._spec_ref: Any = None
        self._spec: PolicySpec | None = None
        self._spec_id = ""
        self._version = 0
        self.last_stats = CollectStats()
        self.lost: list[int] = []  # indices of the workers that died, in order

    @property
    def n_alive(self) -> int:
        return sum(w.alive for w in self._workers)

    def actors(self) -> list[Any]:
        """Handles of the live actors (for fault-injection tests and diagnostics)."""
        return [w.actor for w in self._workers if w.alive]

    def _spec_box(self, spec: PolicySpec) -> list[Any]:
        if self._spec is None or spec != self._spec:
            self._spec, self._spec_ref, self._spec_id = spec, ray.put(spec), uuid.uuid4().hex
        return [self._spec_ref]

    def collect(
        self, spec: PolicySpec, weights: Weights, seed: int, update: int, n_groups: int, n_steps: int
    ) -> list[GroupRollout]:
        """Run groups ``0 .. n_groups - 1`` of rollout ``update``; returns them in group order.

        :raises NoRolloutWorkersError: when every worker has died (the groups not yet returned are lost).
        """
        start = time.perf_counter()
        stats = CollectStats()
        spec_box = self._spec_box(spec)
        weights_box = [ray.put(weights)]  # once per update; workers fetch it from the object store
        stats.put_s = time.perf_counter() - start
        self._version += 1
        args = (spec_box, self._spec_id, weights_box, self._version, seed, update)
        todo: deque[int] = deque(range(n_groups))
        inflight: dict[Any, tuple[_Worker, int]] = {}
        results: dict[int, GroupRollout] = {}

        def fill() -> None:
            for worker in self._workers:
                while worker.alive and todo and worker.inflight < self.max_inflight:
                    group = todo.popleft()
                    ref = worker.actor.run_group.remote(*args, group, n_steps)
                    inflight[ref] = (worker, group)
                    worker.inflight += 1

        fill()
        while inflight:
            (ref,), _ = ray.wait(list(inflight), num_returns=1)
            worker, group = inflight.pop(ref)
            worker.inflight -= 1
            try:
                results[group] = ray.get(ref)
            except (RayActorError, ActorUnavailableError) as err:
                self._lose(worker, err, stats)
                todo.appendleft(group)
                stats.groups_rerun += 1
                if self.n_alive == 0:
                    raise NoRolloutWorkersError(
                        f"all {len(self._workers)} rollout workers died during rollout {update} "
                        f"({len(results)} of {n_groups} groups returned; last error: {type(err).__name__}). "
                        "Check the cluster (ray status) and start workers again"
                    ) from err
            fill()
        stats.compute_s = sum(r.compute_s for r in results.values())
        stats.wall_s = time.perf_counter() - start
        self.last_stats = stats
        return [results[g] for g in range(n_groups)]

    def _lose(self, worker: _Worker, err: Exception, stats: CollectStats) -> None:
        if worker.alive:
            worker.alive = False
            stats.workers_lost.append(worker.index)
            self.lost.append(worker.index)
            logger.warning(
                "rollout worker %d died (%s); its groups run again on the %d live workers with the same seeds",
                worker.index,
                type(err).__name__,
                self.n_alive,
            )

    def shutdown(self) -> None:
        """Kill the actors (the Ray connection stays with its owner)."""
        for worker in self._workers:
            if worker.alive:
                ray.kill(worker.actor)
                worker.alive = False
