"""fp16 graph pass and int8 quantisation on a small torch policy with a normaliser (exported here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from export_fixtures import TinyGoalPolicy

from deploy.contract import point_reach_contract
from deploy.export.fp16 import convert_fp16
from deploy.export.int8 import quantize_int8
from deploy.export.onnx_fp32 import check_onnx, export_onnx, torch_actions
from deploy.runtime.backends import OrtBackend

CONTRACT = point_reach_contract(2)
RNG = np.random.default_rng(0)
# Raw observations like the env's: positions ~ +-0.3 m, velocities small, history in [-1, 1].
OBS_SCALE = np.array([0.3] * 3 + [0.05] * 3 + [1.0] * 6 + [0.3] * 6, dtype=np.float32)


@pytest.fixture(scope="module")
def fp32_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TinyGoalPolicy, np.ndarray]:
    torch.manual_seed(0)
    obs = (RNG.normal(size=(2_000, CONTRACT.flat_dim)) * OBS_SCALE).astype(np.float32)
    policy = TinyGoalPolicy(CONTRACT, obs.mean(axis=0), obs.std(axis=0)).eval()
    path = export_onnx(policy, CONTRACT.flat_dim, tmp_path_factory.mktemp("m") / "policy.onnx")
    return path, policy, obs


def node_types(path: Path) -> dict[str, int]:
    """elem type of every node output, by op type of the producing node (first occurrence)."""
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    types = {v.name: v.type.tensor_type.elem_type for v in [*model.graph.value_info, *model.graph.output]}
    return {f"{n.op_type}:{n.output[0]}": types.get(n.output[0], -1) for n in model.graph.node}


def test_fp16_keeps_float32_io_runs_matmuls_in_fp16_and_the_normaliser_in_fp32(fp32_model, tmp_path: Path) -> None:
    src, policy, obs = fp32_model
    dst = convert_fp16(src, tmp_path / "policy_fp16.onnx")
    check_onnx(dst, CONTRACT.flat_dim, CONTRACT.action_dim)
    types = node_types(dst)
    gemms = [t for k, t in types.items() if k.startswith("Gemm")]
    assert gemms and all(t == onnx.TensorProto.FLOAT16 for t in gemms)
    assert types[next(k for k in types if k.startswith("Div"))] == onnx.TensorProto.FLOAT  # normaliser
    weights = [i for i in onnx.load(str(dst)).graph.initializer if i.dims and len(i.dims) == 2]
    assert weights and all(w.data_type == onnx.TensorProto.FLOAT16 for w in weights)
    out = OrtBackend(dst.read_bytes())(obs)
    err = np.abs(out - torch_actions(policy, obs)).max()
    assert 0 < err <= 2e-3  # fp16 rounding is visible but small


def test_fp16_of_everything_also_works(fp32_model, tmp_path: Path) -> None:
    src, policy, obs = fp32_model
    dst = convert_fp16(src, tmp_path / "all_fp16.onnx", keep_normalizer_fp32=False)
    types = node_types(dst)
    assert types[next(k for k in types if k.startswith("Div"))] == onnx.TensorProto.FLOAT16
    assert np.abs(OrtBackend(dst.read_bytes())(obs) - torch_actions(policy, obs)).max() < 1e-2


@pytest.mark.parametrize("bits", [16, 8])
def test_int8_is_static_qdq_with_int8_weights(fp32_model, tmp_path: Path, bits: int) -> None:
    src, policy, obs = fp32_model
    # Calibrated on all the observations it is then checked on: this tests the quantiser's mechanics in range (the
    # exporter checks held-out rollouts; out-of-range inputs are clipped by the Q/DQ pairs, see int8.py).
    dst = quantize_int8(src, tmp_path / f"int8_a{bits}.onnx", obs, activation_bits=bits)
    check_onnx(dst, CONTRACT.flat_dim, CONTRACT.action_dim)
    model = onnx.load(str(dst))
    assert sum(n.op_type == "QuantizeLinear" for n in model.graph.node) >= 3  # one per quantised Gemm input
    int8_weights = [i for i in model.graph.initializer if i.data_type == onnx.TensorProto.INT8 and len(i.dims) == 2]
    assert len(int8_weights) == 3
    err = np.abs(OrtBackend(dst.read_bytes())(obs) - torch_actions(policy, obs)).max(axis=1)
    print(f"A{bits}W8 on calibration obs: max {err.max():.3g}, p99 {np.percentile(err, 99):.3g}")
    assert err.max() > 0
    if bits == 16:
        assert err.max() <= 3e-2


def test_int8_refuses_too_little_or_non_finite_calibration(fp32_model, tmp_path: Path) -> None:
    src, _, obs = fp32_model
    with pytest.raises(ValueError, match="calibration needs >= 256"):
        quantize_int8(src, tmp_path / "q.onnx", obs[:10])
    bad = obs[:300].copy()
    bad[5, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        quantize_int8(src, tmp_path / "q.onnx", bad)
    with pytest.raises(ValueError, match="activation_bits"):
        quantize_int8(src, tmp_path / "q.onnx", obs[:300], activation_bits=4)


def test_export_refuses_a_module_with_the_wrong_output(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="make_export_module"):
        export_onnx(torch.nn.Flatten(0), CONTRACT.flat_dim, tmp_path / "bad.onnx")
