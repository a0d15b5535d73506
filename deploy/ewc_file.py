"""The EWC state file (``ewc.npz`` in a policy package): its one reader and writer, numpy only.

Both sides use this module: the exporter and the fine-tuner write and read it (training side), and the robot
reads it without torch (``deploy.runtime``). ``robot_grpo.ewc.EWCPenalty`` holds the same state in memory and
knows no file.

Format (``np.savez``, read with ``allow_pickle=False``): ``param/<name>`` the anchor weights theta*,
``fisher/<name>`` the diagonal Fisher (same names and shapes, finite, >= 0), and ``meta/format_version``,
``meta/consolidations`` (fine-tuning rounds absorbed, online EWC), optionally ``meta/lambda`` and ``meta/gamma``
(the strength and decay last used). Files written before the meta entries existed (the exporter's first ones) hold
only ``param/`` and ``fisher/``: format 1, no consolidation yet.
"""

from __future__ import annotations

import io
import os
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

EWC_FORMAT_VERSION = 1
PARAM_PREFIX, FISHER_PREFIX, META_PREFIX = "param/", "fisher/", "meta/"
META_NAMES = tuple(META_PREFIX + name for name in ("format_version", "consolidations", "lambda", "gamma"))


@dataclass(frozen=True)
class EwcState:
    """The contents of an EWC file.

    :param params: parameter name -> anchor weights (theta*).
    :param fisher: parameter name -> diagonal Fisher information (same names and shapes, finite, >= 0).
    :param consolidations: fine-tuning rounds this state has absorbed (0 for a sim-trained anchor).
    :param lam: EWC strength lambda last used (None: not recorded).
    :param gamma: online-EWC decay last used (None: not recorded).
    """

    params: Mapping[str, np.ndarray]
    fisher: Mapping[str, np.ndarray]
    consolidations: int = 0
    lam: float | None = None
    gamma: float | None = None

    def __post_init__(self) -> None:
        names, fisher_names = set(self.params), set(self.fisher)
        if names != fisher_names or not names:
            raise ValueError(
                "EWC params and fisher must name the same, non-empty set of parameters: only in params "
                f"{sorted(names - fisher_names)}, only in fisher {sorted(fisher_names - names)}"
            )
        for name, value in self.fisher.items():
            value = np.asarray(value)
            if value.shape != np.shape(self.params[name]):
                raise ValueError(f"fisher[{name!r}] has shape {value.shape}, params {np.shape(self.params[name])}")
            if not np.all(np.isfinite(value)) or np.any(value < 0):
                raise ValueError(f"fisher[{name!r}] must be finite and >= 0")
            if not np.all(np.isfinite(np.asarray(self.params[name]))):
                raise ValueError(
                    f"params[{name!r}] (the anchor weights) must be finite; the EWC state is damaged: re-export the "
                    "package from its checkpoint (robot-grpo export)"
                )
        if self.consolidations < 0:
            raise ValueError(f"consolidations must be >= 0, got {self.consolidations}")


def ewc_to_bytes(state: EwcState) -> bytes:
    """The ``.npz`` bytes of ``state``."""
    arrays = {PARAM_PREFIX + k: np.asarray(v) for k, v in state.params.items()}
    arrays |= {FISHER_PREFIX + k: np.asarray(v) for k, v in state.fisher.items()}
    arrays[META_PREFIX + "format_version"] = np.array(EWC_FORMAT_VERSION)
    arrays[META_PREFIX + "consolidations"] = np.array(int(state.consolidations))
    if state.lam is not None:
        arrays[META_PREFIX + "lambda"] = np.array(float(state.lam))
    if state.gamma is not None:
        arrays[META_PREFIX + "gamma"] = np.array(float(state.gamma))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _check_entries(arrays: Mapping[str, np.ndarray], source: str) -> None:
    """Only ``param/``, ``fisher/`` and the known ``meta/`` names; weights and Fisher float arrays, meta scalars."""
    for name, value in arrays.items():
        if name.startswith((PARAM_PREFIX, FISHER_PREFIX)):
            if value.dtype.kind != "f":
                raise ValueError(f"{source}: {name} has dtype {value.dtype}; EWC weights and Fisher are float arrays")
        elif name in META_NAMES:
            if value.shape != () or value.dtype.kind not in "iuf":
                raise ValueError(f"{source}: {name} must be a number, got dtype {value.dtype} shape {value.shape}")
        else:
            raise ValueError(
                f"{source}: unexpected entry {name!r}; an EWC file holds only {PARAM_PREFIX}<name>, "
                f"{FISHER_PREFIX}<name> and {', '.join(META_NAMES)}"
            )


def ewc_from_bytes(data: bytes, source: str = "ewc.npz") -> EwcState:
    """Read an EWC file's bytes (e.g. ``PolicyPackage.read_verified("ewc.npz")``, already hash-checked).

    Raises ValueError naming ``source`` on a file that is not a plain-array EWC npz (a pickle, an object array, an
    unknown entry, integer weights, NaN, shapes that disagree) or has a format this build does not read.
    """
    try:
        loaded = np.load(io.BytesIO(data), allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):  # a single .npy array
            raise ValueError(f"np.load gave a {type(loaded).__name__}, not an .npz archive of named arrays")
        with loaded as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:  # a pickle, an object array, not a zip
        raise ValueError(f"{source}: not an EWC .npz file of plain arrays ({err})") from None
    _check_entries(arrays, source)
    version = int(arrays.get(META_PREFIX + "format_version", np.array(EWC_FORMAT_VERSION)))
    if version != EWC_FORMAT_VERSION:
        raise ValueError(
            f"{source}: EWC format_version {version} is not supported (this build reads {EWC_FORMAT_VERSION}); "
            "re-export the package with this version of robot-grpo"
        )
    lam, gamma = arrays.get(META_PREFIX + "lambda"), arrays.get(META_PREFIX + "gamma")
    try:
        return EwcState(
            params={k[len(PARAM_PREFIX) :]: v for k, v in arrays.items() if k.startswith(PARAM_PREFIX)},
            fisher={k[len(FISHER_PREFIX) :]: v for k, v in arrays.items() if k.startswith(FISHER_PREFIX)},
            consolidations=int(arrays.get(META_PREFIX + "consolidations", 0)),
            lam=None if lam is None else float(lam),
            gamma=None if gamma is None else float(gamma),
        )
    except ValueError as err:
        raise ValueError(f"{source}: {err}") from None


def save_ewc(path: str | Path, state: EwcState) -> Path:
    """Write ``state`` to ``path`` atomically (temp file in the same folder, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(ewc_to_bytes(state))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_ewc(path: str | Path) -> EwcState:
    """Read an EWC file written by :func:`save_ewc` (or a policy package's ``ewc.npz``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"EWC state {path} does not exist; export the policy with a Fisher first")
    return ewc_from_bytes(path.read_bytes(), source=str(path))
