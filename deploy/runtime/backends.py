"""Inference backends behind one small interface: float32 obs [B, D] in, float32 action [B, A] out.

numpy + onnxruntime / tensorrt (+ NVIDIA's cuda-python for the native engine's device memory) + stdlib only.

Names (``make_backend(name, model)``):

- ``"ort-cpu"``: onnxruntime CPU execution provider (the default on the robot's CPU);
- ``"ort-cuda"``: onnxruntime CUDA execution provider;
- ``"ort-trt"``: onnxruntime TensorRT execution provider (fp16 enabled, CUDA then CPU as fallback for
  nodes TensorRT cannot take);
- ``"tensorrt"``: a serialized TensorRT engine (``policy.engine``) run natively with ``execute_async_v3``
  and named tensors (TensorRT 10.x and 11.x Python APIs).

A backend that is not available here raises :class:`BackendUnavailableError` listing what is; model bytes that
are not a runnable policy (not ONNX, empty, other inputs/outputs) raise :class:`ModelLoadError`. onnxruntime
lists an execution provider when it is compiled in, even if its CUDA libraries cannot be loaded; a session that
silently fell back to another provider is therefore refused too (a CUDA backend that runs on the CPU would
break the latency budget without telling anyone).

The onnxruntime session is tuned for batch-1 control: one intra-op thread (no thread-pool wake-up), all graph
optimisations, and I/O binding to preallocated buffers so no tensor is allocated per call.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

BACKEND_NAMES = ("ort-cpu", "ort-cuda", "ort-trt", "tensorrt")
INPUT_NAME = "obs"
OUTPUT_NAME = "action"
ORT_PROVIDERS = {
    "ort-cpu": "CPUExecutionProvider",
    "ort-cuda": "CUDAExecutionProvider",
    "ort-trt": "TensorrtExecutionProvider",
}
DEFAULT_MAX_BATCH = 64  # largest batch the TensorRT EP profile covers (the native engine's comes from the engine)
ORT_LOG_ERROR = 3  # onnxruntime log severity: errors only
TRT_WORKSPACE_BYTES = 1 << 28


class BackendUnavailableError(RuntimeError):
    """The requested backend cannot run here."""


class ModelLoadError(ValueError):
    """The model bytes are not a model this backend can run: not ONNX (or not an engine), empty, or with other
    inputs and outputs than ``obs`` -> ``action`` (float32, [batch, dim]). A problem of the file, not of the machine."""


@runtime_checkable
class InferenceBackend(Protocol):
    """``backend(obs)`` maps float32 [B, input_dim] observations to float32 [B, output_dim] actions."""

    name: str
    input_dim: int
    output_dim: int
    compute_precision: str  # "model": the model's own types; "fp16": the backend computes in fp16 regardless

    def __call__(self, obs_flat: np.ndarray) -> np.ndarray: ...


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _import_cudart() -> Any:
    """cuda-python's runtime API (``cuda.bindings.runtime`` since 12.6, ``cuda.cudart`` before)."""
    for module in ("cuda.bindings.runtime", "cuda.cudart"):
        try:
            return importlib.import_module(module)
        except ImportError:
            continue
    raise BackendUnavailableError(
        "the native 'tensorrt' backend needs NVIDIA's cuda-python for device memory (pip install cuda-python)"
    )


def available_backends() -> list[str]:
    """Backends that can be asked for here, in preference order (GPU first when present)."""
    found: list[str] = []
    if _has_module("tensorrt") and (_has_module("cuda.bindings") or _has_module("cuda.cudart")):
        found.append("tensorrt")
    if _has_module("onnxruntime"):
        import onnxruntime as ort

        providers = set(ort.get_available_providers())
        found += [name for name in ("ort-trt", "ort-cuda", "ort-cpu") if ORT_PROVIDERS[name] in providers]
    return found


def _read_model(model: str | Path | bytes) -> bytes:
    if isinstance(model, bytes):
        return model
    path = Path(model)
    if not path.is_file():
        raise FileNotFoundError(f"model file {path} does not exist")
    return path.read_bytes()


