#!/usr/bin/env python3
"""Writes a random valid ONNX model and calibration samples for it: the generator of
rtq's structure-aware whole-compile fuzzer (tests/fuzz_compile.rs).

usage: random_graph.py SEED MODEL CALIB_DIR

The model is a random image network: convolutions (dense, depthwise, 1x1, 3x3, with and
without BatchNormalization), activations, residual Adds, Concats, pooling,
squeeze-and-excitation gates, nearest upsampling, an attention block over the spatial
positions (LayerNormalization, MatMuls of two activations, Softmax), If and Loop nodes
whose bodies read outer tensors and hold 1x1 Convs (quantized inside them), sometimes a
dynamic batch dimension, and a classifier head or a feature-map output. The same seed
writes the same files. The model passes onnx.checker's full check and runs in
onnxruntime before it is written; prints a one-line description.
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


class Net:
    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.count, self.ops = rng, [], [], 0, []

    def fresh(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def const(self, base, array):
        name = self.fresh(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op, inputs, **attrs):
        out = self.fresh(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out + "_node", **attrs))
        self.ops.append(op)
        return out

    def conv(self, t, c_in, c_out, k, group=1):
        fan_in = c_in // group * k * k
        gain = np.exp(self.rng.normal(0, 0.7, (c_out, 1, 1, 1)))  # uneven channels
        w = (self.rng.standard_normal((c_out, c_in // group, k, k)) / np.sqrt(fan_in) * gain).astype(np.float32)
        b = (0.1 * self.rng.standard_normal(c_out)).astype(np.float32)
        return self.node("Conv", [t, self.const("w", w), self.const("b", b)], kernel_shape=[k, k],
                         pads=[k // 2] * 4, group=group)

    def activation(self, t):
        kind = self.rng.choice(["Relu", "LeakyRelu", "Sigmoid", "HardSwish", "Clip", "Tanh", "none"])
        if kind == "none":
            return t
        if kind == "Clip":
            return self.node("Clip", [t, self.const("lo", np.array(0, np.float32)), self.const("hi", np.array(6, np.float32))])
        if kind == "LeakyRelu":
            return self.node("LeakyRelu", [t], alpha=0.1)
        return self.node(kind, [t])

    def batch_norm(self, t, c):
        r = self.rng
        p = [(1 + 0.2 * r.standard_normal(c)), 0.1 * r.standard_normal(c), 0.1 * r.standard_normal(c),
             np.exp(r.normal(0, 0.3, c))]
        return self.node("BatchNormalization", [t] + [self.const("bn", a.astype(np.float32)) for a in p])


def build(seed):
    rng = np.random.default_rng(seed)
    net = Net(rng)
    dynamic = bool(rng.integers(0, 2))
    c = int(rng.choice([3, 4]))
    hw = int(rng.choice([8, 12, 16]))
    x = "x"
    pool = [(x, c, hw)]  # (tensor, channels, spatial size); every tensor is [N, c, hw, hw]
    for _ in range(int(rng.integers(3, 9))):
        t, tc, th = pool[int(rng.integers(0, len(pool)))]
        step = rng.choice(["conv", "conv", "depthwise", "residual", "concat", "pool", "gate", "upsample",
                           "attention", "if", "loop"])
        if step == "conv":
            out_c = int(rng.choice([4, 8, 16]))
            y = net.conv(t, tc, out_c, int(rng.choice([1, 3])))
            if rng.integers(0, 2):
                y = net.batch_norm(y, out_c)
            pool.append((net.activation(y), out_c, th))
        elif step == "depthwise":
            pool.append((net.activation(net.conv(t, tc, tc, 3, group=tc)), tc, th))
        elif step == "residual":
            same = [p for p in pool if p[1] == tc and p[2] == th and p[0] != t]
            if same:
                branch = net.conv(t, tc, tc, 3)
                pool.append((net.node("Add", [branch, same[-1][0]]), tc, th))
        elif step == "concat":
            same = [p for p in pool if p[2] == th and p[0] != t]
            if same:
                other = same[-1]
                pool.append((net.node("Concat", [t, other[0]], axis=1), tc + other[1], th))
        elif step == "pool" and th >= 4 and th % 2 == 0:
            if rng.integers(0, 2):
                pool.append((net.node("MaxPool", [t], kernel_shape=[2, 2], strides=[2, 2]), tc, th // 2))
            else:
                pool.append((net.node("AveragePool", [t], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), tc, th))
        elif step == "gate":
            s = net.node("GlobalAveragePool", [t])
            s = net.node("Relu", [net.conv(s, tc, max(tc // 2, 1), 1)])
            s = net.node("Sigmoid", [net.conv(s, max(tc // 2, 1), tc, 1)])
            pool.append((net.node("Mul", [t, s]), tc, th))
        elif step == "upsample" and th <= 8:
            scales = net.const("scales", np.array([1, 1, 2, 2], np.float32))
            pool.append((net.node("Resize", [t, "", scales], mode="nearest"), tc, th * 2))
        elif step == "attention":
            seq = net.node("Reshape", [t, net.const("shape", np.array([0, tc, -1], np.int64))])
            seq = net.node("Transpose", [seq], perm=[0, 2, 1])
            gamma = net.const("gamma", (1 + 0.3 * rng.standard_normal(tc)).astype(np.float32))
            beta = net.const("beta", (0.1 * rng.standard_normal(tc)).astype(np.float32))
            h = net.node("LayerNormalization", [seq, gamma, beta], axis=-1)
            w = lambda: net.const("wq", (rng.standard_normal((tc, tc)) / np.sqrt(tc)).astype(np.float32))
            q, k, v = (net.node("MatMul", [h, w()]) for _ in range(3))
            kt = net.node("Transpose", [k], perm=[0, 2, 1])
            p = net.node("Softmax", [net.node("MatMul", [q, kt])], axis=-1)
            o = net.node("Add", [net.node("MatMul", [p, v]), seq])
            o = net.node("Transpose", [o], perm=[0, 2, 1])
            shape = net.const("back", np.array([0, tc, th, th], np.int64))
            pool.append((net.node("Reshape", [o, shape]), tc, th))
        elif step == "if":
            # Branches read the outer tensor (and an outer weight) by name.
            cond = net.node("Greater", [net.node("ReduceMean", [t], keepdims=0), net.const("zero", np.array(0, np.float32))])
            # The then-branch's 1x1 Conv is quantized inside the body.
            w_then = net.const("w_then", (rng.standard_normal((tc, tc, 1, 1)) / np.sqrt(tc)).astype(np.float32))
            out_t, out_e = net.fresh("then_out"), net.fresh("else_out")
            then = helper.make_graph([helper.make_node("Conv", [t, w_then], [out_t], name=out_t + "_node")], "then", [],
                                     [helper.make_tensor_value_info(out_t, TensorProto.FLOAT, None)])
            other = helper.make_graph([helper.make_node("Relu", [t], [out_e], name=out_e + "_node")], "else", [],
                                      [helper.make_tensor_value_info(out_e, TensorProto.FLOAT, None)])
            pool.append((net.node("If", [cond], then_branch=then, else_branch=other), tc, th))
        elif step == "loop":
            # Two iterations of a residual 1x1 Conv on the carried map (quantized inside the body).
            trips = net.const("trips", np.array(2, np.int64))
            w_loop = net.const("w_loop", (0.5 * rng.standard_normal((tc, tc, 1, 1)) / np.sqrt(tc)).astype(np.float32))
            names = [net.fresh(n) for n in ("i", "c_in", "v_in", "c_out", "v_mul", "v_out")]
            i, c_in, v_in, c_out, v_mul, v_out = names
            body = helper.make_graph(
                [helper.make_node("Conv", [v_in, w_loop], [v_mul], name=v_mul + "_node"),
                 helper.make_node("Add", [v_mul, t], [v_out], name=v_out + "_node"),
                 helper.make_node("Identity", [c_in], [c_out], name=c_out + "_node")],
                "body", [helper.make_tensor_value_info(i, TensorProto.INT64, []),
                         helper.make_tensor_value_info(c_in, TensorProto.BOOL, []),
                         helper.make_tensor_value_info(v_in, TensorProto.FLOAT, None)],
                [helper.make_tensor_value_info(c_out, TensorProto.BOOL, []),
                 helper.make_tensor_value_info(v_out, TensorProto.FLOAT, None)])
            pool.append((net.node("Loop", [trips, "", t], body=body), tc, th))
    y, yc, yh = pool[-1]
    batch = "batch" if dynamic else 1
    if rng.integers(0, 2):
        g = net.node("Flatten", [net.node("GlobalAveragePool", [y])])
        wh = net.const("head", (rng.standard_normal((yc, 10)) / np.sqrt(yc)).astype(np.float32))
        out = net.node("Gemm", [g, wh, net.const("hb", np.zeros(10, np.float32))])
        out_shape = [batch, 10]
    else:
        out, out_shape = y, [batch, yc, yh, yh]
    net.nodes.append(helper.make_node("Identity", [out], ["y"], name="output"))
    graph = helper.make_graph(net.nodes, f"random_{seed}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, c, hw, hw])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], net.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, (c, hw), net.ops, dynamic


def main():
    seed, path, calib = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    model, (c, hw), ops, dynamic = build(seed)
    onnx.checker.check_model(model, full_check=True)
    rng = np.random.default_rng(seed + 1)
    os.makedirs(calib, exist_ok=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for i in range(6):
        x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
        sess.run(None, {"x": x})
        np.save(os.path.join(calib, f"s{i}.npy"), x)
    onnx.save(model, path)
    print(f"seed {seed}: {len(ops)} nodes, input 1x{c}x{hw}x{hw}{' (dynamic batch)' if dynamic else ''}: {' '.join(ops)}")


if __name__ == "__main__":
    main()
