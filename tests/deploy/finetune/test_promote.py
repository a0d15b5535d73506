"""Package store: atomic install / promote / rollback; a crash at any step leaves a whole, loadable package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from deploy.finetune.promote import PackageStore, main, promote_if_passed
from deploy.runtime.hotswap import PolicySlot
from deploy.runtime.package import load_package

PASSED = {"passed": True, "reasons": []}
REPO = Path(__file__).resolve().parents[3]


def test_install_promote_rollback_round_trip(tmp_path: Path, packages: dict[str, Path], capsys) -> None:
    store = PackageStore(tmp_path / "store")
    assert promote_if_passed(store, packages["good"], "v1", PASSED)
    assert store.current_name() == "v1" and store.previous_name() is None
    assert promote_if_passed(store, packages["good2"], "v2", PASSED)
    assert (store.current_name(), store.previous_name()) == ("v2", "v1")
    assert store.load_current().manifest["provenance"]["gain"] == 0.45
    # Rollback is one command.
    assert main(["rollback", "--store", str(store.root)]) == 0
    assert (store.current_name(), store.previous_name()) == ("v1", "v2")
    assert store.load_current().manifest["provenance"]["gain"] == 0.5
    assert store.rollback() == "v2"
    assert [e["event"] for e in store.history()] == ["install", "promote", "install", "promote", "rollback", "rollback"]
    assert main(["status", "--store", str(store.root)]) == 0
    assert json.loads(capsys.readouterr().out.split("\n", 1)[1])["current"] == "v2"
    with pytest.raises(FileExistsError):
        store.install(packages["good"], "v1")


def test_rejected_candidate_changes_nothing(tmp_path: Path, packages: dict[str, Path]) -> None:
    store = PackageStore(tmp_path / "store")
    promote_if_passed(store, packages["good"], "v1", PASSED)
    report = {"passed": False, "reasons": ["(a) original-task success 0.000 < running 1.000 - margin 0.05"]}
    assert not promote_if_passed(store, packages["broken"], "v2", report)
    assert store.current_name() == "v1" and store.installed() == ["v1"]
    assert store.history()[-1]["event"] == "reject"


@pytest.mark.parametrize("report", [{"passed": "false"}, {"passed": "true"}, {"passed": 1}, {"passed": None}, {}])
def test_a_report_whose_passed_is_not_a_bool_is_refused(tmp_path: Path, packages: dict[str, Path], report) -> None:
    # "false" (a report read back from text) is truthy: it must neither promote nor be taken for a verdict.
    store = PackageStore(tmp_path / "store")
    promote_if_passed(store, packages["good"], "v1", PASSED)
    events = len(store.history())
    with pytest.raises(ValueError, match=r"gate_report\['passed'\] must be a bool, got"):
        promote_if_passed(store, packages["good2"], "v2", report)
    assert store.current_name() == "v1" and store.installed() == ["v1"]
    assert len(store.history()) == events  # nothing installed, promoted or recorded


def test_corrupt_package_is_never_installed(tmp_path: Path, packages: dict[str, Path]) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(packages["good2"], bad)
    data = bytearray((bad / "policy.onnx").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (bad / "policy.onnx").write_bytes(bytes(data))
    store = PackageStore(tmp_path / "store")
    with pytest.raises(ValueError, match="sha256"):
        store.install(bad, "v2")
    assert store.installed() == []


class SimulatedCrashError(Exception):
    pass


FAULT_POINTS = [(os, "replace"), (os, "rename"), (os, "symlink"), (os, "fsync"), (shutil, "copy2")]


def _count_calls(monkeypatch, crash_at: int | None) -> list[str]:
    """Wrap the filesystem calls of a promotion; raise SimulatedCrashError at call number ``crash_at`` (0-based)."""
    calls: list[str] = []
    for module, name in FAULT_POINTS:
        real = getattr(module, name)

        def wrapped(*args, _real=real, _name=name, **kwargs):
            if crash_at is not None and len(calls) == crash_at:
                calls.append(_name)
                raise SimulatedCrashError(f"crash before {_name} #{crash_at}")
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapped)
    return calls


def test_crash_at_every_step_of_a_promotion_leaves_a_loadable_package(
    tmp_path: Path, packages: dict[str, Path]
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        probe = PackageStore(tmp_path / "probe")
        promote_if_passed(probe, packages["good"], "v1", PASSED)
        calls = _count_calls(mp, crash_at=None)
        promote_if_passed(probe, packages["good2"], "v2", PASSED)
    n_points = len(calls)
    assert n_points >= 10  # copies, fsyncs, the rename and two symlink swaps
    outcomes = set()
    for k in range(n_points):
        store = PackageStore(tmp_path / f"store{k}")
        promote_if_passed(store, packages["good"], "v1", PASSED)
        with pytest.MonkeyPatch.context() as mp:
            _count_calls(mp, crash_at=k)
            with pytest.raises(SimulatedCrashError):
                promote_if_passed(store, packages["good2"], "v2", PASSED)
        current = store.load_current()  # whole and hash-verified after the crash
        assert store.current_name() in ("v1", "v2")
        outcomes.add(store.current_name())
        assert current.manifest["provenance"]["gain"] == {"v1": 0.5, "v2": 0.45}[store.current_name()]
        # The next attempt (after the crash) completes and cleans up the leftovers.
        if store.current_name() == "v1":
            if "v2" in store.installed():
                store.promote("v2", PASSED)
            else:
                promote_if_passed(store, packages["good2"], "v2", PASSED)
        assert store.current_name() == "v2"
        assert not [p for p in store.root.rglob(".tmp-*")]
    # Crashes before the symlink swap keep the old package, crashes after it (fsync, history) the new one.
    assert outcomes == {"v1", "v2"}


KILL_SCRIPT = textwrap.dedent(
    """
    import os, shutil, sys
    from deploy.finetune.promote import PackageStore, promote_if_passed
    kill_at, store_dir, candidate = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    count = [0]
    for module, name in [(os, "replace"), (os, "rename"), (os, "symlink"), (os, "fsync"), (shutil, "copy2")]:
        real = getattr(module, name)
        def wrapped(*args, _real=real, **kwargs):
            if count[0] == kill_at:
                os._exit(17)  # the process dies here: no finally, no cleanup
            count[0] += 1
            out = _real(*args, **kwargs)
            if count[0] == kill_at and kill_at % 2:
                os._exit(17)  # odd points: die right *after* the call instead
            return out
        setattr(module, name, wrapped)
    promote_if_passed(PackageStore(store_dir), candidate, "v2", {"passed": True})
    """
)


def test_process_killed_mid_promotion_leaves_a_loadable_package(tmp_path: Path, packages: dict[str, Path]) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    k, died = 0, 0
    while True:
        store = PackageStore(tmp_path / f"kill{k}")
        promote_if_passed(store, packages["good"], "v1", PASSED)
        proc = subprocess.run(
            [sys.executable, "-c", KILL_SCRIPT, str(k), str(store.root), str(packages["good2"])],
            env=env,
            capture_output=True,
            timeout=120,
        )
        assert proc.returncode in (0, 17), proc.stderr.decode()[-2000:]
        assert store.current_name() in ("v1", "v2")
        load_package(store.resolve_current())
        if proc.returncode == 0:
            assert store.current_name() == "v2"
            break
        died += 1
        k += 1
    assert died >= 10


def test_policy_slot_swaps_to_the_promoted_package(tmp_path: Path, packages: dict[str, Path]) -> None:
    store = PackageStore(tmp_path / "store")
    promote_if_passed(store, packages["good"], "v1", PASSED)
    flat = load_package(packages["good"]).contract.flat_dim
    probe = np.zeros((4, flat), dtype=np.float32)
    probe[:, -3:] = 0.05  # goal 5 cm away on every axis
    slot = PolicySlot(load_package(store.resolve_current()).make_backend(), label="v1", probe=probe)
    promote_if_passed(store, packages["good2"], "v2", PASSED)
    entry = slot.swap_package(store.root / "current")
    assert entry.label == "v2"
    np.testing.assert_allclose(slot.current()(probe[:1]), [[0.45, 0.45, 0.45]], rtol=1e-5)
    assert slot.follow(store.root / "current") is None  # already running v2
    store.rollback()
    assert slot.follow(store.root / "current").label == "v1"  # the store's rollback reaches the running slot
    np.testing.assert_allclose(slot.current()(probe[:1]), [[0.5, 0.5, 0.5]], rtol=1e-5)