def make_backend(name: str, model: str | Path | bytes, **options: Any) -> InferenceBackend:
    """Build backend ``name`` over a model file (or its bytes): ONNX for ``ort-*``, an engine for ``tensorrt``.

    Options: ``intra_op_num_threads`` (ort, default 1), ``device_id`` (GPU, default 0), ``max_batch``
    (ort-trt profile, default 64), ``trt_cache_dir`` (ort-trt engine cache folder, default none).
    """
    if name not in BACKEND_NAMES:
        raise ValueError(f"unknown backend {name!r}; known backends: {list(BACKEND_NAMES)}")
    available = available_backends()
    if name not in available:
        raise BackendUnavailableError(
            f"backend {name!r} is not available on this machine; available: {available or 'none'} "
            "(ort-cuda / ort-trt need the onnxruntime-gpu wheel, tensorrt needs the tensorrt and cuda-python packages)"
        )
    data = _read_model(model)
    if name == "tensorrt":
        return TensorRTBackend(data, device_id=int(options.pop("device_id", 0)), **options)
    return OrtBackend(data, name, **options)


# onnxruntime --------------------------------------------------------------------------------------------------------
class OrtBackend:
    """onnxruntime session over one ONNX model, with I/O binding to reusable buffers.

    :param model: the ONNX model bytes.
    :param name: ``"ort-cpu"``, ``"ort-cuda"`` or ``"ort-trt"``.
    :param intra_op_num_threads: threads per operator (1: lowest batch-1 latency and jitter).
    :param device_id: GPU index for the CUDA / TensorRT providers.
    :param max_batch: largest batch of the TensorRT EP optimisation profile.
    :param trt_cache_dir: folder where the TensorRT EP caches its engine (None: rebuild per session).
    """

    def __init__(
        self,
        model: bytes,
        name: str = "ort-cpu",
        intra_op_num_threads: int = 1,
        device_id: int = 0,
        max_batch: int = DEFAULT_MAX_BATCH,
        trt_cache_dir: str | Path | None = None,
    ) -> None:
        import onnxruntime as ort

        if name not in ORT_PROVIDERS:
            raise ValueError(f"OrtBackend runs {list(ORT_PROVIDERS)}, not {name!r}")
        if intra_op_num_threads < 1:
            raise ValueError(f"intra_op_num_threads must be >= 1, got {intra_op_num_threads}")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = intra_op_num_threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = ORT_LOG_ERROR

        if not model:
            raise ModelLoadError("the model file is empty (0 bytes); re-copy or re-export it")
        try:
            probe = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's errors (InvalidProtobuf, InvalidArgument ...) derive from Exception
            raise ModelLoadError(
                f"onnxruntime cannot load these {len(model)} bytes as an ONNX model ({type(exc).__name__}: {exc}); "
                "the file is not an ONNX policy or is damaged: re-export it with deploy.export"
            ) from exc
        inputs, outputs = probe.get_inputs(), probe.get_outputs()
        if [i.name for i in inputs] != [INPUT_NAME] or [o.name for o in outputs] != [OUTPUT_NAME]:
            raise ModelLoadError(
                f"the model must have one input {INPUT_NAME!r} and one output {OUTPUT_NAME!r}; it has inputs "
                f"{[i.name for i in inputs]} and outputs {[o.name for o in outputs]} (export it with deploy.export)"
            )
        if inputs[0].type != "tensor(float)" or outputs[0].type != "tensor(float)":
            raise ModelLoadError(f"the model's input/output must be float32, got {inputs[0].type} / {outputs[0].type}")
        self.input_dim = _fixed_width(inputs[0].shape, INPUT_NAME)
        self.output_dim = _fixed_width(outputs[0].shape, OUTPUT_NAME)
        self.name = name
        # the TensorRT EP runs with fp16 enabled whatever the model's types: its accuracy is fp16's
        self.compute_precision = "fp16" if name == "ort-trt" else "model"

        providers: list[Any] = []
        if name == "ort-trt":
            trt_options: dict[str, Any] = {
                "device_id": device_id,
                "trt_fp16_enable": True,
                "trt_profile_min_shapes": f"{INPUT_NAME}:1x{self.input_dim}",
                "trt_profile_opt_shapes": f"{INPUT_NAME}:1x{self.input_dim}",
                "trt_profile_max_shapes": f"{INPUT_NAME}:{max_batch}x{self.input_dim}",
            }
            if trt_cache_dir is not None:
                trt_options |= {"trt_engine_cache_enable": True, "trt_engine_cache_path": str(trt_cache_dir)}
            providers += [
                ("TensorrtExecutionProvider", trt_options),
                ("CUDAExecutionProvider", {"device_id": device_id}),
            ]
        elif name == "ort-cuda":
            providers.append(("CUDAExecutionProvider", {"device_id": device_id}))
        providers.append("CPUExecutionProvider")
        self.session = probe if name == "ort-cpu" else ort.InferenceSession(model, opts, providers=providers)
        active = self.session.get_providers()
        if active[0] != ORT_PROVIDERS[name]:
            raise BackendUnavailableError(
                f"onnxruntime could not start {ORT_PROVIDERS[name]} (the session runs on {active}); check the "
                "CUDA / cuDNN / TensorRT libraries match this onnxruntime-gpu build"
            )

        self._binding = self.session.io_binding()
        self._batch = 0
        self._in = np.zeros((0, self.input_dim), dtype=np.float32)
        self._out = np.zeros((0, self.output_dim), dtype=np.float32)

    def _bind(self, batch: int) -> None:
        """(Re)bind preallocated host buffers for ``batch`` rows; done once per batch size change."""
        self._in = np.zeros((batch, self.input_dim), dtype=np.float32)
        self._out = np.zeros((batch, self.output_dim), dtype=np.float32)
        self._binding.clear_binding_inputs()
        self._binding.clear_binding_outputs()
        self._binding.bind_input(INPUT_NAME, "cpu", 0, np.float32, self._in.shape, self._in.ctypes.data)
        self._binding.bind_output(OUTPUT_NAME, "cpu", 0, np.float32, self._out.shape, self._out.ctypes.data)
        self._batch = batch

    def __call__(self, obs_flat: np.ndarray) -> np.ndarray:
        if obs_flat.ndim != 2 or obs_flat.shape[1] != self.input_dim:
            raise ValueError(f"obs must have shape [batch, {self.input_dim}], got {obs_flat.shape}")
        if obs_flat.shape[0] != self._batch:
            self._bind(obs_flat.shape[0])
        np.copyto(self._in, obs_flat, casting="same_kind")
        self.session.run_with_iobinding(self._binding)
        return self._out.copy()


