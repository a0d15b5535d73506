"""The names a policy package is made of (its files, the manifest's own digest field) and the error that refuses one.

Shared by :mod:`deploy.runtime.package` (loading and integrity) and :mod:`deploy.runtime.manifest_fields` (the
manifest's fields), so neither imports the other; ``deploy.runtime.package`` re-exports every name here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MANIFEST_NAME = "manifest.json"
DIGEST_FIELD = "manifest_sha256"

#: Default file name of every model variant; the manifest's ``variants`` maps variant -> file.
VARIANT_FILES: dict[str, str] = {
    "fp32": "policy.onnx",
    "fp16": "policy_fp16.onnx",
    "int8": "policy_int8.onnx",
    "engine": "policy.engine",
}
ONNX_VARIANTS = ("fp32", "fp16", "int8")
EWC_FILE = "ewc.npz"
SELFTEST_FILE = "selftest.npz"


class PackageError(ValueError):
    """A policy package that must not be used; ``path`` names the offending file."""

    def __init__(self, path: str | Path, message: str) -> None:
        self.path = Path(path)
        super().__init__(f"{self.path}: {message}")


def check_file_name(folder: Path, name: Any) -> Path:
    """``folder / name`` for a plain file name inside the package; anything else (a path, '..') is refused."""
    if not isinstance(name, str) or not name or name != Path(name).name or name in (".", ".."):
        raise PackageError(folder / MANIFEST_NAME, f"file entry {name!r} must be a plain file name inside the package")
    return folder / name
