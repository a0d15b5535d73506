"""TensorRT engine build: clear skip without TensorRT, and the 10.x (FP16 flag) / 11.x (strongly typed) API paths
against a fake ``tensorrt`` that records what the builder was asked to do (no GPU here)."""

from __future__ import annotations

import json
import shutil
import sys
import types
from pathlib import Path

import pytest

from deploy.export import tensorrt_build
from deploy.export.tensorrt_build import TensorRTUnavailableError, build_engine, build_into_package, main
from deploy.runtime.package import load_package

FLAT_DIM = 18


class _Recorder:
    def __init__(self) -> None:
        self.network_flags: int | None = None
        self.parsed: bytes | None = None
        self.flags: list[str] = []
        self.profile: tuple | None = None


def fake_tensorrt(major: int, recorder: _Recorder) -> types.ModuleType:
    trt = types.ModuleType("tensorrt")
    trt.__version__ = f"{major}.0.0-fake"
    trt.Logger = type("Logger", (), {"WARNING": 2, "ERROR": 3, "__init__": lambda self, level: None})
    flag_names = {"TF32": 1} | ({"FP16": 0} if major < 11 else {})  # 11.x removed BuilderFlag.FP16
    trt.BuilderFlag = types.SimpleNamespace(**flag_names)
    trt.NetworkDefinitionCreationFlag = types.SimpleNamespace(STRONGLY_TYPED=5)
    trt.MemoryPoolType = types.SimpleNamespace(WORKSPACE="workspace")

    class Network:
        def get_input(self, index: int) -> types.SimpleNamespace:
            return types.SimpleNamespace(name="obs", shape=(-1, FLAT_DIM))

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
            return b"engine-bytes"

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
    [(10, "policy.onnx", ["FP16"], False), (11, "policy_fp16.onnx", [], True)],
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
    engine = build_into_package(package_dir, max_batch=32)

    assert recorder.parsed == (package_dir / source).read_bytes()
    assert recorder.flags == expected_flags
    assert bool(recorder.network_flags) == strongly_typed
    assert recorder.profile == ("obs", (1, FLAT_DIM), (1, FLAT_DIM), (32, FLAT_DIM))
    package = load_package(package_dir)  # re-sealed: still verifies, now with the engine hashed
    assert package.model_path("engine") == engine and engine.read_bytes() == b"engine-bytes"
    facts = package.manifest["engine"]
    assert facts["status"] == "built" and facts["mode"] == ("strong" if strongly_typed else "flag")
    assert facts["profile_batch"] == [1, 1, 32]
    assert facts["tensorrt_version"].startswith(str(major))
    report = json.loads((package_dir / "report.json").read_text())
    assert report["engine"]["status"] == "not built"  # the export-time report is not rewritten


def test_fp16_flag_mode_is_refused_on_tensorrt_11(monkeypatch: pytest.MonkeyPatch) -> None:
    trt = fake_tensorrt(11, _Recorder())
    with pytest.raises(ValueError, match="--mode strong"):
        tensorrt_build.resolve_mode(trt, "flag")
    assert tensorrt_build.resolve_mode(trt, "auto") == "strong"
    assert tensorrt_build.resolve_mode(fake_tensorrt(10, _Recorder()), "auto") == "flag"