def _fixed_width(shape: list[Any], tensor: str) -> int:
    """The fixed second dimension of a [batch, width] model tensor (values per row)."""
    if len(shape) != 2 or not isinstance(shape[1], int) or shape[1] < 1:
        raise ModelLoadError(
            f"the model's {tensor!r} tensor has shape {shape}; it must be [batch, width] with a fixed width "
            "(export it with deploy.export)"
        )
    return shape[1]


# Native TensorRT ----------------------------------------------------------------------------------------------------
def _cuda_check(result: Any) -> Any:
    """Unwrap a cuda-python call's ``(err, value...)`` tuple, raising on an error code."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"CUDA runtime error {err}")
    return values[0] if len(values) == 1 else (values or None)


def _handle(obj: Any) -> int:
    """Integer address of a cuda-python handle (stream or device pointer)."""
    try:
        return int(obj)
    except TypeError:
        return int(obj.getPtr())


class TensorRTBackend:
    """A serialized TensorRT engine, run with ``execute_async_v3`` on named tensors (TensorRT 10.x / 11.x).

    Device buffers are allocated once for the engine profile's largest batch; host buffers are pinned.

    :param engine: the serialized engine bytes (built on this device by ``deploy.export.tensorrt_build``).
    :param device_id: GPU index.
    """

    def __init__(self, engine: bytes, device_id: int = 0) -> None:
        import tensorrt as trt

        self._cudart = cudart = _import_cudart()
        _cuda_check(cudart.cudaSetDevice(device_id))
        self._logger = trt.Logger(trt.Logger.WARNING)
        self._runtime = trt.Runtime(self._logger)
        self._engine = self._runtime.deserialize_cuda_engine(engine)
        if self._engine is None:
            raise ModelLoadError(
                f"TensorRT {trt.__version__} could not load this engine: engines only run on the TensorRT version "
                "and GPU they were built with; rebuild it here with python -m deploy.export.tensorrt_build"
            )
        names = [self._engine.get_tensor_name(i) for i in range(self._engine.num_io_tensors)]
        inputs = [n for n in names if self._engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        outputs = [n for n in names if n not in inputs]
        if inputs != [INPUT_NAME] or outputs != [OUTPUT_NAME]:
            raise ModelLoadError(
                f"engine must have input {INPUT_NAME!r} and output {OUTPUT_NAME!r}, has {inputs} {outputs}"
            )
        for tensor in names:
            if self._engine.get_tensor_dtype(tensor) != trt.DataType.FLOAT:
                raise ModelLoadError(
                    f"engine tensor {tensor!r} must be float32, is {self._engine.get_tensor_dtype(tensor)}"
                )
        min_shape, _, max_shape = self._engine.get_tensor_profile_shape(INPUT_NAME, 0)
        self.name = "tensorrt"
        self.compute_precision = "fp16"
        self.input_dim = int(max_shape[1])
        self.output_dim = int(self._engine.get_tensor_shape(OUTPUT_NAME)[1])
        self.min_batch, self.max_batch = int(min_shape[0]), int(max_shape[0])

        self._context = self._engine.create_execution_context()
        self._stream = _cuda_check(cudart.cudaStreamCreate())
        in_bytes = self.max_batch * self.input_dim * 4
        out_bytes = self.max_batch * self.output_dim * 4
        self._d_in = _cuda_check(cudart.cudaMalloc(in_bytes))
        self._d_out = _cuda_check(cudart.cudaMalloc(out_bytes))
        self._h_in_ptr = _cuda_check(cudart.cudaMallocHost(in_bytes))
        self._h_out_ptr = _cuda_check(cudart.cudaMallocHost(out_bytes))
        self._h_in = self._host_view(self._h_in_ptr, self.max_batch, self.input_dim)
        self._h_out = self._host_view(self._h_out_ptr, self.max_batch, self.output_dim)
        self._context.set_tensor_address(INPUT_NAME, _handle(self._d_in))
        self._context.set_tensor_address(OUTPUT_NAME, _handle(self._d_out))
        self._batch = 0

    @staticmethod
    def _host_view(ptr: Any, rows: int, cols: int) -> np.ndarray:
        buffer = (ctypes.c_float * (rows * cols)).from_address(_handle(ptr))
        return np.ctypeslib.as_array(buffer).reshape(rows, cols)

    def __call__(self, obs_flat: np.ndarray) -> np.ndarray:
        cudart = self._cudart
        batch = obs_flat.shape[0]
        if obs_flat.ndim != 2 or obs_flat.shape[1] != self.input_dim:
            raise ValueError(f"obs must have shape [batch, {self.input_dim}], got {obs_flat.shape}")
        if not self.min_batch <= batch <= self.max_batch:
            raise ValueError(
                f"batch {batch} is outside the engine's profile {self.min_batch}..{self.max_batch}; "
                "rebuild the engine with a larger --max-batch"
            )
        if batch != self._batch:
            if not self._context.set_input_shape(INPUT_NAME, (batch, self.input_dim)):
                raise RuntimeError(f"TensorRT refused input shape ({batch}, {self.input_dim})")
            self._batch = batch
        self._h_in[:batch] = obs_flat
        in_bytes, out_bytes = batch * self.input_dim * 4, batch * self.output_dim * 4
        h2d, d2h = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice, cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
        _cuda_check(cudart.cudaMemcpyAsync(self._d_in, self._h_in_ptr, in_bytes, h2d, self._stream))
        if not self._context.execute_async_v3(_handle(self._stream)):
            raise RuntimeError("TensorRT execute_async_v3 failed (see the TensorRT log above)")
        _cuda_check(cudart.cudaMemcpyAsync(self._h_out_ptr, self._d_out, out_bytes, d2h, self._stream))
        _cuda_check(cudart.cudaStreamSynchronize(self._stream))
        return self._h_out[:batch].copy()

    def close(self) -> None:
        """Free device and pinned host memory (also done when the backend is garbage collected)."""
        cudart = getattr(self, "_cudart", None)
        if cudart is None:
            return
        for ptr in ("_d_in", "_d_out"):
            if hasattr(self, ptr):
                cudart.cudaFree(getattr(self, ptr))
                delattr(self, ptr)
        for ptr in ("_h_in_ptr", "_h_out_ptr"):
            if hasattr(self, ptr):
                cudart.cudaFreeHost(getattr(self, ptr))
                delattr(self, ptr)
        if hasattr(self, "_stream"):
            cudart.cudaStreamDestroy(self._stream)
            del self._stream
        self._cudart = None

    def __del__(self) -> None:
        self.close()
