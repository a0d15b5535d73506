"""The package store: atomic promotion of a candidate package and one-command rollback.

Layout of a store folder::

    packages/<name>/      installed policy packages, never modified after installation
    checkpoints/<name>.zip  optional GRPO checkpoint of that package (training side only; never on the robot path)
    current  -> packages/<name>     symlink: what the robot runs
    previous -> packages/<name>     symlink: the rollback target
    history.jsonl         one JSON line per install / promotion / rejection / rollback

Crash safety (a crash at any instant leaves ``current`` pointing at a whole, loadable package):

- install: the package is copied into ``packages/.tmp-<name>-<random>``, every file and the folder are
  fsynced, the copy is verified (``load_package``: sha256 of every file), then renamed to ``packages/<name>``
  (rename is atomic) and ``packages/`` is fsynced. ``current`` never points into a temp folder.
- promote: ``previous`` is re-pointed at the old target, then ``current`` at the new package. Each re-point
  makes a new symlink under a temp name and ``os.replace``s it over the old one (atomic on POSIX), then
  fsyncs the store folder. A crash between the two leaves ``previous == current`` = the old package.
- rollback: ``current`` <-> ``previous`` the same way (``python -m deploy.finetune.promote rollback --store DIR``).

Readers resolve ``current`` once (``resolve_current``) and load from the resolved folder, so a promotion
during a load cannot mix files of two packages. Leftover temp files of a crash are removed on the next write.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from deploy.runtime.hotswap import CURRENT_LINK as CURRENT
from deploy.runtime.hotswap import PACKAGES_DIR as PACKAGES
from deploy.runtime.hotswap import TMP_PREFIX
from deploy.runtime.package import PolicyPackage, load_package

CHECKPOINTS = "checkpoints"
PREVIOUS = "previous"
HISTORY = "history.jsonl"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(path: Path) -> None:
    """fsync every file under ``path``, then every folder bottom-up."""
    for folder, _, files in os.walk(path, topdown=False):
        for name in files:
            fd = os.open(Path(folder) / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(folder))


class PackageStore:
    """A folder of installed packages with ``current`` / ``previous`` symlinks (see the module docstring).

    :param root: the store folder (created on first use).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.packages = self.root / PACKAGES
        self.checkpoints = self.root / CHECKPOINTS

    # Reading -------------------------------------------------------------------------------------------------
    def _target(self, link: str) -> Path | None:
        path = self.root / link
        if not path.is_symlink():
            return None
        return (self.root / os.readlink(path)).resolve()

    def resolve_current(self) -> Path:
        """The folder ``current`` points at, resolved once (load from this path, not through the link)."""
        target = self._target(CURRENT)
        if target is None:
            raise FileNotFoundError(f"store {self.root} has no current package; install and promote one first")
        return target

    def current_name(self) -> str | None:
        target = self._target(CURRENT)
        return None if target is None else target.name

    def previous_name(self) -> str | None:
        target = self._target(PREVIOUS)
        return None if target is None else target.name

    def load_current(self) -> PolicyPackage:
        """The running package, hash-verified."""
        return load_package(self.resolve_current())

    def installed(self) -> list[str]:
        if not self.packages.is_dir():
            return []
        return sorted(p.name for p in self.packages.iterdir() if p.is_dir() and not p.name.startswith(TMP_PREFIX))

    def checkpoint_path(self, name: str) -> Path:
        return self.checkpoints / f"{name}.zip"

    def history(self) -> list[dict[str, Any]]:
        path = self.root / HISTORY
        if not path.is_file():
            return []
        lines = path.read_text().splitlines()
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a torn last line after a crash
                continue
        return out

    # Writing -------------------------------------------------------------------------------------------------
    def _cleanup(self) -> None:
        """Remove temp folders and links a crash left behind."""
        for folder in (self.packages, self.checkpoints, self.root):
            if not folder.is_dir():
                continue
            for path in folder.iterdir():
                if not path.name.startswith(TMP_PREFIX):
                    continue
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()

    def _log(self, event: dict[str, Any]) -> None:
        event = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **event}
        with open(self.root / HISTORY, "a") as f:
            f.write(json.dumps(event) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def install(self, package_dir: str | Path, name: str, checkpoint: str | Path | None = None) -> Path:
        """Copy a verified package into the store as ``packages/<name>`` (atomic; see the module docstring).

        :param package_dir: a policy package folder (e.g. the exporter's output).
        :param name: the store name (letters, digits, ``-_.``); must be new.
        :param checkpoint: optional GRPO checkpoint to keep with it (for the next fine-tuning round).
        """
        if not name or name.startswith(".") or any(not (c.isalnum() or c in "-_.") for c in name):
            raise ValueError(f"package name {name!r} must be non-empty, not start with '.', and use [A-Za-z0-9-_.]")
        load_package(package_dir)  # refuse a broken package before copying anything
        final = self.packages / name
        if final.exists():
            raise FileExistsError(f"{final} is already installed; installed packages are never overwritten")
        self.packages.mkdir(parents=True, exist_ok=True)
        self._cleanup()
        if checkpoint is not None:
            self.checkpoints.mkdir(parents=True, exist_ok=True)
            tmp_ckpt = self.checkpoints / f"{TMP_PREFIX}{name}-{uuid.uuid4().hex}.zip"
            shutil.copyfile(checkpoint, tmp_ckpt)
            _fsync_tree(self.checkpoints)
            os.replace(tmp_ckpt, self.checkpoint_path(name))
            _fsync_dir(self.checkpoints)
        tmp = self.packages / f"{TMP_PREFIX}{name}-{uuid.uuid4().hex}"
        shutil.copytree(package_dir, tmp)
        _fsync_tree(tmp)
        load_package(tmp)  # the copy is whole and matches its manifest
        os.rename(tmp, final)
        _fsync_dir(self.packages)
        self._log({"event": "install", "name": name})
        return final

    def _point(self, link: str, target_name: str) -> None:
        tmp = self.root / f"{TMP_PREFIX}{link}-{uuid.uuid4().hex}"
        os.symlink(Path(PACKAGES) / target_name, tmp)
        os.replace(tmp, self.root / link)
        _fsync_dir(self.root)

    def promote(self, name: str, gate: dict[str, Any] | None = None) -> None:
        """Make installed package ``name`` current; the old current becomes ``previous``."""
        package = self.packages / name
        if not package.is_dir() or name.startswith(TMP_PREFIX):
            raise FileNotFoundError(f"{package} is not installed; install() it first")
        load_package(package)
        self._cleanup()
        old = self.current_name()
        if old == name:
            return
        if old is not None:
            self._point(PREVIOUS, old)
        self._point(CURRENT, name)
        self._log({"event": "promote", "name": name, "previous": old, "gate": gate})

    def reject(self, name: str, gate: dict[str, Any]) -> None:
        """Record that candidate ``name`` failed the gate (nothing is installed or changed)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._log({"event": "reject", "name": name, "gate": gate})

    def rollback(self) -> str:
        """Swap ``current`` and ``previous``; returns the name now current."""
        old, prev = self.current_name(), self.previous_name()
        if prev is None or old is None:
            raise RuntimeError(f"store {self.root} has no previous package to roll back to")
        self._cleanup()
        load_package(self.packages / prev)
        self._point(CURRENT, prev)
        self._point(PREVIOUS, old)
        self._log({"event": "rollback", "name": prev, "previous": old})
        return prev


def promote_if_passed(
    store: PackageStore,
    candidate_dir: str | Path,
    name: str,
    gate_report: dict[str, Any],
    checkpoint: str | Path | None = None,
) -> bool:
    """Install and promote the candidate when ``gate_report["passed"] is True``; otherwise record the rejection.

    :param gate_report: ``GateReport.to_dict()``; its ``passed`` must be a bool (a report read back from text with
        ``"passed": "false"`` is refused with ``ValueError``, nothing installed or recorded).
    """
    passed = gate_report.get("passed")
    if not isinstance(passed, bool):
        raise ValueError(
            f"gate_report['passed'] must be a bool, got {passed!r} ({type(passed).__name__}); pass the gate's "
            "GateReport.to_dict() (or a report parsed from its JSON), not a hand-edited or stringified one"
        )
    if not passed:
        store.reject(name, gate_report)
        return False
    store.install(candidate_dir, name, checkpoint)
    store.promote(name, gate_report)
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m deploy.finetune.promote {status,rollback,promote NAME} --store DIR``."""
    parser = argparse.ArgumentParser(prog="python -m deploy.finetune.promote", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["status", "rollback", "promote"])
    parser.add_argument("name", nargs="?", help="package name (promote only)")
    parser.add_argument("--store", required=True, help="the package store folder")
    args = parser.parse_args(argv)
    store = PackageStore(args.store)
    try:
        if args.command == "rollback":
            print(f"current: {store.rollback()} (previous: {store.previous_name()})")
        elif args.command == "promote":
            if not args.name:
                parser.error("promote needs a package name")
            store.promote(args.name)
            print(f"current: {args.name} (previous: {store.previous_name()})")
        else:
            print(
                json.dumps(
                    {
                        "current": store.current_name(),
                        "previous": store.previous_name(),
                        "installed": store.installed(),
                    },
                    indent=2,
                )
            )
    except (FileNotFoundError, RuntimeError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
