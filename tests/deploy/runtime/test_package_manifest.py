"""Manifest fields: a sealed manifest (all hashes match) that is misspelt, mistyped or contradicts itself is refused
at load with a message naming the field; model files a backend cannot load are refused naming the file (no torch).

Every package here is re-sealed after the edit (``reseal``), so only the field checks can refuse it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from package_fixtures import CONTRACT, make_package, reseal

from deploy.contract import fetch_reach_contract
from deploy.runtime.backends import ModelLoadError, make_backend
from deploy.runtime.package import PackageError, load_package, write_manifest


def _set(path: str, value: Any):
    """An edit that sets the manifest field ``path`` ("a.b") to ``value``."""

    def edit(manifest: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        section = manifest
        for key in parents:
            section = section[key]
        section[last] = value

    return edit


def _rename(path: str, new: str):
    """An edit that renames the manifest field ``path`` ("a.b") to ``new`` (a misspelling), keeping its value."""

    def edit(manifest: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        section = manifest
        for key in parents:
            section = section[key]
        section[new] = section.pop(last)

    return edit


def exporter_like(manifest: dict[str, Any]) -> None:
    """Add every section the exporter writes (deploy/export/exporter.py ``_manifest``), consistent with the contract
    (point_reach, history 2: state 6, observation 12, flat 18, action 3, 0.04 s per step, 0.05 m per unit)."""
    manifest |= {
        "created_utc": "2026-01-01T00:00:00Z",
        "pending_commands": {
            "location": "observation",
            "start": 6,
            "stop": 12,
            "rows": 2,
            "row_size": 3,
            "order": "oldest_first",
            "meaning": "the last history_len commands sent",
        },
        "trained_for": {
            "robot_id": "sim",
            "spec_date": "2026-01-01",
            "control_period_s": 0.04,
            "command_scale_m": 0.05,
            "action_delay_steps": {"low": 2, "high": 2},
            "observation_noise_std_m": [0.0, 0.0, 0.0],
            "action_gain": 1.0,
        },
        "action_delay_s": {"low": 0.08, "high": 0.08},
        "control_period_s": 0.04,
        "provenance": {"algorithm": "test"},
        "export_config": {"n_parity_obs": 16},
        "checks": {"passed": True, "problems": []},
        "versions": {"numpy": np.__version__},
        "ewc": None,
    }
    manifest["io"] |= {"input": "obs", "output": "action", "dtype": "float32"}


def test_a_manifest_with_every_section_the_exporter_writes_loads(tmp_path: Path) -> None:
    package = load_package(reseal(make_package(tmp_path / "pkg"), exporter_like))
    assert package.action_delay_steps == (2, 2)
    assert package.make_backend("ort-cpu", "fp32").output_dim == CONTRACT.action_dim


REFUSED = {
    # the p03 cases: the delay range must fit the history the policy sees, and its keys and types are checked
    "delay_2_to_6_with_history_2": (
        _set("action_delay_steps", {"low": 2, "high": 6}),
        r"trained for delays 2\.\.6 .* only the last 2 commands \(contract\.history_len\)",
    ),
    "delay_key_misspelt": (
        _set("action_delay_steps", {"low": 2, "hihg": 2}),
        r"'action_delay_steps' has unknown key\(s\) \['hihg'\] .* allowed keys are \['low', 'high'\]",
    ),
    "delay_as_strings": (_set("action_delay_steps", {"low": "2", "high": "2"}), "action_delay_steps.low.*integer"),
    "delay_low_above_high": (_set("action_delay_steps", {"low": 2, "high": 1}), r"2\.\.1 .* is not a delay range"),
    "delay_negative": (_set("action_delay_steps", {"low": -1, "high": 2}), "is not a delay range"),
    "contract_key_misspelt": (_rename("contract.history_order", "histroy_order"), r"unknown contract key.*histroy"),
    "contract_history_as_string": (_set("contract.history_len", "2"), "history_len must be an integer"),
    "top_level_period_contradicts_contract": (
        _set("control_period_s", 0.02),
        r"control_period_s is 0\.02 s, the contract's control_period_s 0\.04 s: the manifest contradicts itself",
    ),
    "checks_passed_as_string": (
        _set("checks", {"passed": "false", "problems": ["parity failed"]}),
        "checks.passed.*JSON boolean",
    ),
    "checks_misspelt": (
        _set("check", {"passed": False, "problems": ["parity failed"]}),
        r"the manifest has unknown key\(s\) \['check'\].*'checks'",
    ),
    "checks_passed_with_problems": (
        _set("checks", {"passed": True, "problems": ["int8 parity"]}),
        r"checks.passed is true but checks.problems lists 1",
    ),
    "selftest_misspelt": (_rename("selftest", "self_test"), r"unknown key\(s\) \['self_test'\]"),
    "variants_as_a_list": (_set("variants", ["fp32"]), "field 'variants' is .*an object mapping a variant"),
    "variant_file_not_a_string": (_set("variants.fp32", 3), "variant 'fp32' points at a file the manifest does not"),
    "delay_seconds_contradict_steps": (
        _set("action_delay_s", {"low": 0.08, "high": 0.12}),
        r"action_delay_s.high is 0\.12, but action_delay_steps.high 2 x control_period_s 0\.04",
    ),
    "pending_rows_contradict_history": (_set("pending_commands.rows", 3), r"pending_commands.rows is 3.*says 2"),
    "trained_for_delay_contradicts": (
        _set("trained_for.action_delay_steps", {"low": 2, "high": 3}),
        r"trained_for.action_delay_steps 2\.\.3 differs from action_delay_steps 2\.\.2",
    ),
    "trained_for_scale_contradicts": (_set("trained_for.command_scale_m", 0.1), "trained_for.command_scale_m is 0.1"),
    "io_input_name": (_set("io.input", "observation"), "field 'io.input' .* must be \"obs\""),
    "engine_built_without_engine_file": (
        _set("engine.status", "built"),
        "engine.status is 'built' but the package has no 'engine' variant",
    ),
    "engine_key_misspelt": (
        _rename("engine.build_command", "build_cmd"),
        r"'engine' has unknown key\(s\) \['build_cmd'\]",
    ),
    "selftest_tolerance_for_unknown_variant": (
        _set("selftest.tolerance", {"fp33": 1e-5}),
        "field 'selftest.tolerance'",
    ),
    "ewc_null_but_file_present": (_set("ewc", None), "ewc is null but the package holds ewc.npz"),
}


@pytest.mark.parametrize(("edit", "match"), list(REFUSED.values()), ids=list(REFUSED))
def test_a_misspelt_mistyped_or_self_contradicting_manifest_is_refused_naming_the_field(
    tmp_path: Path, edit, match: str
) -> None:
    folder = make_package(tmp_path / "pkg", ewc=True)

    def both(manifest: dict[str, Any]) -> None:
        exporter_like(manifest)
        manifest["ewc"] = {"file": "ewc.npz"}
        edit(manifest)

    reseal(folder, both)
    with pytest.raises(PackageError, match=match) as err:
        load_package(folder)
    assert "manifest.json" in str(err.value) or "pkg" in str(err.value)


def test_a_sha256_entry_that_is_not_a_digest_is_refused(tmp_path: Path) -> None:
    folder = make_package(tmp_path / "pkg")  # not resealed with reseal(): that would recompute the digests
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["report.md"] = manifest["files"]["report.md"].upper()
    write_manifest(folder, manifest)
    with pytest.raises(PackageError, match=r"files.report.md.*64 lowercase hex"):
        load_package(folder)


def test_a_fine_tuned_package_may_be_trained_for_a_longer_delay_than_its_history(tmp_path: Path) -> None:
    """launch.job_finetune widens the range to the robot's new delay (tuned on its logs, gated on it) and keeps the
    running policy's history: the manifest records that with provenance.finetuned_from."""
    folder = make_package(
        tmp_path / "pkg", action_delay_steps={"low": 2, "high": 6}, provenance={"finetuned_from": "base"}
    )
    assert load_package(folder).action_delay_steps == (2, 6)


