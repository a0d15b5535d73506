"""End-to-end export of a small trained policy on PointReach: files, checks, parity, closed loop, contract."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from export_fixtures import POINT_ENV_ID, POINT_ENV_KWARGS, TinyGoalPolicy, flip_byte

from deploy.contract import point_reach_contract
from deploy.export.onnx_fp32 import check_onnx
from deploy.export.rollouts import closed_loop_success, collect_observations, make_env
from deploy.export.verify import PARITY_TOLERANCE, SUCCESS_TOLERANCE_PP, success_gap_pp
from deploy.runtime.package import PackageError, load_package


def test_package_has_every_file_and_a_passing_report(point_package: Path) -> None:
    names = {p.name for p in point_package.iterdir()}
    assert {"manifest.json", "policy.onnx", "policy_fp16.onnx", "policy_int8.onnx", "report.md", "report.json"} <= names
    assert "policy.engine" not in names  # no TensorRT here: recorded as "build on the target"
    report = json.loads((point_package / "report.json").read_text())
    assert report["problems"] == []
    assert report["n_parity_obs"] >= 10_000
    assert report["n_episodes"] >= 100
    assert "PASS" in (point_package / "report.md").read_text()


@pytest.mark.parametrize("variant", ["fp32", "fp16", "int8"])
def test_every_variant_passes_the_onnx_checker_with_the_io_convention(point_package: Path, variant: str) -> None:
    package = load_package(point_package)
    model = check_onnx(package.model_path(variant), package.contract.flat_dim, package.contract.action_dim)
    types = {init.data_type for init in model.graph.initializer}
    if variant == "fp16":
        assert onnx.TensorProto.FLOAT16 in types
    if variant == "int8":
        assert onnx.TensorProto.INT8 in types  # int8 weights
        assert any(node.op_type == "QuantizeLinear" for node in model.graph.node)


@pytest.mark.parametrize("variant", ["fp32", "fp16", "int8"])
def test_parity_against_torch_within_tolerance(point_package: Path, variant: str) -> None:
    row = json.loads((point_package / "report.json").read_text())["variants"][variant]
    print(f"{variant}: max {row['parity']['max_abs']:.3g}, p99 {row['parity']['p99_abs']:.3g}")
    assert row["parity"]["n_obs"] >= 10_000
    assert row["parity"]["max_abs"] <= PARITY_TOLERANCE[variant]
    assert row["parity"]["p99_abs"] <= row["parity"]["max_abs"]


def test_closed_loop_through_the_loaded_package_matches_torch(point_package: Path, bc_policy: TinyGoalPolicy) -> None:
    """Re-run the 100 seeded episodes independently, through load_package(...).make_backend, per variant."""
    package = load_package(point_package)
    report = json.loads((point_package / "report.json").read_text())
    seeds = report["episode_seeds"]
    env = make_env(POINT_ENV_ID, POINT_ENV_KWARGS)

    def torch_act(obs: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return bc_policy(torch.from_numpy(obs)).numpy()

    torch_success = closed_loop_success(env, torch_act, seeds).mean()
    assert torch_success == pytest.approx(report["torch"]["success_rate"])
    assert torch_success >= 0.9  # the fixture policy is good: the comparison means something
    for variant in ("fp32", "fp16", "int8"):
        success = closed_loop_success(env, package.make_backend("ort-cpu", variant), seeds).mean()
        assert success == pytest.approx(report["variants"][variant]["success_rate"])
        assert abs(success_gap_pp(success, torch_success)) <= SUCCESS_TOLERANCE_PP, variant


def test_env_dict_observation_through_contract_and_onnx_equals_torch_on_the_dict(
    point_package: Path, bc_policy: TinyGoalPolicy
) -> None:
    """The contract holds end to end: env dict obs -> manifest contract.flatten -> ONNX == torch on the dict."""
    package = load_package(point_package)
    backend = package.make_backend("ort-cpu", "fp32")
    env = make_env(POINT_ENV_ID, POINT_ENV_KWARGS)
    checked = 0
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        for _ in range(20):
            onnx_action = backend(package.contract.flatten(obs)[None])[0]
            torch_action = bc_policy.predict_dict(obs)
            np.testing.assert_allclose(onnx_action, torch_action, atol=PARITY_TOLERANCE["fp32"], rtol=0)
            obs, *_ = env.step(onnx_action.astype(np.float64))
            checked += 1
    assert checked == 60


def test_manifest_records_contract_delay_provenance_versions_and_hashes(point_package: Path) -> None:
    package = load_package(point_package)
    manifest = package.manifest
    assert package.contract == point_reach_contract(POINT_ENV_KWARGS["delay"])
    assert manifest["action_delay_steps"] == {"low": 2, "high": 2}
    assert manifest["action_delay_s"]["high"] == pytest.approx(2 * package.contract.control_period_s)
    assert manifest["pending_commands"]["start"] == package.contract.state_dim
    assert manifest["pending_commands"]["stop"] == package.contract.observation_dim
    assert manifest["provenance"]["env_id"] == POINT_ENV_ID
    assert manifest["provenance"]["algorithm"].startswith("behaviour cloning")
    assert {"numpy", "torch", "onnx", "onnxruntime"} <= set(manifest["versions"])
    assert set(manifest["files"]) == {p.name for p in point_package.iterdir()} - {"manifest.json"}
    assert manifest["engine"]["status"] == "not built"
    assert "tensorrt_build" in manifest["engine"]["build_command"]
    assert manifest["checks"] == {"passed": True, "problems": []}
    assert manifest["trained_for"] is None  # the point-mass env has no robot spec
    with pytest.raises(
        PackageError, match="build it on the target device with: python -m deploy.export.tensorrt_build"
    ):
        package.model_path("engine")


def test_a_flipped_byte_in_any_package_file_is_refused_naming_the_file(point_package: Path, tmp_path: Path) -> None:
    names = sorted(p.name for p in point_package.iterdir())
    assert len(names) >= 6
    for name in names:
        copy = tmp_path / name
        shutil.copytree(point_package, copy)
        flip_byte(copy / name)
        with pytest.raises(PackageError) as err:
            load_package(copy)
        assert name in str(err.value), f"error for a tampered {name} does not name it: {err.value}"


def test_calibration_and_parity_observations_come_from_separate_rollouts(bc_policy: TinyGoalPolicy) -> None:
    env = make_env(POINT_ENV_ID, POINT_ENV_KWARGS)

    def act(obs: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return bc_policy(torch.from_numpy(obs)).numpy()

    a = collect_observations(env, act, 120, seed=1)
    b = collect_observations(env, act, 120, seed=1)
    c = collect_observations(env, act, 120, seed=500)
    np.testing.assert_array_equal(a, b)  # seeded: reproducible
    assert not np.array_equal(a, c)
    assert a.shape == (120, point_reach_contract(2).flat_dim) and a.dtype == np.float32


def test_every_backend_made_from_the_package_passes_the_shipped_self_test(point_package: Path) -> None:
    package = load_package(point_package)
    assert package.manifest["selftest"]["n_obs"] == 1_024
    for variant in ("fp32", "fp16", "int8"):
        backend = package.make_backend("ort-cpu", variant, self_test=False)
        err = package.self_test(backend, variant)
        assert 0 <= err <= PARITY_TOLERANCE[variant]
        with pytest.raises(PackageError, match="do not run this backend on the robot"):
            package.self_test(lambda obs, b=backend: b(obs) + 0.1, variant)
