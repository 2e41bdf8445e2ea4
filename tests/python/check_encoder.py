#!/usr/bin/env python3
"""Compares a compiled encoder with its FP32 original in onnxruntime and describes where
its Q/DQ sit; prints one JSON object.

usage: check_encoder.py FP32_MODEL CANDIDATE SAMPLES_DIR

Output: {"cosine": {output: mean cosine over the samples}, "cosine_min": {...},
"samples": N, "nodes": {node name: {"op": op type, "dq_inputs": how many of its
activation inputs come straight out of a DequantizeLinear, "activation_inputs": how
many non-constant inputs it has}}}. The candidate passes onnx.checker's full check
first.
"""
import glob
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort


def placement(model):
    g = model.graph
    constants = {i.name for i in g.initializer}
    producer = {}
    for n in g.node:
        for o in n.output:
            producer[o] = n
        if n.op_type == "Constant":
            constants.update(n.output)

    def is_constant(name):
        if name in constants:
            return True
        p = producer.get(name)
        # A quantized weight: DequantizeLinear of a constant.
        return p is not None and p.op_type in ("DequantizeLinear", "Cast") and is_constant(p.input[0])

    nodes = {}
    for n in g.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear", "Constant"):
            continue
        acts = [i for i in n.input if i and not is_constant(i)]
        dq = sum(1 for i in acts if producer.get(i) is not None and producer[i].op_type == "DequantizeLinear")
        nodes[n.name] = {"op": n.op_type, "dq_inputs": dq, "activation_inputs": len(acts)}
    return nodes


def main():
    ref_path, cand_path, samples = sys.argv[1:4]
    cand = onnx.load(cand_path)
    onnx.checker.check_model(cand, full_check=True)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    ref = ort.InferenceSession(ref_path, opts, providers=["CPUExecutionProvider"])
    run = ort.InferenceSession(cand_path, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in ref.get_outputs()]
    cos = {n: [] for n in names}
    files = sorted(glob.glob(samples + "/*.npz"))
    for f in files:
        feeds = dict(np.load(f))
        cand_feeds = {}
        for i in run.get_inputs():
            x = feeds[i.name]
            cand_feeds[i.name] = x.astype(np.float16) if i.type == "tensor(float16)" else x
        for n, a, b in zip(names, ref.run(None, feeds), run.run(names, cand_feeds)):
            a = a.astype(np.float64).ravel()
            b = b.astype(np.float64).ravel()
            cos[n].append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30)))
    print(json.dumps({
        "cosine": {n: float(np.mean(v)) for n, v in cos.items()},
        "cosine_min": {n: float(np.min(v)) for n, v in cos.items()},
        "samples": len(files),
        "nodes": placement(cand),
    }))


if __name__ == "__main__":
    main()
