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

``StoreFollower`` drives the slot from a package store: it swaps in what the store promotes, provided the package
was exported with the contract the controller runs (and fits the robot spec); ``contract_probe`` builds the probe.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from deploy.contract import ActionHistory, ObservationContract
from deploy.robot_spec import RobotSpec
from deploy.runtime.compatibility import check_compatibility
from deploy.runtime.package import load_package
from deploy.runtime.tick_record import check_policy_id

logger = logging.getLogger(__name__)
# A package store's layout (deploy.finetune.promote.PackageStore writes it; the follower reads it):
CURRENT_LINK = "current"  # the link to the running package
PACKAGES_DIR = "packages"  # installed (verified) packages, one folder each; current points at one of them
TMP_PREFIX = ".tmp-"  # a package folder still being copied in

Backend = Callable[[np.ndarray], np.ndarray]
"""obs_flat float32 [B, D] -> actions float32 [B, A] (deploy.runtime.backends.InferenceBackend)."""

WARMUP_CALLS = 2  # cold calls made before publishing: the first allocates, the second runs on warm buffers


class SwapRefusedError(ValueError):
    """The new backend failed its probe; the running backend stays in place."""


@dataclass(frozen=True)
class SlotEntry:
    """One published policy: the backend, a label (e.g. the package folder), a version number (1, 2, ...) and the
    policy id the tick log records for its ticks (its package's ``manifest_sha256``; "" when not known)."""

    backend: Backend
    label: str
    version: int
    policy_id: str = ""


class PolicySlot:
    """Holds the running inference backend; see the module docstring.

    :param backend: the backend to start with.
    :param label: a name for it (shown in logs, e.g. the package folder or its manifest hash).
    :param probe: optional float32 [B, D] observations every backend must answer before it is published;
        the initial backend is probed too, which also warms it up.
    :param policy_id: the initial backend's id in the tick log (its package's ``manifest_sha256``).
    """

    def __init__(
        self, backend: Backend, label: str = "initial", probe: np.ndarray | None = None, policy_id: str = ""
    ) -> None:
        self._probe = None if probe is None else np.ascontiguousarray(probe, dtype=np.float32)
        if self._probe is not None and self._probe.ndim != 2:
            raise ValueError(f"probe must be a float32 batch [B, obs_dim], got shape {self._probe.shape}")
        self._action_shape: tuple[int, ...] | None = None
        self._action_shape = self._check(backend, label)
        self._entry = SlotEntry(backend, label, 1, check_policy_id(policy_id))
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
    def swap(self, backend: Backend, label: str = "", policy_id: str = "") -> SlotEntry:
        """Probe and warm up ``backend``, then publish it; the running one becomes the rollback target.
        ``policy_id``: what the tick log records for its ticks (its package's ``manifest_sha256``).

        :raises SwapRefusedError: the backend raised, or returned non-finite / mis-shaped actions on the probe.
        :raises ValueError: ``policy_id`` is no id the tick log can hold (``ticklog.check_policy_id``).
        """
        check_policy_id(policy_id)
        self._check(backend, label)
        with self._lock:
            self._versions += 1
            new = SlotEntry(backend, label or f"v{self._versions}", self._versions, policy_id)
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
        return self.swap(package.make_backend(backend, variant), label=resolved.name, policy_id=package.policy_id)

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
            restored = SlotEntry(previous.backend, previous.label, self._versions, previous.policy_id)
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


def contract_probe(contract: ObservationContract, position_m: Sequence[float]) -> np.ndarray:
    """A probe for :class:`PolicySlot`: one float32 observation [1, flat_dim], built by the contract as the control
    loop builds its observations - the gripper at rest at ``position_m`` (metres, e.g. the workspace centre), no
    command sent yet (a hold history), the target at the same point.

    Batch 1 because the control loop calls the backend on one observation per tick: the probe's warm-up calls then
    allocate the buffers the first tick uses (a backend rebinds them when the batch size changes).
    """
    position = np.asarray(position_m, dtype=np.float64)
    if position.shape != (contract.goal_dim,) or not np.all(np.isfinite(position)):
        raise ValueError(
            f"position_m must be {contract.goal_dim} finite metres, e.g. the workspace centre; got {position_m!r}"
        )
    state = np.zeros(contract.state_dim, dtype=np.float64)
    state[slice(*contract.position_slice)] = position
    history = ActionHistory(contract.history_len, contract.action_dim)
    return contract.flat_observation(state, history, position)[None]


def contract_differences(running: ObservationContract, new: ObservationContract) -> list[str]:
    """The contract fields on which ``new`` (a package's) differs from ``running`` (the one the controller builds its
    observations with), one "field new (the running controller builds running)" entry each; empty when they agree."""
    return [
        f"{f.name} {getattr(new, f.name)!r} (the running controller builds {getattr(running, f.name)!r})"
        for f in fields(ObservationContract)
        if getattr(new, f.name) != getattr(running, f.name)
    ]


class ContractMismatchError(ValueError):
    """A package's observation contract is not the one the running controller builds its observations with."""


FOLLOW_INTERVAL_S = 1.0  # how often a running controller looks at the store's current package


