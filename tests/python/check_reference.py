#!/usr/bin/env python3
"""Checks an rtq BF16 model, which onnxruntime's CPU provider cannot run as it is (it
has no bfloat16 Conv, DequantizeLinear-21, ...).

usage: check_reference.py CANDIDATE.onnx REFERENCE.onnx INPUTS.npy [INPUTS.npy ...]

* onnx.checker (full check, strict shape inference) must accept CANDIDATE;
* CANDIDATE is rewritten into an FP32 model that rounds every bfloat16 value the way
  the original stores it: bfloat16 initializers widened exactly to float, and after
  every node whose output was bfloat16 a Cast to bfloat16 and back (onnxruntime runs
  those Casts). That is how GPUs run BF16 networks (FP32 accumulation, BF16 storage)
  and what rtq's executor emulates; onnx's ReferenceEvaluator instead accumulates in
  bfloat16, which on deep networks measures its own rounding, not the model's;
* the rewritten CANDIDATE and REFERENCE run in onnxruntime;
* prints one JSON line: {"cosine_min": .., "opset": n, "weight_dtypes": {...}}
"""
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

BF16, FLOAT = TensorProto.BFLOAT16, TensorProto.FLOAT


def widened(model):
    """`model` with bfloat16 storage replaced by float32 plus explicit rounding."""
    graph = model.graph
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True).graph
    bf16_values = {v.name for v in list(inferred.value_info) + list(inferred.output)
                   if v.type.tensor_type.elem_type == BF16}
    for i, init in enumerate(graph.initializer):
        if init.data_type == BF16:
            wide = numpy_helper.to_array(init).astype(np.float32)
            graph.initializer[i].CopyFrom(numpy_helper.from_array(wide, init.name))
    nodes = []
    for node in graph.node:
        for attr in node.attribute:
            if attr.name in ("to", "dtype") and attr.i == BF16:
                attr.i = FLOAT
            if attr.name == "value" and attr.t.data_type == BF16:
                attr.t.CopyFrom(numpy_helper.from_array(
                    numpy_helper.to_array(attr.t).astype(np.float32), attr.t.name))
        renamed = []
        for k, out in enumerate(node.output):
            if out in bf16_values:
                node.output[k] = out + "__wide"
                renamed.append(out)
        nodes.append(node)
        for out in renamed:
            nodes.append(helper.make_node("Cast", [out + "__wide"], [out + "__bf16"], to=BF16))
            nodes.append(helper.make_node("Cast", [out + "__bf16"], [out], to=FLOAT))
    del graph.node[:]
    graph.node.extend(nodes)
    for v in list(graph.value_info) + list(graph.output) + list(graph.input):
        if v.type.tensor_type.elem_type == BF16:
            v.type.tensor_type.elem_type = FLOAT
    del graph.value_info[:]
    return model


def main():
    cand, ref, inputs = sys.argv[1], sys.argv[2], sys.argv[3:]
    model = onnx.load(cand)
    onnx.checker.check_model(model, full_check=True)
    dtypes = {}
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init)
        dtypes[str(arr.dtype)] = dtypes.get(str(arr.dtype), 0) + arr.nbytes
    opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    candidate = ort.InferenceSession(widened(model).SerializeToString(), plain,
                                     providers=["CPUExecutionProvider"])
    reference = ort.InferenceSession(ref, plain, providers=["CPUExecutionProvider"])
    name = reference.get_inputs()[0].name
    cos_min = 1.0
    for f in inputs:
        x = np.load(f)
        for a, b in zip(reference.run(None, {name: x}), candidate.run(None, {name: x})):
            a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
            denom = np.linalg.norm(a) * np.linalg.norm(b)
            cos_min = min(cos_min, float(a @ b / denom) if denom > 0 else 1.0)
    print(json.dumps({"cosine_min": cos_min, "opset": opset, "weight_dtypes": dtypes}))


if __name__ == "__main__":
    main()
