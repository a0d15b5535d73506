"""Inference backends: onnxruntime CPU on a hand-built ONNX policy, clear errors, and the native TensorRT
backend's buffer/shape logic against a fake ``tensorrt`` + ``cuda-python`` (no GPU here).

The fake engine computes the same linear policy as the ONNX model, on memory the fake CUDA runtime hands out
(real host buffers, so every memcpy the backend issues really moves the bytes).
"""

# ruff: noqa: N802, N815  (the fake mirrors cuda-python's camelCase API)

from __future__ import annotations

import ctypes
import sys
import types
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from package_fixtures import BIAS, CONTRACT, WEIGHT, linear_onnx

from deploy.runtime import backends
from deploy.runtime.backends import (
    BACKEND_NAMES,
    BackendUnavailableError,
    InferenceBackend,
    OrtBackend,
    TensorRTBackend,
    available_backends,
    make_backend,
)

RNG = np.random.default_rng(0)


def expected(obs: np.ndarray) -> np.ndarray:
    return np.clip(obs.astype(np.float32) @ WEIGHT + BIAS, -1.0, 1.0)


def test_cpu_is_available_and_names_are_known() -> None:
    names = available_backends()
    assert "ort-cpu" in names
    assert set(names) <= set(BACKEND_NAMES)


def test_ort_cpu_matches_the_linear_policy_across_batch_sizes(tmp_path: Path) -> None:
    path = tmp_path / "policy.onnx"
    path.write_bytes(linear_onnx())
    backend = make_backend("ort-cpu", path)
    assert isinstance(backend, InferenceBackend)
    assert (backend.input_dim, backend.output_dim) == (CONTRACT.flat_dim, CONTRACT.action_dim)
    kept = []
    for batch in (1, 7, 64, 1, 1):
        obs = RNG.normal(size=(batch, CONTRACT.flat_dim)).astype(np.float32)
        out = backend(obs)
        assert out.shape == (batch, CONTRACT.action_dim) and out.dtype == np.float32
        np.testing.assert_allclose(out, expected(obs), atol=1e-6)
        kept.append((obs, out))
    for obs, out in kept:  # results are copies: later calls do not overwrite them
        np.testing.assert_allclose(out, expected(obs), atol=1e-6)


def test_float64_observations_are_cast(tmp_path: Path) -> None:
    backend = make_backend("ort-cpu", linear_onnx())
    obs = RNG.normal(size=(2, CONTRACT.flat_dim))
    np.testing.assert_allclose(backend(obs), expected(obs), atol=1e-6)


def test_wrong_observation_shape_is_refused() -> None:
    backend = make_backend("ort-cpu", linear_onnx())
    with pytest.raises(ValueError, match=rf"\[batch, {CONTRACT.flat_dim}\]"):
        backend(np.zeros((1, CONTRACT.flat_dim + 1), np.float32))
    with pytest.raises(ValueError, match="shape"):
        backend(np.zeros(CONTRACT.flat_dim, np.float32))


def test_unknown_and_unavailable_backends_list_what_is_available() -> None:
    with pytest.raises(ValueError, match="known backends"):
        make_backend("cuda-magic", linear_onnx())
    missing = [name for name in BACKEND_NAMES if name not in available_backends()]
    assert missing, "this test needs one backend that is not installed (no GPU stack here)"
    with pytest.raises(BackendUnavailableError, match=r"available: \[.*'ort-cpu'"):
        make_backend(missing[0], linear_onnx())


@pytest.mark.filterwarnings("ignore:Specified provider")
def test_a_session_that_silently_fell_back_to_cpu_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """onnxruntime lists a provider it cannot start and then runs on the CPU: the backend must say so."""
    real = ort.get_available_providers
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", *real()])
    assert "ort-cuda" in available_backends()
    with pytest.raises(BackendUnavailableError, match="could not start CUDAExecutionProvider"):
        make_backend("ort-cuda", linear_onnx())


def test_a_model_with_other_io_names_is_refused() -> None:
    model = onnx.load_from_string(linear_onnx())
    model.graph.output[0].name = "mu"
    model.graph.node[-1].output[0] = "mu"
    with pytest.raises(ValueError, match="one input 'obs' and one output 'action'"):
        OrtBackend(model.SerializeToString())