class StoreFollower:
    """Follows a package store's ``current`` link from a background thread: a promoted (or rolled back) package
    that was exported with the running contract and fits the robot spec is loaded, probed and swapped into ``slot``
    between ticks. Anything wrong with it - a failed load, another contract, a spec mismatch, a failed self-test or
    probe, any exception at all - is logged with its type, remembered as refused (not retried) and the running
    policy stays; the watcher thread never dies of a package, so later promotions and rollbacks still arrive.
    :meth:`health` says what it did (for the run report).

    :param slot: the controller's policy slot.
    :param store: the store folder (its ``current`` link is followed).
    :param spec: the robot spec every new package is checked against (``deploy.runtime.compatibility``).
    :param contract: the observation contract the running controller builds its observations with; a package
        exported with any other contract (another history length, another state layout) is refused, since the
        controller cannot change what it feeds the policy.
    :param backend: inference backend of the new packages.
    :param variant: model variant of the new packages.
    :param interval_s: seconds between looks at the store.
    """

    def __init__(
        self,
        slot: PolicySlot,
        store: str | Path,
        spec: RobotSpec,
        contract: ObservationContract,
        backend: str = "ort-cpu",
        variant: str | None = None,
        interval_s: float = FOLLOW_INTERVAL_S,
    ) -> None:
        if not isinstance(contract, ObservationContract):
            raise TypeError(
                f"contract must be the ObservationContract the running controller uses (its package's "
                f"package.contract), got {type(contract).__name__}"
            )
        self.slot = slot
        self.link = Path(store) / CURRENT_LINK
        self.spec = spec
        self.contract = contract
        self.backend = backend
        self.variant = variant
        self.interval_s = interval_s
        self.swaps: list[str] = []
        self.refusals: list[dict[str, str]] = []  # {"package": folder name, "error": "Type: message"}, in order
        self.watch_errors = 0  # polls that failed outside any package (e.g. the store folder unreadable)
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="store-follower", daemon=True)

    @property
    def refused(self) -> list[str]:
        """Names of the packages refused so far (each refused once, never retried)."""
        return [r["package"] for r in list(self.refusals)]

    @property
    def alive(self) -> bool:
        """Whether the watcher thread is running (False before start() and after stop())."""
        return self._thread.is_alive()

    def health(self) -> dict[str, Any]:
        """What the follower did, JSON-ready: swaps, refusals (package and error), watch errors, the last error."""
        refusals = [dict(r) for r in list(self.refusals)]
        return {
            "swaps": list(self.swaps),
            "refusals": len(refusals),
            "refused": refusals,
            "watch_errors": self.watch_errors,
            "last_error": self.last_error,
        }

    def start(self) -> StoreFollower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def poll_once(self) -> SlotEntry | None:
        """Swap to the store's current package if it changed and passes its checks; returns the new entry.

        A package that fails any check, or raises anything while being loaded, checked or probed, is refused
        (logged, remembered) and None returned; errors outside a package (the link unreadable) propagate.
        """
        if not self.link.exists():
            return None
        resolved = Path(os.path.realpath(self.link))
        if resolved.name == self.slot.entry().label or resolved.name in self.refused:
            return None
        try:
            self._check_installed(resolved)
            package = load_package(resolved)
            differences = contract_differences(self.contract, package.contract)
            if differences:
                raise ContractMismatchError(
                    f"its contract differs from the one the running controller builds observations with: "
                    f"{'; '.join(differences)}. Promote a package exported with the running contract, or restart "
                    "the controller on the new package (robot-grpo run --set package=...)"
                )
            check_compatibility(self.spec, package.contract, package.action_delay_steps, str(resolved))
            backend = package.make_backend(self.backend, self.variant)
            entry = self.slot.swap(backend, label=resolved.name, policy_id=package.policy_id)
        except Exception as err:  # any failure of a new package must leave the running policy (and this thread)
            error = f"{type(err).__name__}: {err}"
            logger.error(
                "store %s: package %s not swapped in, the running policy stays: %s", self.link, resolved, error
            )
            self.refusals.append({"package": resolved.name, "error": error})
            self.last_error = error
            return None
        logger.info("store %s: swapped in package %s (slot version %d)", self.link, resolved.name, entry.version)
        self.swaps.append(resolved.name)
        return entry

    def _check_installed(self, resolved: Path) -> None:
        """Refuse a ``current`` link that does not point at an installed package of this store: a folder outside
        its ``packages/`` (never installed nor gated) or one still being copied in."""
        packages = Path(os.path.realpath(self.link.parent / PACKAGES_DIR))
        if resolved.parent != packages or resolved.name.startswith(TMP_PREFIX):
            raise ValueError(
                f"{self.link} points at {resolved}, which is not an installed package of this store (a folder in "
                f"{packages}, not a {TMP_PREFIX}* copy in progress); promote packages with the store's commands "
                "(deploy.finetune.promote), never by editing the link"
            )

    def _watch(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.poll_once()
            except Exception as err:  # the follower must outlive a bad poll: the next one may bring a rollback
                self.watch_errors += 1
                self.last_error = f"{type(err).__name__}: {err}"
                logger.exception("store %s: poll failed (%s); still following", self.link, self.last_error)