def test_a_known_task_contract_that_moved_its_position_is_refused(tmp_path: Path) -> None:
    """fetch_reach with position_slice [5, 8] (the gripper velocity): goal_dim values inside the state, but not
    FetchReach's layout; the runtime would take the velocity for the position."""
    fetch = fetch_reach_contract(2)
    contract = fetch.to_dict() | {"position_slice": [5, 8]}
    io = {"input_shape": ["batch", fetch.flat_dim], "output_shape": ["batch", fetch.action_dim]}
    folder = make_package(tmp_path / "pkg", selftest=False, contract=contract, io=io)
    with pytest.raises(
        PackageError, match=r"names the 'fetch_reach' task but differs from it: position_slice \(5, 8\)"
    ):
        load_package(folder)


@pytest.mark.parametrize("slice_", [[0, 2], [8, 11]])
def test_a_contract_position_slice_outside_the_state_is_refused_at_load(tmp_path: Path, slice_: list[int]) -> None:
    contract = CONTRACT.to_dict() | {"position_slice": slice_}
    with pytest.raises(PackageError, match=r"invalid contract section: position_slice .* must hold the goal_dim = 3"):
        load_package(make_package(tmp_path / "pkg", contract=contract))


# Self-test: required unless the caller opts out ---------------------------------------------------------------------
def test_make_backend_refuses_a_package_without_a_self_test_set_unless_told_to_skip_it(tmp_path: Path) -> None:
    package = load_package(make_package(tmp_path / "pkg", selftest=False))
    with pytest.raises(PackageError, match=r"manifest.json: has no 'selftest' section.*self_test=False"):
        package.make_backend("ort-cpu", "fp32")
    assert package.make_backend("ort-cpu", "fp32", self_test=False).output_dim == CONTRACT.action_dim


