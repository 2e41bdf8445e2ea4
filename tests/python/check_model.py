#!/usr/bin/env python3
"""Checks an rtq output model with independent tools and compares it against a reference.

usage: check_model.py CANDIDATE.onnx REFERENCE.onnx INPUTS.npy [INPUTS.npy ...]

* onnx.checker (full check) must accept CANDIDATE;
* onnxruntime must load and run it;
* prints one JSON line: {"cosine_min": .., "cosine_min_unoptimized": .. (both models run
  with onnxruntime's graph optimisations off, i.e. plain ONNX semantics), "max_abs": .., "top1": .., "qdq": n, "opset": n,
  "weight_dtypes": {...}, "qdq_scale_dtypes": [...], "initializer_bytes": n,
  "reference_bytes": n}
"""
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


# onnxruntime's `ReluQuantRewrite` rule drops a Relu that feeds a QuantizeLinear whose
# zero point is its type's lowest value, assuming the quantizer clips negatives to it;
# an FP8 zero point of 0 clips nothing, so on FP8 models the rule changes the function
# (measured with onnxruntime 1.32). FP8 models are run with the rule off.
FP8_UNSAFE_RULES = ["ReluQuantRewrite"]


def has_fp8(path):
    model = onnx.load(path)
    return any(i.data_type == onnx.TensorProto.FLOAT8E4M3FN for i in model.graph.initializer)


def run(path, x, optimize=True):
    opts = ort.SessionOptions()
    if not optimize:
        # ONNX reference semantics: no fusion of Q/DQ into onnxruntime's int8 kernels.
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    disabled = FP8_UNSAFE_RULES if optimize and has_fp8(path) else None
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"],
                                disabled_optimizers=disabled)
    name = sess.get_inputs()[0].name
    return [np.asarray(o, dtype=np.float64) for o in sess.run(None, {name: x})]


def main():
    cand, ref, inputs = sys.argv[1], sys.argv[2], sys.argv[3:]
    model = onnx.load(cand)
    onnx.checker.check_model(model, full_check=True)
    cos_min, max_abs, agree, rows = 1.0, 0.0, 0, 0
    cos_min_plain = 1.0
    for f in inputs:
        x = np.load(f)
        for a, b in zip(run(ref, x, False), run(cand, x, False)):
            af, bf = a.ravel(), b.ravel()
            denom = np.linalg.norm(af) * np.linalg.norm(bf)
            cos_min_plain = min(cos_min_plain, float(af @ bf / denom) if denom > 0 else 1.0)
        for a, b in zip(run(ref, x), run(cand, x)):
            af, bf = a.ravel(), b.ravel()
            denom = np.linalg.norm(af) * np.linalg.norm(bf)
            cos = float(af @ bf / denom) if denom > 0 else 1.0
            cos_min = min(cos_min, cos)
            max_abs = max(max_abs, float(np.max(np.abs(af - bf))))
            if a.ndim == 2 and a.shape[1] > 1:
                agree += int(np.sum(a.argmax(1) == b.argmax(1)))
                rows += a.shape[0]
    dtypes = {}
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init)
        dtypes[str(arr.dtype)] = dtypes.get(str(arr.dtype), 0) + arr.nbytes
    inits = {i.name: i for i in model.graph.initializer}
    scale_dtypes = sorted({
        onnx.helper.tensor_dtype_to_np_dtype(inits[n.input[1]].data_type).name
        for n in model.graph.node
        if n.op_type in ("QuantizeLinear", "DequantizeLinear") and n.input[1] in inits
    })
    ref_model = onnx.load(ref)
    ref_bytes = sum(numpy_helper.to_array(i).nbytes for i in ref_model.graph.initializer)
    print(json.dumps({
        "cosine_min": cos_min,
        "cosine_min_unoptimized": cos_min_plain,
        "max_abs": max_abs,
        "top1": agree / rows if rows else None,
        "qdq": sum(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in model.graph.node),
        "opset": max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
        "weight_dtypes": dtypes,
        "qdq_scale_dtypes": scale_dtypes,
        "initializer_bytes": sum(dtypes.values()),
        "reference_bytes": ref_bytes,
    }))


if __name__ == "__main__":
    main()
