#!/usr/bin/env python3
"""Builds rtq's bundled demo assets: models/tinyresnet.onnx and calibration/*.npy.

The model is a small ResNet-style classifier (Conv-BN-ReLU stem, two residual
blocks, a strided block, global average pooling, a Gemm head and Softmax) with
seeded weights, so it exercises BatchNorm folding, residual-Add quantization,
per-channel weights and the classifier accuracy metrics. The calibration samples
are smooth synthetic 32x32 RGB images (gradients, blobs and stripes) with noise.

Usage: python3 scripts/make_demo_assets.py   (needs numpy and onnx)
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
rng = np.random.default_rng(20261202)
inits = []
nodes = []


def const(name, array):
    inits.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32), name))
    return name


def conv_bn_relu(x, cin, cout, name, stride=1, relu=True):
    fan_in = cin * 9
    w = rng.normal(0.0, np.sqrt(2.0 / fan_in), size=(cout, cin, 3, 3))
    nodes.append(helper.make_node(
        "Conv", [x, const(f"{name}.w", w)], [f"{name}.conv"], name=f"{name}/conv",
        kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride]))
    gamma = rng.uniform(0.5, 1.5, cout)
    beta = rng.normal(0.0, 0.1, cout)
    mean = rng.normal(0.0, 0.2, cout)
    var = rng.uniform(0.5, 2.0, cout)
    nodes.append(helper.make_node(
        "BatchNormalization",
        [f"{name}.conv", const(f"{name}.gamma", gamma), const(f"{name}.beta", beta),
         const(f"{name}.mean", mean), const(f"{name}.var", var)],
        [f"{name}.bn"], name=f"{name}/bn", epsilon=1e-5))
    if not relu:
        return f"{name}.bn"
    nodes.append(helper.make_node("Relu", [f"{name}.bn"], [f"{name}.relu"], name=f"{name}/relu"))
    return f"{name}.relu"


def residual(x, c, name):
    h = conv_bn_relu(x, c, c, f"{name}.a")
    h = conv_bn_relu(h, c, c, f"{name}.b", relu=False)
    nodes.append(helper.make_node("Add", [h, x], [f"{name}.sum"], name=f"{name}/add"))
    nodes.append(helper.make_node("Relu", [f"{name}.sum"], [f"{name}.out"], name=f"{name}/relu"))
    return f"{name}.out"


def build_model():
    x = conv_bn_relu("input", 3, 16, "stem")
    x = residual(x, 16, "block1")
    x = conv_bn_relu(x, 16, 32, "down", stride=2)
    x = residual(x, 32, "block2")
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"], name="pool"))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["features"], name="flatten", axis=1))
    w = rng.normal(0.0, np.sqrt(1.0 / 32), size=(10, 32))
    b = rng.normal(0.0, 0.05, size=(10,))
    nodes.append(helper.make_node(
        "Gemm", ["features", const("head.w", w), const("head.b", b)], ["logits"],
        name="head", transB=1))
    nodes.append(helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1))
    graph = helper.make_graph(
        nodes, "tinyresnet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 32, 32])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 10])],
        initializer=inits)
    model = helper.make_model(graph, producer_name="rtq-demo", opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model, full_check=True)
    return model


def sample(i):
    yy, xx = np.meshgrid(np.linspace(-1, 1, 32), np.linspace(-1, 1, 32), indexing="ij")
    img = np.zeros((3, 32, 32))
    for c in range(3):
        kind = (i + c) % 3
        a, b = rng.uniform(-2, 2, 2)
        if kind == 0:
            img[c] = a * xx + b * yy
        elif kind == 1:
            cx, cy, s = rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), rng.uniform(0.2, 0.6)
            img[c] = 2.0 * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * s * s)) - 0.5
        else:
            img[c] = np.sin(a * 6 * xx + b * 6 * yy)
    img += rng.normal(0.0, 0.05, img.shape)
    return img[None].astype(np.float32)


def main():
    os.makedirs(os.path.join(ROOT, "models"), exist_ok=True)
    os.makedirs(os.path.join(ROOT, "calibration"), exist_ok=True)
    onnx.save(build_model(), os.path.join(ROOT, "models", "tinyresnet.onnx"))
    for i in range(40):
        np.save(os.path.join(ROOT, "calibration", f"sample_{i:03d}.npy"), sample(i))


if __name__ == "__main__":
    main()
