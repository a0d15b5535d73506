"""TensorRT engine build: clear skip without TensorRT, and the 10.x (FP16 flag) / 11.x (strongly typed) API paths
against a fake ``tensorrt`` that records what the builder was asked to do (no GPU here)."""

from __future__ import annotations

import json
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from export_fixtures import POINT_ENV_ID, POINT_ENV_KWARGS, TinyGoalPolicy

from deploy.export import tensorrt_build
from deploy.export.exporter import ExportConfig, export_package
from deploy.export.tensorrt_build import TensorRTUnavailableError, build_engine, build_into_package, main
from deploy.runtime import backends
from deploy.runtime.backends import OrtBackend
from deploy.runtime.package import PackageError, load_package

FLAT_DIM = 18


class FakeLayer:
    def __init__(self, name: str, kind: str, inputs: list[str]) -> None:
        self.name, self.type = name, kind
        self._inputs = [types.SimpleNamespace(name=n) for n in inputs]
        self._outputs = [types.SimpleNamespace(name=f"{name}_out")]
        self.precision: str | None = None
        self.output_types: dict[int, str] = {}
        self.num_inputs, self.num_outputs = len(self._inputs), 1

    def get_input(self, i: int) -> types.SimpleNamespace:
        return self._inputs[i]

    def get_output(self, i: int) -> types.SimpleNamespace:
        return self._outputs[i]

    def set_output_type(self, i: int, dtype: str) -> None:
        self.output_types[i] = dtype


class _Recorder:
    def __init__(self) -> None:
        self.network_flags: int | None = None
        self.parsed: bytes | None = None
        self.flags: list[str] = []
        self.profile: tuple | None = None
        self.layers = [
            FakeLayer("mean", "constant", []),
            FakeLayer("sub", "ew", ["obs", "mean_out"]),
            FakeLayer("div", "ew", ["sub_out", "std"]),
            FakeLayer("gemm", "mm", ["div_out", "w0"]),
            FakeLayer("silu", "act", ["gemm_out"]),
            FakeLayer("head", "mm", ["silu_out", "w1"]),
        ]


class OrtAsEngine:
    """Stands in for TensorRTBackend: the fake "engine" is the ONNX it was built from, run with onnxruntime (plus an
    optional offset to make a wrong engine)."""

    offset = 0.0

    def __init__(self, engine: bytes, device_id: int = 0) -> None:
        self.name, self.max_batch, self.compute_precision = "fake-tensorrt", 32, "fp16"
        self._backend = OrtBackend(engine)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self._backend(obs) + OrtAsEngine.offset

    def close(self) -> None:
        pass


def fake_tensorrt(major: int, recorder: _Recorder) -> types.ModuleType:
    trt = types.ModuleType("tensorrt")
    trt.__version__ = f"{major}.0.0-fake"
    trt.Logger = type("Logger", (), {"WARNING": 2, "ERROR": 3, "__init__": lambda self, level: None})
    flag_names = {"TF32": 1, "OBEY_PRECISION_CONSTRAINTS": 2} | ({"FP16": 0} if major < 11 else {})  # 11.x: no FP16
    trt.BuilderFlag = types.SimpleNamespace(**flag_names)
    trt.LayerType = types.SimpleNamespace(MATRIX_MULTIPLY="mm", ELEMENTWISE="ew", ACTIVATION="act")
    trt.float32 = "fp32"
    trt.NetworkDefinitionCreationFlag = types.SimpleNamespace(STRONGLY_TYPED=5)
    trt.MemoryPoolType = types.SimpleNamespace(WORKSPACE="workspace")

    class Network:
        # a constant, the normaliser (sub, div), then the MLP: only sub and div are pinned to fp32 in flag mode
        layers = recorder.layers

        num_inputs = 1

        def get_input(self, index: int) -> types.SimpleNamespace:
            return types.SimpleNamespace(name="obs", shape=(-1, FLAT_DIM))

        @property
        def num_layers(self) -> int:
            return len(self.layers)

        def get_layer(self, index: int) -> FakeLayer:
            return self.layers[index]

    class Parser:
        num_errors = 0

        def __init__(self, network: Network, logger: object) -> None:
            pass

        def parse(self, data: bytes) -> bool:
            recorder.parsed = data
            return True

    class Profile:
        def set_shape(self, name: str, lo: tuple, opt: tuple, hi: tuple) -> None:
            recorder.profile = (name, lo, opt, hi)

    class Config:
        def set_memory_pool_limit(self, pool: str, size: int) -> None:
            pass

        def set_flag(self, flag: int) -> None:
            recorder.flags.append({v: k for k, v in flag_names.items()}[flag])

        def add_optimization_profile(self, profile: Profile) -> None:
            pass

    class Builder:
        def __init__(self, logger: object) -> None:
            pass

        def create_network(self, flags: int) -> Network:
            recorder.network_flags = flags
            return Network()

        def create_builder_config(self) -> Config:
            return Config()

        def create_optimization_profile(self) -> Profile:
            return Profile()

        def build_serialized_network(self, network: Network, config: Config) -> bytes:
            return recorder.parsed  # the "engine" is the ONNX it was built from: OrtAsEngine runs it

    trt.Builder, trt.OnnxParser = Builder, Parser
    return trt


def test_without_tensorrt_the_build_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    monkeypatch.setattr(tensorrt_build.importlib.util, "find_spec", lambda name: None)
    available, reason = tensorrt_build.tensorrt_status()
    assert not available and "not installed" in reason
    with pytest.raises(TensorRTUnavailableError, match="not installed"):
        build_engine(tmp_path / "policy.onnx", tmp_path / "policy.engine")