def test_a_float16_io_model_is_refused() -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["obs"], ["action"])],
        "half",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT16, ["batch", 3])],
        [helper.make_tensor_value_info("action", TensorProto.FLOAT16, ["batch", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    with pytest.raises(ValueError, match="float32"):
        OrtBackend(model.SerializeToString())


# Native TensorRT against fakes ---------------------------------------------------------------------------------
FAKE_ENGINE = b"fake-serialized-engine"
FAKE_MAX_BATCH = 8


class _FakeCudart(types.ModuleType):
    """cuda-python's runtime API surface the backend uses; "device" memory is host memory here."""

    def __init__(self) -> None:
        super().__init__("cuda.bindings.runtime")
        self.buffers: dict[int, ctypes.Array] = {}
        self.cudaMemcpyKind = types.SimpleNamespace(cudaMemcpyHostToDevice=1, cudaMemcpyDeviceToHost=2)
        self.copies: list[int] = []

    def _alloc(self, nbytes: int) -> tuple[int, int]:
        buf = ctypes.create_string_buffer(nbytes)
        self.buffers[ctypes.addressof(buf)] = buf
        return 0, ctypes.addressof(buf)

    def cudaSetDevice(self, device: int) -> tuple[int]:
        return (0,)

    def cudaStreamCreate(self) -> tuple[int, int]:
        return 0, 77

    def cudaMalloc(self, nbytes: int) -> tuple[int, int]:
        return self._alloc(nbytes)

    cudaMallocHost = cudaMalloc

    def cudaMemcpyAsync(self, dst: int, src: int, nbytes: int, kind: int, stream: int) -> tuple[int]:
        assert stream == 77 and dst in self.buffers and src in self.buffers
        ctypes.memmove(dst, src, nbytes)
        self.copies.append(kind)
        return (0,)

    def cudaStreamSynchronize(self, stream: int) -> tuple[int]:
        return (0,)

    def cudaFree(self, ptr: int) -> tuple[int]:
        del self.buffers[ptr]
        return (0,)

    cudaFreeHost = cudaFree

    def cudaStreamDestroy(self, stream: int) -> tuple[int]:
        return (0,)


class _FakeContext:
    def __init__(self) -> None:
        self.shape: tuple[int, int] | None = None
        self.addresses: dict[str, int] = {}
        self.shape_calls = 0

    def set_input_shape(self, name: str, shape: tuple[int, int]) -> bool:
        assert name == "obs"
        self.shape, self.shape_calls = tuple(shape), self.shape_calls + 1
        return True

    def set_tensor_address(self, name: str, ptr: int) -> None:
        self.addresses[name] = ptr

    def execute_async_v3(self, stream: int) -> bool:
        assert stream == 77 and self.shape is not None
        batch, dim = self.shape
        obs = np.ctypeslib.as_array((ctypes.c_float * (batch * dim)).from_address(self.addresses["obs"]))
        out = np.ctypeslib.as_array((ctypes.c_float * (batch * len(BIAS))).from_address(self.addresses["action"]))
        out[:] = expected(obs.reshape(batch, dim)).reshape(-1)
        return True


class _FakeEngine:
    num_io_tensors = 2

    def __init__(self, trt: types.ModuleType) -> None:
        self.trt = trt
        self.context = _FakeContext()

    def get_tensor_name(self, i: int) -> str:
        return ["obs", "action"][i]

    def get_tensor_mode(self, name: str) -> str:
        return self.trt.TensorIOMode.INPUT if name == "obs" else self.trt.TensorIOMode.OUTPUT

    def get_tensor_dtype(self, name: str) -> str:
        return self.trt.DataType.FLOAT

    def get_tensor_profile_shape(self, name: str, profile: int) -> tuple[tuple[int, int], ...]:
        d = CONTRACT.flat_dim
        return (1, d), (1, d), (FAKE_MAX_BATCH, d)

    def get_tensor_shape(self, name: str) -> tuple[int, int]:
        return (-1, CONTRACT.action_dim)

    def create_execution_context(self) -> _FakeContext:
        return self.context


def _fake_tensorrt() -> types.ModuleType:
    trt = types.ModuleType("tensorrt")
    trt.__version__ = "10.3.0-fake"
    trt.TensorIOMode = types.SimpleNamespace(INPUT="in", OUTPUT="out")
    trt.DataType = types.SimpleNamespace(FLOAT="f32", HALF="f16")
    trt.Logger = type("Logger", (), {"WARNING": 2, "__init__": lambda self, level: None})

    class Runtime:
        def __init__(self, logger: object) -> None:
            pass

        def deserialize_cuda_engine(self, data: bytes) -> _FakeEngine | None:
            return _FakeEngine(trt) if data == FAKE_ENGINE else None

    trt.Runtime = Runtime
    return trt


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> _FakeCudart:
    cudart = _FakeCudart()
    monkeypatch.setitem(sys.modules, "tensorrt", _fake_tensorrt())
    monkeypatch.setitem(sys.modules, "cuda.bindings.runtime", cudart)
    return cudart


def test_native_tensorrt_backend_runs_batches_through_device_buffers(fake_gpu: _FakeCudart) -> None:
    backend = TensorRTBackend(FAKE_ENGINE)
    assert (backend.input_dim, backend.output_dim, backend.max_batch) == (CONTRACT.flat_dim, 3, FAKE_MAX_BATCH)
    for batch in (1, 1, 5, FAKE_MAX_BATCH):
        obs = RNG.normal(size=(batch, CONTRACT.flat_dim)).astype(np.float32)
        np.testing.assert_allclose(backend(obs), expected(obs), atol=1e-6)
    engine_context = backend._context
    assert engine_context.shape_calls == 3  # the input shape is set only when the batch changes
    assert fake_gpu.copies.count(1) == fake_gpu.copies.count(2) == 4
    with pytest.raises(ValueError, match="outside the engine's profile"):
        backend(np.zeros((FAKE_MAX_BATCH + 1, CONTRACT.flat_dim), np.float32))
    backend.close()
    assert fake_gpu.buffers == {}  # device and pinned memory freed


def test_native_tensorrt_refuses_an_engine_it_cannot_load(fake_gpu: _FakeCudart) -> None:
    with pytest.raises(ValueError, match="rebuild it here"):
        TensorRTBackend(b"an engine from another GPU")


def test_native_tensorrt_reports_missing_cuda_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", _fake_tensorrt())
    for name in ("cuda.bindings.runtime", "cuda.cudart"):
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules makes the import fail
    with pytest.raises(BackendUnavailableError, match="cuda-python"):
        backends._import_cudart()


@pytest.mark.filterwarnings("ignore:Specified provider")
def test_tensorrt_execution_provider_gets_fp16_and_a_batch_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the ort-trt backend asks onnxruntime for (it cannot start here: the fallback is then refused)."""
    calls: list[list] = []
    real_session, real_providers = ort.InferenceSession, ort.get_available_providers

    def recording_session(model: bytes, options: ort.SessionOptions, providers: list) -> ort.InferenceSession:
        calls.append(providers)
        assert options.intra_op_num_threads == 1
        return real_session(model, options, providers=["CPUExecutionProvider"])

    monkeypatch.setattr(ort, "InferenceSession", recording_session)
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["TensorrtExecutionProvider", *real_providers()])
    with pytest.raises(BackendUnavailableError, match="TensorrtExecutionProvider"):
        make_backend("ort-trt", linear_onnx(), max_batch=16, trt_cache_dir="/tmp/trt_cache")
    name, trt_options = calls[-1][0]
    assert name == "TensorrtExecutionProvider"
    d = CONTRACT.flat_dim
    assert trt_options["trt_fp16_enable"] is True
    assert trt_options["trt_profile_min_shapes"] == f"obs:1x{d}"
    assert trt_options["trt_profile_max_shapes"] == f"obs:16x{d}"
    assert trt_options["trt_engine_cache_path"] == "/tmp/trt_cache"
    assert [p if isinstance(p, str) else p[0] for p in calls[-1][1:]] == [
        "CUDAExecutionProvider",
        "CPUExecutionProvider",
    ]
