"""Prints, as JSON, the shape onnxruntime computes for every tensor of an ONNX model.

usage: tensor_shapes.py MODEL.onnx [SIZE]

Every node output is exposed as a graph output (typed through onnx's shape inference),
the model is run once on random inputs, and the result is
{"inputs": {name: fed shape}, "shapes": {tensor name: actual shape}}.
Symbolic input dimensions are fed as 1 on the first axis and SIZE (default 64)
elsewhere. Used by rtq-passes' tests as the ground truth for shape inference.
"""
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, shape_inference


def main():
    path = sys.argv[1]
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    model = onnx.load(path)
    typed = shape_inference.infer_shapes(model)
    elem = {}
    for vi in list(typed.graph.input) + list(typed.graph.value_info) + list(typed.graph.output):
        if vi.type.tensor_type.elem_type:
            elem[vi.name] = vi.type.tensor_type.elem_type
    present = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            if name and name not in present and name in elem:
                model.graph.output.append(helper.make_tensor_value_info(name, elem[name], None))
                present.add(name)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds, fed = {}, {}
    for inp in session.get_inputs():
        shape = [d if isinstance(d, int) else (1 if i == 0 else size) for i, d in enumerate(inp.shape)]
        dtype = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64}[inp.type]
        feeds[inp.name] = rng.random(shape).astype(dtype)
        fed[inp.name] = shape
    outputs = session.run(None, feeds)
    shapes = {o.name: list(v.shape) for o, v in zip(session.get_outputs(), outputs)}
    print(json.dumps({"inputs": fed, "shapes": shapes}))


if __name__ == "__main__":
    main()
