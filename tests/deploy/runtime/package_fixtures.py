"""Test helpers for the runtime's package and backend tests: a hand-built linear ONNX policy and package folder."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from deploy.contract import point_reach_contract
from deploy.runtime.package import EWC_FILE, PACKAGE_FORMAT_VERSION, SELFTEST_FILE, sha256_file, write_manifest

CONTRACT = point_reach_contract(2)
# A linear policy: action = clip(obs @ W + b, -1, 1), W [D, A]; values spelled out so the test can compute it.
WEIGHT = np.linspace(-0.5, 0.5, CONTRACT.flat_dim * CONTRACT.action_dim, dtype=np.float32).reshape(
    CONTRACT.flat_dim, CONTRACT.action_dim
)
BIAS = np.array([0.1, -0.2, 0.3], dtype=np.float32)
SELFTEST_ROWS = 16
SELFTEST_TOLERANCE = {"fp32": 1e-5, "fp16": 2e-3, "int8": 3e-2}  # action units; the three variants are fp32 here


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
    folder: Path,
    ewc: bool = False,
    outputs: int = CONTRACT.action_dim,
    selftest: bool = True,
    **manifest_overrides: object,
) -> Path:
    """A sealed package of the linear policy: three ONNX variants (same bytes), a report and, with ``selftest``, a
    self-test set of the linear policy's own actions (as the exporter writes one); ``manifest_overrides`` replace
    or add top-level manifest keys."""
    folder.mkdir(parents=True)
    model = linear_onnx(outputs)
    for name in ("policy.onnx", "policy_fp16.onnx", "policy_int8.onnx"):
        (folder / name).write_bytes(model)  # the loader checks hashes, not precision
    (folder / "report.md").write_text("# report\n")
    sections: dict[str, object] = {}
    if ewc:
        np.savez(folder / EWC_FILE, **{"param/w": np.ones(3, np.float32), "fisher/w": np.full(3, 0.5, np.float32)})
        sections["ewc"] = {"file": EWC_FILE, "source": "test"}
    if selftest:
        obs = np.random.default_rng(2).normal(size=(SELFTEST_ROWS, CONTRACT.flat_dim)).astype(np.float32)
        actions = np.clip(obs @ WEIGHT[:, :outputs] + BIAS[:outputs], -1.0, 1.0).astype(np.float32)
        np.savez(folder / SELFTEST_FILE, obs=obs, actions=actions)
        sections["selftest"] = {"file": SELFTEST_FILE, "n_obs": SELFTEST_ROWS, "tolerance": dict(SELFTEST_TOLERANCE)}
    manifest = {
        "format_version": PACKAGE_FORMAT_VERSION,
        "contract": CONTRACT.to_dict(),
        "action_delay_steps": {"low": 2, "high": 2},
        "io": {"input_shape": ["batch", CONTRACT.flat_dim], "output_shape": ["batch", CONTRACT.action_dim]},
        "variants": {"fp32": "policy.onnx", "fp16": "policy_fp16.onnx", "int8": "policy_int8.onnx"},
        "engine": {"status": "not built", "build_command": "python -m deploy.export.tensorrt_build PKG"},
        **sections,
        "files": {p.name: sha256_file(p) for p in sorted(folder.iterdir())},
        **manifest_overrides,
    }
    write_manifest(folder, manifest)
    return folder


def reseal(folder: Path, edit: Callable[[dict[str, Any]], object]) -> Path:
    """Apply ``edit`` to the manifest, re-hash every file and re-seal it: a package whose hashes all match, so only
    the field checks can refuse it."""
    manifest = json.loads((folder / "manifest.json").read_text())
    edit(manifest)
    manifest["files"] = {p.name: sha256_file(p) for p in sorted(folder.iterdir()) if p.name != "manifest.json"}
    write_manifest(folder, manifest)
    return folder


def flip_byte(path: Path, index: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if index is None else index] ^= 0x01
    path.write_bytes(bytes(data))
