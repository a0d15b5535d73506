"""Build the TensorRT fp16 engine of a policy package on the target device (TensorRT 10.x and 11.x).

Usage, on the robot computer (e.g. a Jetson with JetPack 6 / TensorRT 10.3)::

    python -m deploy.export.tensorrt_build PACKAGE_DIR [--max-batch 64] [--mode auto|flag|strong]

The package is verified first; the engine is written as ``policy.engine`` and added to the manifest (sha256,
TensorRT version, GPU name, mode, batch profile), which is re-sealed. Imports tensorrt + stdlib + the runtime's
package module only (no torch), so it runs where the robot runs.

Precision modes:

- ``flag`` (TensorRT 10.x): parse the fp32 ``policy.onnx`` and set ``BuilderFlag.FP16``: TensorRT picks fp16
  kernels where they are faster; the normaliser's layers (everything upstream of the first matrix multiply) are
  pinned to fp32 with ``OBEY_PRECISION_CONSTRAINTS``, as in the fp16 ONNX (see ``deploy/export/fp16.py``);
- ``strong`` (TensorRT >= 10, the only way on 11.x where the FP16 builder flag is gone): a strongly typed
  network from ``policy_fp16.onnx``, whose Cast nodes fix every tensor's precision (fp16 math, fp32 I/O);
- ``auto``: ``strong`` when the FP16 flag does not exist (11.x), else ``flag``.

The optimisation profile covers batch 1..max_batch (opt 1: the control loop runs batch 1).

Self-test: right after the build, the engine runs the package's self-test observations (``selftest.npz``) and must
reproduce the torch actions within the engine tolerance of the manifest (the fp16 one, 2e-3 action units); an
engine that does not is deleted and the build fails. The measured error is recorded in the manifest.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

from deploy.runtime.backends import DEFAULT_MAX_BATCH, INPUT_NAME
from deploy.runtime.package import VARIANT_FILES, load_package, sha256_file, write_manifest

WORKSPACE_BYTES = 1 << 28  # 256 MiB of builder scratch: plenty for a small MLP, fits a Jetson
MODES = ("auto", "flag", "strong")
BUILD_COMMAND = "python -m deploy.export.tensorrt_build {package} --max-batch {max_batch}"


class TensorRTUnavailableError(RuntimeError):
    """TensorRT (or a GPU) is not present here; the engine must be built on the target."""


def tensorrt_status() -> tuple[bool, str]:
    """(available, human-readable reason) for building an engine on this machine."""
    if importlib.util.find_spec("tensorrt") is None:
        return False, "the tensorrt Python package is not installed here (pip install tensorrt, or JetPack's)"
    try:
        import tensorrt as trt

        builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    except Exception as exc:  # a missing driver / GPU surfaces as a plain RuntimeError or TypeError
        return False, f"tensorrt {_version()} is installed but cannot create a builder (no usable GPU?): {exc}"
    if builder is None:
        return False, "tensorrt could not create a builder (no usable GPU?)"
    return True, f"tensorrt {trt.__version__}"


def _version() -> str:
    try:
        import tensorrt as trt

        return str(trt.__version__)
    except Exception:
        return "unknown"


def resolve_mode(trt: Any, mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    has_fp16_flag = hasattr(trt.BuilderFlag, "FP16")
    if mode == "flag" and not has_fp16_flag:
        raise ValueError(f"TensorRT {trt.__version__} has no BuilderFlag.FP16; use --mode strong (fp16 ONNX)")
    if mode == "auto":
        return "flag" if has_fp16_flag else "strong"
    return mode


def build_engine(
    onnx_path: str | Path, engine_path: str | Path, max_batch: int = DEFAULT_MAX_BATCH, mode: str = "auto"
) -> dict[str, Any]:
    """Build a serialized fp16 engine from ``onnx_path`` (fp32 for ``flag``, fp16 for ``strong``).

    Returns the build facts recorded in the manifest. Raises :class:`TensorRTUnavailableError` when TensorRT or a
    GPU is missing, ``RuntimeError`` with the parser's messages when the build fails.
    """
    if max_batch < 1:
        raise ValueError(f"max_batch must be >= 1, got {max_batch}")
    available, reason = tensorrt_status()
    if not available:
        raise TensorRTUnavailableError(reason)
    import tensorrt as trt

    mode = resolve_mode(trt, mode)
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    flags = 0
    if mode == "strong":
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(Path(onnx_path).read_bytes()):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise RuntimeError(f"TensorRT could not parse {onnx_path}: " + "; ".join(errors))
    obs = network.get_input(0)
    if obs.name != INPUT_NAME:
        raise RuntimeError(f"{onnx_path}: first input is {obs.name!r}, expected {INPUT_NAME!r}")
    flat_dim = int(obs.shape[1])

    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
    pinned = 0
    if mode == "flag":
        config.set_flag(trt.BuilderFlag.FP16)
        pinned = pin_normalizer_fp32(trt, network)
        if pinned:
            config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
    profile = builder.create_optimization_profile()
    profile.set_shape(INPUT_NAME, (1, flat_dim), (1, flat_dim), (max_batch, flat_dim))
    config.add_optimization_profile(profile)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise RuntimeError(f"TensorRT failed to build an engine from {onnx_path} (see the log above)")
    Path(engine_path).write_bytes(bytes(serialized))
    return {
        "status": "built",
        "tensorrt_version": trt.__version__,
        "device": _device_name(),
        "mode": mode,
        "source": Path(onnx_path).name,
        "profile_batch": [1, 1, max_batch],
        "fp32_pinned_layers": pinned,
    }


def pin_normalizer_fp32(trt: Any, network: Any) -> int:
    """Pin the observation normaliser's layers to fp32; returns how many were pinned.

    Those are the layers that read the network input (directly or through each other) before any matrix multiply.
    Layers come in topological order; constants (the weights, the normaliser's mean and std) are left to TensorRT.
    """
    from_obs = {network.get_input(i).name for i in range(network.num_inputs)}
    downstream: set[str] = set()
    pinned = 0
    for index in range(network.num_layers):
        layer = network.get_layer(index)
        names = [t.name for t in (layer.get_input(i) for i in range(layer.num_inputs)) if t is not None]
        outputs = [layer.get_output(i).name for i in range(layer.num_outputs)]
        if layer.type == trt.LayerType.MATRIX_MULTIPLY or any(n in downstream for n in names):
            downstream.update(outputs)
        elif any(n in from_obs for n in names):
            from_obs.update(outputs)
            layer.precision = trt.float32
            for i in range(layer.num_outputs):
                layer.set_output_type(i, trt.float32)
            pinned += 1
    return pinned


def build_engine_from_folder(folder: str | Path, max_batch: int = DEFAULT_MAX_BATCH, mode: str = "auto") -> dict:
    """Build ``policy.engine`` in a package folder from the ONNX the mode needs (flag: fp32, strong: fp16)."""
    available, reason = tensorrt_status()
    if not available:
        raise TensorRTUnavailableError(reason)
    import tensorrt as trt

    variant = "fp16" if resolve_mode(trt, mode) == "strong" else "fp32"
    folder = Path(folder)
    return build_engine(folder / VARIANT_FILES[variant], folder / VARIANT_FILES["engine"], max_batch, mode)


def _device_name() -> str:
    try:
        from deploy.runtime.backends import _cuda_check, _import_cudart

        cudart = _import_cudart()
        props = _cuda_check(cudart.cudaGetDeviceProperties(0))
        name = props.name
        return name.decode(errors="replace").rstrip("\x00") if isinstance(name, bytes) else str(name)
    except Exception as exc:  # informative only: the engine is valid whatever we can read here
        return f"unknown ({exc})"


def _self_test_engine(package: Any, engine_path: Path, tolerance: float | None) -> dict[str, Any]:
    """Run the new engine on the package's self-test set; delete it and raise when it is off (see module doc)."""
    if not package.manifest.get("selftest"):
        return {"selftest": "not run: the package has no self-test set"}
    from deploy.runtime.backends import BackendUnavailableError, TensorRTBackend

    try:
        backend = TensorRTBackend(engine_path.read_bytes())
    except BackendUnavailableError as exc:
        engine_path.unlink()
        raise TensorRTUnavailableError(f"engine built but cannot be run to self-test it: {exc}") from exc
    try:
        err = package.self_test(backend, "engine", tolerance)
    except Exception:
        engine_path.unlink()  # an engine that computes something else must not stay next to the package
        raise
    finally:
        backend.close()
    limit = package.manifest["selftest"]["tolerance"]["engine"] if tolerance is None else tolerance
    return {"selftest_max_abs": err, "selftest_tolerance": limit}


def build_into_package(
    package_dir: str | Path,
    max_batch: int = DEFAULT_MAX_BATCH,
    mode: str = "auto",
    selftest_tolerance: float | None = None,
) -> Path:
    """Verify the package, build ``policy.engine`` into it, self-test it and re-seal the manifest with its hash.

    :param selftest_tolerance: override the manifest's engine tolerance (action units; recorded in the manifest).
    """
    package = load_package(package_dir)
    engine_path = package.folder / VARIANT_FILES["engine"]
    facts = build_engine_from_folder(package.folder, max_batch, mode)
    facts |= _self_test_engine(package, engine_path, selftest_tolerance)
    manifest = dict(package.manifest)
    manifest["files"] = {**manifest["files"], engine_path.name: sha256_file(engine_path)}
    manifest["variants"] = {**manifest["variants"], "engine": engine_path.name}
    manifest["engine"] = {**manifest.get("engine", {}), **facts}
    write_manifest(package.folder, manifest)
    return engine_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", type=Path, help="policy package folder")
    parser.add_argument("--max-batch", type=int, default=DEFAULT_MAX_BATCH, help="largest batch of the profile")
    parser.add_argument("--mode", choices=MODES, default="auto", help="fp16 flag (10.x) or strongly typed (11.x)")
    parser.add_argument("--selftest-tolerance", type=float, default=None, help="override the engine tolerance")
    args = parser.parse_args(argv)
    try:
        path = build_into_package(args.package, args.max_batch, args.mode, args.selftest_tolerance)
    except TensorRTUnavailableError as exc:
        print(f"TensorRT engine not built: {exc}. Build it on the target device.", file=sys.stderr)
        return 2
    except (RuntimeError, ValueError) as exc:  # parse/build failure, failed self-test, invalid package
        print(f"TensorRT engine build FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"engine written to {path} and recorded in the manifest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
