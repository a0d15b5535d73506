"""Load and verify a policy package folder (stdlib + numpy + the contract: this runs on the robot).

A package is a folder written by ``deploy.export``::

    manifest.json        format version, contract, delay, provenance, versions, sha256 of every other file
    policy.onnx          fp32 (normaliser and output clipping inside the graph)
    policy_fp16.onnx     fp16 weights and math, fp32 input/output
    policy_int8.onnx     static QDQ int8
    policy.engine        TensorRT fp16 engine, built on the target (``python -m deploy.export.tensorrt_build``)
    ewc.npz              optional: EWC anchor weights + diagonal Fisher (plain arrays, checked at load, never pickle)
    report.md / .json    parity, closed-loop success and latency of every variant

Integrity: ``manifest.json`` lists the sha256 of every other file, and carries a digest of its own bytes
(``manifest_sha256``, computed with that field's value set to 64 zeros), so a changed byte in *any* file of
the package is refused with an error that names the file. This catches corruption and partial copies; it is not
a signature (anyone who can write the folder can re-seal it). The folder must hold exactly the files the manifest
lists: an extra file, a subfolder or a symbolic link (which could point anywhere) is refused with its name. The
model's input and output (names, sizes) are checked against the contract when a backend is made from it.

Fields: :mod:`deploy.runtime.manifest_fields` checks every manifest key is known and typed, and every duplicated fact
consistent.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.contract import ObservationContract, known_task_differences
from deploy.ewc_file import EwcState, ewc_from_bytes
from deploy.runtime.backends import ModelLoadError
from deploy.runtime.manifest_fields import check_manifest_fields, check_manifest_keys
from deploy.runtime.package_names import (  # also imported from here by the exporter, the engine builder, tests
    DIGEST_FIELD,
    EWC_FILE,
    MANIFEST_NAME,
    ONNX_VARIANTS,
    SELFTEST_FILE,
    VARIANT_FILES,
    PackageError,
    check_file_name,
)

PACKAGE_FORMAT_VERSION = 1
_ZERO_DIGEST = "0" * 64
_DIGEST_RE = re.compile(rb'"manifest_sha256": "([^"]*)"')
_HASH_CHUNK_BYTES = 1 << 20
SELFTEST_BATCH = 64  # the native engine's default profile tops out at batch 64


# Hashing and sealing (shared with the exporter and the engine builder) -----------------------------------------
def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def seal_manifest(manifest: dict[str, Any]) -> bytes:
    """Serialise ``manifest`` (JSON, indented) with its own digest as the last field."""
    body = {k: v for k, v in manifest.items() if k != DIGEST_FIELD}
    body[DIGEST_FIELD] = _ZERO_DIGEST
    raw = (json.dumps(body, indent=2, allow_nan=False) + "\n").encode("utf-8")
    digest = sha256_bytes(raw)
    return raw.replace(f'"{DIGEST_FIELD}": "{_ZERO_DIGEST}"'.encode(), f'"{DIGEST_FIELD}": "{digest}"'.encode())


def write_manifest(folder: str | Path, manifest: dict[str, Any]) -> Path:
    """Seal and write ``manifest.json`` atomically (temp file + rename), returning its path."""
    path = Path(folder) / MANIFEST_NAME
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(seal_manifest(manifest))
    os.replace(tmp, path)
    return path


def _check_manifest_digest(path: Path, raw: bytes) -> None:
    matches = _DIGEST_RE.findall(raw)
    if len(matches) != 1 or not re.fullmatch(rb"[0-9a-f]{64}", matches[0]):
        raise PackageError(path, f"no valid {DIGEST_FIELD} field: the manifest was modified or is not sealed")
    stored = matches[0].decode()
    zeroed = _DIGEST_RE.sub(f'"{DIGEST_FIELD}": "{_ZERO_DIGEST}"'.encode(), raw, count=1)
    actual = sha256_bytes(zeroed)
    if actual != stored:
        raise PackageError(
            path,
            f"manifest digest mismatch (stored {stored[:12]}..., computed {actual[:12]}...): it was modified "
            "after export; re-copy the package from its source",
        )


# The loaded package -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PolicyPackage:
    """A verified policy package. Build with :func:`load_package`.

    :param folder: the package folder.
    :param manifest: the parsed manifest (a dict; treat as read-only).
    :param contract: the observation/action contract the policy was exported with.
    """

    folder: Path
    manifest: dict[str, Any]
    contract: ObservationContract

    @property
    def variants(self) -> list[str]:
        """The model variants present in this package (``"engine"`` only once built on the target)."""
        return [v for v in VARIANT_FILES if v in self.manifest.get("variants", {})]

    @property
    def policy_id(self) -> str:
        """The package's identity in the tick log: its manifest digest (``manifest_sha256``), the same for every
        verified copy of the package (a store's installed copy included)."""
        return str(self.manifest["manifest_sha256"])

    @property
    def action_delay_steps(self) -> tuple[int, int]:
        """(low, high) actuation delay the policy was trained for, in control steps."""
        delay = self.manifest["action_delay_steps"]
        return int(delay["low"]), int(delay["high"])

    def model_path(self, variant: str) -> Path:
        """Path of a model variant: ``"fp32"``, ``"fp16"``, ``"int8"`` or ``"engine"``."""
        if variant not in VARIANT_FILES:
            raise ValueError(f"unknown variant {variant!r}; choose one of {list(VARIANT_FILES)}")
        files = self.manifest.get("variants", {})
        if variant not in files:
            if variant == "engine":
                command = (self.manifest.get("engine") or {}).get(
                    "build_command", "python -m deploy.export.tensorrt_build"
                )
                raise PackageError(
                    self.folder / VARIANT_FILES["engine"],
                    f"this package has no TensorRT engine yet; build it on the target device with: {command}",
                )
            raise PackageError(self.folder, f"variant {variant!r} is not in this package; it has {self.variants}")
        return self.folder / files[variant]

    def read_verified(self, name: str) -> bytes:
        """Read one package file and check its bytes against the manifest again (no gap between check and use)."""
        path = check_file_name(self.folder, name)
        expected = self.manifest["files"].get(name)
        if expected is None:
            raise PackageError(path, "is not listed in the manifest; only listed files are loaded")
        data = path.read_bytes()
        if sha256_bytes(data) != expected:
            raise PackageError(path, "sha256 changed since the package was loaded; re-copy the package")
        return data

    def make_backend(
        self, backend: str = "ort-cpu", variant: str | None = None, self_test: bool = True, **options: Any
    ):
        """An inference backend over one variant (default: ``"engine"`` for ``"tensorrt"``, else ``"fp32"``).

        The model bytes are re-verified against the manifest right before they are handed to the backend, and the
        new backend must reproduce the torch actions of the package's self-test set within the variant's tolerance
        (:meth:`self_test`, a few milliseconds) before it is returned. A package without a self-test set is
        refused unless ``self_test=False`` (an explicit opt-out, for callers that self-test themselves or do not
        drive a robot). Model bytes a backend cannot load (not ONNX, empty) raise :class:`PackageError` naming the
        file. ``options`` go to :func:`deploy.runtime.backends.make_backend`.
        """
        from deploy.runtime.backends import make_backend

        if variant is None:
            variant = "engine" if backend == "tensorrt" else "fp32"
        if (backend == "tensorrt") != (variant == "engine"):
            raise ValueError(
                f"backend {backend!r} cannot run variant {variant!r}: the native 'tensorrt' backend runs the "
                f"'engine' variant, the onnxruntime backends run {list(ONNX_VARIANTS)}"
            )
        if self_test and not self.manifest.get("selftest"):
            raise PackageError(
                self.folder / MANIFEST_NAME,
                "has no 'selftest' section, so the new backend cannot be checked against the exported policy's "
                "actions before the robot moves. Re-export the package (deploy.export writes selftest.npz), or pass "
                "self_test=False to skip the check (benchmarks and tests only)",
            )
        path = self.model_path(variant)
        try:
            made = make_backend(backend, self.read_verified(path.name), **options)
        except ModelLoadError as exc:
            raise PackageError(path, f"variant {variant!r} cannot be loaded: {exc}") from exc
        expected = (self.contract.flat_dim, self.contract.action_dim)
        if (made.input_dim, made.output_dim) != expected:
            raise PackageError(
                path,
                f"the model maps {made.input_dim} inputs to {made.output_dim} outputs; the package's contract "
                f"{self.contract.name!r} needs {expected[0]} -> {expected[1]}. Re-export the package",
            )
        if self_test:
            self.self_test(made, variant)
        return made

    def self_test(self, backend: Any, variant: str, tolerance: float | None = None) -> float:
        """Run ``backend`` on the package's self-test observations and compare with the torch actions stored at export.

        ``selftest.npz`` holds float32 observations from sim rollouts (``obs`` [N, D]) and the torch policy's actions
        on them (``actions`` [N, A]); the manifest gives each variant's tolerance (action units; ``tolerance``
        overrides it). Returns the largest
        |action - torch action|; raises :class:`PackageError` when it is above the tolerance, so a backend that
        computes something else (a wrong build, a broken GPU library) is caught before the robot moves.
        """
        import io

        import numpy as np

        section = self.manifest.get("selftest")
        if not section:
            raise PackageError(self.folder / SELFTEST_FILE, "this package has no self-test set; re-export it")
        if tolerance is None:
            tolerance = section["tolerance"].get(variant)
            if tolerance is None:
                raise PackageError(
                    self.folder / MANIFEST_NAME,
                    f"its selftest section has no tolerance for variant {variant!r} (it has "
                    f"{section['tolerance']}); re-export the package",
                )
            if getattr(backend, "compute_precision", "model") == "fp16":  # e.g. the TensorRT EP with fp16 enabled
                tolerance = max(tolerance, section["tolerance"].get("fp16", tolerance))
        path = self.folder / section["file"]
        try:
            with np.load(io.BytesIO(self.read_verified(section["file"])), allow_pickle=False) as data:
                obs, expected = data["obs"], data["actions"]
        except (OSError, ValueError, KeyError) as exc:  # not an .npz, or without the two arrays
            raise PackageError(
                path, f"is not a self-test set with 'obs' and 'actions' arrays ({exc}); re-export the package"
            ) from exc
        if (
            obs.ndim != 2
            or obs.shape[1] != self.contract.flat_dim
            or expected.shape[:1] != obs.shape[:1]
            or not len(obs)
        ):
            raise PackageError(
                path,
                f"holds obs {obs.shape} and actions {expected.shape}; the contract needs obs [N, "
                f"{self.contract.flat_dim}] and actions [N, {self.contract.action_dim}]. Re-export the package",
            )
        if section.get("n_obs", len(obs)) != len(obs):
            raise PackageError(
                path,
                f"holds {len(obs)} observations, the manifest's selftest.n_obs says {section['n_obs']}: the package "
                "contradicts itself; re-export it",
            )
        batch = min(SELFTEST_BATCH, getattr(backend, "max_batch", SELFTEST_BATCH))
        actions = np.concatenate([backend(obs[i : i + batch]) for i in range(0, len(obs), batch)])
        if actions.shape != expected.shape:
            raise PackageError(path, f"backend gave {actions.shape}, expected {expected.shape}")
        err = float(np.max(np.abs(actions.astype(np.float64) - expected)))
        if not err <= tolerance:  # also catches NaN
            raise PackageError(
                path,
                f"self-test of variant {variant!r} on {getattr(backend, 'name', backend)}: max |action - torch action| "
                f"{err:.3g} > tolerance {tolerance:g}; do not run this backend on the robot",
            )
        return err

    def load_ewc_anchor(self) -> dict[str, Any] | None:
        """The EWC anchor (``{"params": {name: array}, "fisher": {name: array}}``) or None when not packaged."""
        if EWC_FILE not in self.manifest["files"]:
            return None
        path = self.folder / EWC_FILE
        try:
            state = ewc_from_bytes(self.read_verified(EWC_FILE), source=EWC_FILE)
        except ValueError as exc:
            raise PackageError(path, f"is not a plain-array EWC file: {exc}. Re-export the package") from None
        return {"params": dict(state.params), "fisher": dict(state.fisher)}


def load_package(folder: str | Path, allow_failed_checks: bool = False) -> PolicyPackage:
    """Load a policy package, verifying the format version, the sha256 of every file and every manifest field.

    Raises :class:`PackageError` (naming the file, or the manifest field and how to fix it) on a missing, modified
    or unexpected file; on a manifest whose format version this runtime does not read; on an unknown, missing or
    mistyped manifest field; on a manifest that contradicts itself (a fact it records twice with two values, a delay
    range longer than the action history the policy sees); on an ``ewc.npz`` that is not plain finite float arrays
    under the EWC file's names (a pickle re-sealed into it); and on a package whose export checks failed (a
    ``.rejected`` folder: ``allow_failed_checks=True`` opens it for inspection).
    """
    folder = Path(folder)
    manifest_path = folder / MANIFEST_NAME
    if not folder.is_dir():
        raise PackageError(folder, "is not a policy package folder (it does not exist or is not a directory)")
    if not manifest_path.is_file():
        raise PackageError(manifest_path, "is missing: this folder is not a policy package")
    raw = manifest_path.read_bytes()
    _check_manifest_digest(manifest_path, raw)
    try:
        manifest = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackageError(manifest_path, f"is not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict):
        raise PackageError(manifest_path, "must hold a JSON object")

    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise PackageError(manifest_path, f"format_version must be an integer, got {version!r}")
    if version > PACKAGE_FORMAT_VERSION:
        raise PackageError(
            manifest_path,
            f"package format version {version} is newer than this runtime reads ({PACKAGE_FORMAT_VERSION}); "
            "update robot-grpo on the robot or export the package with the version the robot runs",
        )
    if version != PACKAGE_FORMAT_VERSION:
        raise PackageError(
            manifest_path,
            f"package format version {version} is not supported (this runtime reads {PACKAGE_FORMAT_VERSION}); "
            "re-export the policy",
        )
    files = check_manifest_keys(manifest_path, manifest)
    _check_folder_contents(folder, files)
    for name, expected in files.items():
        path = folder / name
        if not path.is_file():
            raise PackageError(path, "is listed in the manifest but missing from the package")
        actual = sha256_file(path)
        if actual != expected:
            raise PackageError(
                path,
                f"sha256 mismatch (manifest {expected[:12]}..., file {actual[:12]}...): the file was "
                "modified or corrupted after export; re-copy the package",
            )
    try:
        contract = ObservationContract.from_dict(manifest["contract"])
    except (KeyError, TypeError, ValueError) as exc:
        raise PackageError(manifest_path, f"invalid contract section: {exc}; re-export the package") from exc
    known = known_task_differences(contract)
    if known:
        raise PackageError(
            manifest_path,
            f"its contract names the {contract.name!r} task but differs from it: "
            + "; ".join(known)
            + ". Re-export the package, or give the contract of another robot another name",
        )
    check_manifest_fields(manifest_path, manifest, contract, allow_failed_checks)
    if EWC_FILE in files:
        _check_ewc_file(folder / EWC_FILE)
    return PolicyPackage(folder=folder, manifest=manifest, contract=contract)


def _check_ewc_file(path: Path) -> EwcState:
    """The package's EWC state, read as plain arrays: a sealed hash says the file is what was packed, not that it is
    safe to read (anyone who can write the folder can re-seal it), so a pickle or anything else is refused by name."""
    try:
        return ewc_from_bytes(path.read_bytes(), source=path.name)
    except ValueError as exc:
        raise PackageError(
            path, f"is not a plain-array EWC file: {exc}. Re-export the package; never load it with pickle"
        ) from None


def _check_folder_contents(folder: Path, files: dict[str, Any]) -> None:
    """Exactly the listed files and the manifest, as regular files: no extra file, subfolder or symbolic link."""
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink():
            raise PackageError(
                entry, "is a symbolic link; a package holds plain files only (copy the file in and re-export)"
            )
        if entry.name != MANIFEST_NAME and entry.name not in files:
            kind = "folder" if entry.is_dir() else "file"
            raise PackageError(
                entry,
                f"is a {kind} the manifest does not list; a package holds exactly its listed files. Remove it, or "
                "re-export the package if it belongs there",
            )
