"""fp32 ONNX -> fp16 ONNX: float16 weights and math, float32 input and output.

Our own small graph pass (no extra dependency; onnxconverter-common's converter does the same job but pins
old protobuf releases): every float tensor inside the network becomes float16, a ``Cast`` is inserted where an
fp32 tensor enters the fp16 region and before each graph output.

The observation normaliser stays in fp32 (``keep_normalizer_fp32``, default on): the raw observation holds
positions of ~1.3 m whose fp16 spacing is ~1 mm, and dividing that rounding error by a small std (a few cm)
alone costs several 1e-3 of action error. The normaliser is the run of nodes before the first matrix multiply:
two elementwise ops per input value, nothing a GPU notices; every matrix multiply and activation is fp16.
TensorRT 11 builds its strongly typed network from exactly these types.

Where the math really runs in fp16: on GPUs (onnxruntime CUDA, TensorRT). onnxruntime on x86 CPUs has no fp16
Gemm kernel: it wraps such nodes in casts back to fp32 (the weights keep their fp16 rounding), so the export's
CPU parity of this variant measures fp16 *storage*; ``benchmarks/gpu_check.sh`` measures fp16 arithmetic
(the TensorRT engine and onnxruntime CUDA on this model) against fp32 on the GPU.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MATMUL_OPS = frozenset({"Gemm", "MatMul", "Conv", "ConvTranspose", "Einsum"})
FP16_SUFFIX = "__fp16"


def _float_tensors(model: onnx.ModelProto) -> set[str]:
    """Names of every float32 tensor (inputs, outputs, intermediates, initialisers) after shape inference."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    graph = inferred.graph
    values = [*graph.input, *graph.output, *graph.value_info]
    names = {v.name for v in values if v.type.tensor_type.elem_type == TensorProto.FLOAT}
    return names | {i.name for i in graph.initializer if i.data_type == TensorProto.FLOAT}


def _fp32_prefix(graph: onnx.GraphProto) -> set[int]:
    """Indices of the nodes upstream of every matrix multiply (the normaliser), in topological order."""
    downstream: set[str] = set()
    prefix: set[int] = set()
    for index, node in enumerate(graph.node):
        if node.op_type in MATMUL_OPS or any(name in downstream for name in node.input):
            downstream.update(node.output)
        else:
            prefix.add(index)
    return prefix


def convert_fp16(src: str | Path, dst: str | Path, keep_normalizer_fp32: bool = True) -> Path:
    """Write the fp16 version of the fp32 model ``src`` to ``dst`` (inputs and outputs stay float32)."""
    model = onnx.load(str(src))
    graph = model.graph
    floats = _float_tensors(model)
    keep = _fp32_prefix(graph) if keep_normalizer_fp32 else set()
    initializers = {init.name: init for init in graph.initializer}
    output_names = {o.name for o in graph.output}

    fp16_names: dict[str, str] = {}  # fp32 tensor name -> its fp16 counterpart
    new_inits: list[TensorProto] = []
    cast_nodes: list[onnx.NodeProto] = []
    output_casts: list[onnx.NodeProto] = []

    def to_fp16(name: str) -> str:
        if name not in fp16_names:
            half = name + FP16_SUFFIX
            if name in initializers:
                array = numpy_helper.to_array(initializers[name]).astype(np.float16)
                new_inits.append(numpy_helper.from_array(array, half))
            else:
                cast_nodes.append(helper.make_node("Cast", [name], [half], to=TensorProto.FLOAT16, name=f"cast_{half}"))
            fp16_names[name] = half
        return fp16_names[name]

    new_nodes: list[onnx.NodeProto] = []
    produced_fp16: set[str] = set()
    for index, node in enumerate(graph.node):
        if index in keep:
            new_nodes.append(node)
            continue
        for slot, name in enumerate(node.input):
            if name and name in floats and name not in produced_fp16:
                node.input[slot] = to_fp16(name)
        new_nodes.extend(cast_nodes)  # casts of this node's fp32 inputs run just before it
        cast_nodes.clear()
        if node.op_type == "Cast":
            for attr in node.attribute:
                if attr.name == "to" and attr.i == TensorProto.FLOAT:
                    attr.i = TensorProto.FLOAT16
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value" and attr.t.data_type == TensorProto.FLOAT:
                    attr.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(attr.t).astype(np.float16)))
        for slot, name in enumerate(node.output):
            if name in floats:
                if name in output_names:
                    half = name + FP16_SUFFIX
                    node.output[slot] = half
                    output_casts.append(
                        helper.make_node("Cast", [half], [name], to=TensorProto.FLOAT, name=f"cast_{name}")
                    )
                else:
                    produced_fp16.add(name)
        new_nodes.append(node)
    new_nodes.extend(output_casts)

    # A cast may share its source with a later node: a stable topological sort keeps the graph valid.
    del graph.node[:]
    graph.node.extend(
        _toposort(new_nodes, {i.name for i in graph.input} | set(initializers) | {i.name for i in new_inits})
    )
    used = {name for node in graph.node for name in node.input}
    kept_inits = [init for init in graph.initializer if init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept_inits + [i for i in new_inits if i.name in used])
    del graph.value_info[:]
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(dst))
    return Path(dst)


def _toposort(nodes: list[onnx.NodeProto], available: set[str]) -> list[onnx.NodeProto]:
    """Order ``nodes`` so each runs after the producers of its inputs (stable: keeps the given order otherwise)."""
    ready = set(available)
    pending = list(nodes)
    ordered: list[onnx.NodeProto] = []
    while pending:
        progress = False
        for node in list(pending):
            if all(not name or name in ready for name in node.input):
                ordered.append(node)
                ready.update(node.output)
                pending.remove(node)
                progress = True
        if not progress:
            missing = sorted({n for node in pending for n in node.input if n and n not in ready})
            raise ValueError(f"fp16 conversion left a graph with unresolved inputs {missing}")
    return ordered
