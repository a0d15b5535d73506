"""Test helpers for the runtime's package and backend tests: a hand-built linear ONNX policy and package folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from deploy.contract import point_reach_contract
from deploy.runtime.package import PACKAGE_FORMAT_VERSION, sha256_file, write_manifest

CONTRACT = point_reach_contract(2)
# A linear policy: action = clip(obs @ W + b, -1, 1), W [D, A]; values spelled out so the test can compute it.
WEIGHT = np.linspace(-0.5, 0.5, CONTRACT.flat_dim * CONTRACT.action_dim, dtype=np.float32).reshape(
    CONTRACT.flat_dim, CONTRACT.action_dim
)
BIAS = np.array([0.1, -0.2, 0.3], dtype=np.float32)


def linear_onnx(outputs: int = CONTRACT.action_dim) -> bytes:
    """float32 obs [batch, D] -> float32 action [batch, A] = Clip(Gemm(obs, W, b), -1, 1); ``outputs`` < A keeps
    the first columns (a model that does not fit its contract)."""
    nodes = [
        helper.make_node("Gemm", ["obs", "W", "b"], ["pre"]),
        helper.make_node("Clip", ["pre", "lo", "hi"], ["action"]),
    ]
    inits = [
        numpy_helper.from_array(WEIGHT[:, :outputs], "W"),
        numpy_helper.from_array(BIAS[:outputs], "b"),
        numpy_helper.from_array(np.array(-1.0, np.float32), "lo"),
        numpy_helper.from_array(np.array(1.0, np.float32), "hi"),
    ]
    graph = helper.make_graph(
        nodes,
        "linear",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", CONTRACT.flat_dim])],
        [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", outputs])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def make_package(
    folder: Path, ewc: bool = False, outputs: int = CONTRACT.action_dim, **manifest_overrides: object
) -> Path:
    folder.mkdir(parents=True)
    model = linear_onnx(outputs)
    for name in ("policy.onnx", "policy_fp16.onnx", "policy_int8.onnx"):
        (folder / name).write_bytes(model)  # the loader checks hashes, not precision
    (folder / "report.md").write_text("# report\n")
    if ewc:
        np.savez(folder / "ewc.npz", **{"param/w": np.ones(3, np.float32), "fisher/w": np.full(3, 0.5, np.float32)})
    manifest = {
        "format_version": PACKAGE_FORMAT_VERSION,
        "contract": CONTRACT.to_dict(),
        "action_delay_steps": {"low": 2, "high": 2},
        "io": {"input_shape": ["batch", CONTRACT.flat_dim], "output_shape": ["batch", CONTRACT.action_dim]},
        "variants": {"fp32": "policy.onnx", "fp16": "policy_fp16.onnx", "int8": "policy_int8.onnx"},
        "engine": {"status": "not built", "build_command": "python -m deploy.export.tensorrt_build PKG"},
        "files": {p.name: sha256_file(p) for p in sorted(folder.iterdir())},
        **manifest_overrides,
    }
    write_manifest(folder, manifest)
    return folder


def flip_byte(path: Path, index: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if index is None else index] ^= 0x01
    path.write_bytes(bytes(data))
