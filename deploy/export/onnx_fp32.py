"""torch policy module -> ``policy.onnx`` (fp32), and the structural check every package model must pass.

Exporter choice: torch 2.13's ``torch.export``-based exporter (``dynamo=True``, the default since torch 2.9),
with onnxscript's optimiser. On our policy (normaliser, 64x64 SiLU MLP, clip) it gives the clean graph
``Sub, Div, Clip, Gemm, Sigmoid, Mul, Gemm, Sigmoid, Mul, Gemm, Clip`` with a symbolic batch axis and named
initialisers. The legacy TorchScript exporter (``dynamo=False``) still works but emits a deprecation warning on
every call ("the feature will be removed") and leaves ``Constant`` nodes for the clip bounds; we do not build on
a path that is announced to disappear. Weights are stored inside the file (``external_data=False``): the package
hashes one file per model and onnxruntime refuses external data when a model is loaded from verified bytes.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import torch

from deploy.runtime.backends import INPUT_NAME, OUTPUT_NAME

ONNX_OPSET = 18  # onnxruntime >= 1.14, TensorRT 10.x and onnxruntime's quantiser all read opset 18
BATCH_DIM = "batch"


def export_onnx(module: torch.nn.Module, flat_dim: int, path: str | Path) -> Path:
    """Export ``module`` (float32 obs [B, flat_dim] -> float32 action [B, A]) to ``path`` and check it."""
    module = module.eval()
    example = torch.zeros(2, flat_dim, dtype=torch.float32)
    with torch.no_grad():
        out = module(example)
    if out.ndim != 2 or out.shape[0] != example.shape[0] or out.dtype != torch.float32:
        raise ValueError(
            f"the export module must map float32 [B, {flat_dim}] to float32 [B, action_dim], got {tuple(out.shape)} "
            f"{out.dtype}; use the policy's make_export_module()"
        )
    path = Path(path)
    with warnings.catch_warnings():
        # torch.export's own FutureWarnings about pytree internals; they say nothing about this model.
        warnings.simplefilter("ignore", FutureWarning)
        torch.onnx.export(
            module,
            (example,),
            str(path),
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_shapes=({0: torch.export.Dim(BATCH_DIM)},),  # positional: any forward argument name
            opset_version=ONNX_OPSET,
            dynamo=True,
            optimize=True,
            external_data=False,
            verbose=False,
        )
    check_onnx(path, flat_dim, int(out.shape[1]))
    return path


def _dims(value_info: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_param if d.dim_param else d.dim_value for d in value_info.type.tensor_type.shape.dim]


def check_onnx(path: str | Path, flat_dim: int, action_dim: int) -> onnx.ModelProto:
    """Run ``onnx.checker`` (full check, with shape inference) and check the package's I/O convention.

    One float32 input ``obs`` [batch, flat_dim] and one float32 output ``action`` [batch, action_dim], with a
    symbolic batch axis on both.
    """
    path = Path(path)
    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path))
    graph = model.graph
    if [i.name for i in graph.input] != [INPUT_NAME] or [o.name for o in graph.output] != [OUTPUT_NAME]:
        raise ValueError(f"{path.name}: expected one input {INPUT_NAME!r} and one output {OUTPUT_NAME!r}")
    for value, width in ((graph.input[0], flat_dim), (graph.output[0], action_dim)):
        if value.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise ValueError(f"{path.name}: {value.name!r} must be float32")
        dims = _dims(value)
        if len(dims) != 2 or not isinstance(dims[0], str) or dims[1] != width:
            raise ValueError(f"{path.name}: {value.name!r} must be [batch, {width}] with a dynamic batch, got {dims}")
    if any(init.data_location == onnx.TensorProto.EXTERNAL for init in graph.initializer):
        raise ValueError(f"{path.name}: weights must be stored inside the model file, not as external data")
    return model


def torch_actions(module: torch.nn.Module, obs: np.ndarray, batch: int = 4096) -> np.ndarray:
    """Reference actions of the torch module on float32 observations [N, D] (float32 [N, A])."""
    module = module.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(obs), batch):
            out.append(module(torch.as_tensor(obs[start : start + batch], dtype=torch.float32)).numpy())
    return np.concatenate(out).astype(np.float32)