def test_a_self_test_file_that_is_not_a_self_test_set_is_refused_naming_it(tmp_path: Path) -> None:
    folder = make_package(tmp_path / "pkg")
    (folder / "selftest.npz").write_bytes(b"not an npz")
    package = load_package(reseal(folder, lambda m: None))
    with pytest.raises(PackageError, match="selftest.npz: is not a self-test set with 'obs' and 'actions'"):
        package.make_backend("ort-cpu", "fp32")


def test_a_self_test_set_of_another_size_than_the_manifest_says_is_refused(tmp_path: Path) -> None:
    package = load_package(reseal(make_package(tmp_path / "pkg"), _set("selftest.n_obs", 17)))  # the file has 16
    with pytest.raises(
        PackageError, match="selftest.npz: holds 16 observations, the manifest's selftest.n_obs says 17"
    ):
        package.make_backend("ort-cpu", "fp32")


# Model files a backend cannot load -------------------------------------------------------------------------------
def test_a_variant_pointing_at_a_file_that_is_not_a_model_is_refused_naming_the_file(tmp_path: Path) -> None:
    package = load_package(reseal(make_package(tmp_path / "pkg"), _set("variants.fp32", "report.md")))
    with pytest.raises(PackageError, match=r"report.md: variant 'fp32' cannot be loaded: onnxruntime cannot load"):
        package.make_backend("ort-cpu", "fp32")


def test_an_empty_model_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    folder = make_package(tmp_path / "pkg")
    (folder / "policy.onnx").write_bytes(b"")
    package = load_package(reseal(folder, lambda m: None))
    with pytest.raises(PackageError, match=r"policy.onnx: variant 'fp32' cannot be loaded: .*empty \(0 bytes\)"):
        package.make_backend("ort-cpu", "fp32")


@pytest.mark.parametrize(("model", "match"), [(b"", "empty"), (b"# report\n", "cannot load these 9 bytes")])
def test_the_backend_says_which_bytes_are_not_a_model(model: bytes, match: str) -> None:
    with pytest.raises(ModelLoadError, match=match):
        make_backend("ort-cpu", model)