def test_cli_without_tensorrt_exits_2_and_leaves_the_package_valid(
    point_package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    package = shutil.copytree(point_package, tmp_path / "pkg")
    monkeypatch.setattr(tensorrt_build.importlib.util, "find_spec", lambda name: None)
    assert main([str(package)]) == 2
    assert "TensorRT engine not built" in capsys.readouterr().err
    assert "engine" not in load_package(package).variants


@pytest.mark.parametrize(
    ("major", "source", "expected_flags", "strongly_typed"),
    [(10, "policy.onnx", ["FP16", "OBEY_PRECISION_CONSTRAINTS"], False), (11, "policy_fp16.onnx", [], True)],
)
def test_engine_build_uses_the_right_api_per_major_version_and_reseals_the_manifest(
    point_package: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    major: int,
    source: str,
    expected_flags: list[str],
    strongly_typed: bool,
) -> None:
    recorder = _Recorder()
    monkeypatch.setitem(sys.modules, "tensorrt", fake_tensorrt(major, recorder))
    monkeypatch.setattr(tensorrt_build.importlib.util, "find_spec", lambda name: object())
    package_dir = shutil.copytree(point_package, tmp_path / "pkg")
    monkeypatch.setattr(backends, "TensorRTBackend", OrtAsEngine)
    engine = build_into_package(package_dir, max_batch=32)

    assert recorder.parsed == (package_dir / source).read_bytes()
    assert recorder.flags == expected_flags
    pinned = [layer.name for layer in recorder.layers if layer.precision == "fp32"]
    assert pinned == (["sub", "div"] if not strongly_typed else [])  # the normaliser, in flag mode only
    assert bool(recorder.network_flags) == strongly_typed
    assert recorder.profile == ("obs", (1, FLAT_DIM), (1, FLAT_DIM), (32, FLAT_DIM))
    package = load_package(package_dir)  # re-sealed: still verifies, now with the engine hashed
    assert package.model_path("engine") == engine and engine.read_bytes() == recorder.parsed
    facts = package.manifest["engine"]
    assert facts["status"] == "built" and facts["mode"] == ("strong" if strongly_typed else "flag")
    assert facts["profile_batch"] == [1, 1, 32]
    assert facts["tensorrt_version"].startswith(str(major))
    assert facts["selftest_max_abs"] <= (2e-3 if strongly_typed else 1e-5) and facts["selftest_tolerance"] == 2e-3
    report = json.loads((package_dir / "report.json").read_text())
    assert report["engine"]["status"] == "not built"  # the export-time report is not rewritten


def test_fp16_flag_mode_is_refused_on_tensorrt_11(monkeypatch: pytest.MonkeyPatch) -> None:
    trt = fake_tensorrt(11, _Recorder())
    with pytest.raises(ValueError, match="--mode strong"):
        tensorrt_build.resolve_mode(trt, "flag")
    assert tensorrt_build.resolve_mode(trt, "auto") == "strong"
    assert tensorrt_build.resolve_mode(fake_tensorrt(10, _Recorder()), "auto") == "flag"


def test_an_engine_that_fails_its_self_test_is_deleted(
    point_package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", fake_tensorrt(10, _Recorder()))
    monkeypatch.setattr(tensorrt_build.importlib.util, "find_spec", lambda name: object())
    package_dir = shutil.copytree(point_package, tmp_path / "pkg")
    monkeypatch.setattr(OrtAsEngine, "offset", 0.01)  # an engine whose actions are 0.01 off
    monkeypatch.setattr(backends, "TensorRTBackend", OrtAsEngine)
    with pytest.raises(PackageError, match=r"self-test of variant 'engine'.*> tolerance 0.002"):
        build_into_package(package_dir)
    assert not (package_dir / "policy.engine").exists()
    assert "engine" not in load_package(package_dir).variants
    assert main([str(package_dir)]) == 1
    assert "TensorRT engine build FAILED" in capsys.readouterr().err
    assert main([str(package_dir), "--selftest-tolerance", "0.02"]) == 0  # an explicit, recorded override
    assert load_package(package_dir).manifest["engine"]["selftest_tolerance"] == 0.02


def test_export_on_a_machine_with_tensorrt_builds_and_checks_the_engine_like_every_variant(
    bc_policy: TinyGoalPolicy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", fake_tensorrt(10, _Recorder()))
    monkeypatch.setattr(tensorrt_build.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(backends, "TensorRTBackend", OrtAsEngine)
    monkeypatch.setattr(backends, "_import_cudart", lambda: None)
    config = ExportConfig(
        allow_small_checks=True, n_parity_obs=300, n_calibration_obs=600, n_episodes=5, latency_calls=50
    )
    out = export_package(
        bc_policy, tmp_path / "pkg", POINT_ENV_ID, POINT_ENV_KWARGS, {"algorithm": "bc (test)"}, config=config
    )
    package = load_package(out)
    assert package.variants == ["fp32", "fp16", "int8", "engine"]
    assert package.manifest["engine"]["status"] == "built" and package.manifest["engine"]["mode"] == "flag"
    row = json.loads((out / "report.json").read_text())["variants"]["engine"]
    assert row["backend"] == "fake-tensorrt" and row["parity"]["max_abs"] <= 1e-5
    assert "| engine |" in (out / "report.md").read_text()
