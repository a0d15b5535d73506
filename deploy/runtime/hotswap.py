"""An atomic policy holder: the control loop reads it once per tick, a promotion swaps it between ticks.

numpy + stdlib only (runs on the robot). The API is three calls:

    slot = PolicySlot(backend, label="pkg-0001", probe=obs_batch)
    backend = slot.current()            # the control loop, once at the start of every tick
    slot.swap(new_backend, label=...)   # the promoter, from any thread
    slot.rollback()                     # back to the previous backend

Why a tick never sees half a swap and never misses its deadline because of one:

- ``current()`` is one attribute read of an immutable entry; ``swap`` publishes the new entry with one
  attribute assignment (atomic in CPython). The loop calls ``current()`` once per tick and uses that backend
  for the whole tick, so a swap lands exactly between two ticks.
- The expensive parts of a swap - loading the package, building the inference session and its first
  (cold) inference, which allocates - run in ``swap`` on the caller's thread *before* publishing, via the
  probe: the new backend must return finite float32 actions of the same shape as the running one on
  ``probe`` (a batch of real observations), else the swap is refused and the running policy stays.
- Writers (swap / rollback) are serialized by a lock; the reader takes no lock.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deploy.robot_spec import RobotSpec
from deploy.runtime.compatibility import check_compatibility
from deploy.runtime.package import load_package

logger = logging.getLogger(__name__)
CURRENT_LINK = "current"  # the store's link to the running package (deploy.finetune.promote.PackageStore)

Backend = Callable[[np.ndarray], np.ndarray]
"""obs_flat float32 [B, D] -> actions float32 [B, A] (deploy.runtime.backends.InferenceBackend)."""

WARMUP_CALLS = 2  # cold calls made before publishing: the first allocates, the second runs on warm buffers


class SwapRefusedError(ValueError):
    """The new backend failed its probe; the running backend stays in place."""


@dataclass(frozen=True)
class SlotEntry:
    """One published policy: the backend, a label (e.g. the package id) and a version number (1, 2, ...)."""

    backend: Backend
    label: str
    version: int


class PolicySlot:
    """Holds the running inference backend; see the module docstring.

    :param backend: the backend to start with.
    :param label: a name for it (shown in logs, e.g. the package folder or its manifest hash).
    :param probe: optional float32 [B, D] observations every backend must answer before it is published;
        the initial backend is probed too, which also warms it up.
    """

    def __init__(self, backend: Backend, label: str = "initial", probe: np.ndarray | None = None) -> None:
        self._probe = None if probe is None else np.ascontiguousarray(probe, dtype=np.float32)
        if self._probe is not None and self._probe.ndim != 2:
            raise ValueError(f"probe must be a float32 batch [B, obs_dim], got shape {self._probe.shape}")
        self._action_shape: tuple[int, ...] | None = None
        self._action_shape = self._check(backend, label)
        self._entry = SlotEntry(backend, label, 1)
        self._previous: SlotEntry | None = None
        self._lock = threading.Lock()
        self._versions = 1

    # The control loop ------------------------------------------------------------------------------------
    def current(self) -> Backend:
        """The backend to use for this whole tick (lock-free: one attribute read)."""
        return self._entry.backend

    def entry(self) -> SlotEntry:
        """The published entry (backend, label, version), read atomically."""
        return self._entry

    # The promoter ----------------------------------------------------------------------------------------
    def swap(self, backend: Backend, label: str = "") -> SlotEntry:
        """Probe and warm up ``backend``, then publish it; the running one becomes the rollback target.

        :raises SwapRefusedError: the backend raised, or returned non-finite / mis-shaped actions on the probe.
        """
        self._check(backend, label)
        with self._lock:
            self._versions += 1
            new = SlotEntry(backend, label or f"v{self._versions}", self._versions)
            self._previous = self._entry
            self._entry = new
        return new

    def swap_package(self, folder: str | Path, backend: str = "ort-cpu", variant: str | None = None) -> SlotEntry:
        """Load a policy package (hash-verified) and swap to it; label = the package folder's name.

        ``folder`` may be a symlink (a store's ``current``): it is resolved once, so a promotion that re-points
        the link during the load cannot mix files of two packages.
        """
        resolved = Path(os.path.realpath(folder))
        package = load_package(resolved)
        return self.swap(package.make_backend(backend, variant), label=resolved.name)

    def follow(self, link: str | Path, backend: str = "ort-cpu", variant: str | None = None) -> SlotEntry | None:
        """Swap to the package ``link`` points at (a store's ``current``) if it is not the one running.

        Call it from a watcher thread or between episodes, never inside a tick: it loads and probes the package.
        A promotion or a rollback in the store (``python -m deploy.finetune.promote rollback``) thus reaches a
        running controller. Returns the new entry, or None when nothing changed.
        """
        if Path(os.path.realpath(link)).name == self._entry.label:
            return None
        return self.swap_package(link, backend, variant)

    def rollback(self) -> SlotEntry:
        """Publish the previous backend again (and keep the current one as the new rollback target)."""
        with self._lock:
            if self._previous is None:
                raise RuntimeError("nothing to roll back to: no swap has happened in this slot")
            self._versions += 1
            previous = self._previous
            restored = SlotEntry(previous.backend, previous.label, self._versions)
            self._previous = self._entry
            self._entry = restored
        return restored

    def _check(self, backend: Backend, label: str) -> tuple[int, ...] | None:
        if not callable(backend):
            raise TypeError(f"backend {label!r} must be callable on an observation batch, got {type(backend)}")
        if self._probe is None:
            return None
        action = None
        for _ in range(WARMUP_CALLS):
            try:
                action = backend(self._probe)
            except Exception as err:  # a broken model must never replace a working one
                raise SwapRefusedError(f"backend {label!r} failed on the probe batch: {err!r}") from err
        action = np.asarray(action)
        if action.dtype != np.float32 or action.ndim != 2 or action.shape[0] != self._probe.shape[0]:
            raise SwapRefusedError(
                f"backend {label!r} returned {action.dtype} {action.shape} for a probe of {self._probe.shape}; "
                "it must return float32 [B, action_dim]"
            )
        if self._action_shape is not None and action.shape != self._action_shape:
            raise SwapRefusedError(
                f"backend {label!r} returns actions of shape {action.shape}, the running policy {self._action_shape}"
            )
        if not np.all(np.isfinite(action)):
            raise SwapRefusedError(f"backend {label!r} returned NaN or inf actions on the probe batch")
        return action.shape


FOLLOW_INTERVAL_S = 1.0  # how often a running controller looks at the store's current package


class StoreFollower:
    """Follows a package store's ``current`` link from a background thread: a promoted (or rolled back) package
    that fits the robot spec is loaded, probed and swapped into ``slot`` between ticks; anything wrong with it
    (a failed load, a spec mismatch, a failed probe) is logged and the running policy stays.

    :param slot: the controller's policy slot.
    :param store: the store folder (its ``current`` link is followed).
    :param spec: the robot spec every new package is checked against (``deploy.runtime.compatibility``).
    :param backend: inference backend of the new packages.
    :param variant: model variant of the new packages.
    :param interval_s: seconds between looks at the store.
    """

    def __init__(
        self,
        slot: PolicySlot,
        store: str | Path,
        spec: RobotSpec,
        backend: str = "ort-cpu",
        variant: str | None = None,
        interval_s: float = FOLLOW_INTERVAL_S,
    ) -> None:
        self.slot = slot
        self.link = Path(store) / CURRENT_LINK
        self.spec = spec
        self.backend = backend
        self.variant = variant
        self.interval_s = interval_s
        self.swaps: list[str] = []
        self.refused: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="store-follower", daemon=True)

    def start(self) -> StoreFollower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def poll_once(self) -> SlotEntry | None:
        """Swap to the store's current package if it changed and passes its checks; returns the new entry."""
        if not self.link.exists():
            return None
        resolved = Path(os.path.realpath(self.link))
        if resolved.name == self.slot.entry().label or resolved.name in self.refused:
            return None
        try:
            package = load_package(resolved)
            check_compatibility(self.spec, package.contract, package.action_delay_steps, str(resolved))
            entry = self.slot.swap(package.make_backend(self.backend, self.variant), label=resolved.name)
        except (ValueError, OSError, RuntimeError) as err:  # PackageError, CompatibilityError, SwapRefusedError...
            logger.error("store %s: package %s not swapped in, the running policy stays: %s", self.link, resolved, err)
            self.refused.append(resolved.name)
            return None
        logger.info("store %s: swapped in package %s (slot version %d)", self.link, resolved.name, entry.version)
        self.swaps.append(resolved.name)
        return entry

    def _watch(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll_once()
