#!/usr/bin/env python3
"""Writes a model with control flow (If, Loop or Scan) whose bodies read outer values,
and calibration samples for it.

usage: make_control_flow.py KIND MODEL CALIB N [--seed S]

KIND: `if` (a Conv, then an If on the sign of its mean whose branches read the Conv
output and an outer weight, then a Conv), `loop` (a Conv, then a Loop of 3 iterations
carrying a feature map through a Conv-like MatMul on an outer weight, with a scan
output, then a Gemm head), `scan` (an RNN written as a Scan over the time axis of a
[1, T, 8] sequence, T = 6-12 per sample, reading outer weights), `nested` (an If whose
then-branch holds a Loop that reads a value two scopes out), `weighted` (the weighted
ops inside the bodies: an If whose then-branch runs a Loop of two Conv + Relu steps and
whose else-branch a Conv + Sigmoid, all on outer weights, between two outer Convs).
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def init(name, a):
    return numpy_helper.from_array(np.asarray(a, dtype=np.float32) if np.asarray(a).dtype.kind == "f" else np.asarray(a), name)


def conv(rng, name, x, cin, cout, out):
    w = (rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(cin * 9)).astype(np.float32)
    b = (0.1 * rng.standard_normal(cout)).astype(np.float32)
    return [helper.make_node("Conv", [x, name + "_w", name + "_b"], [out], name=name, pads=[1, 1, 1, 1])], [init(name + "_w", w), init(name + "_b", b)]


def model_if(rng):
    nodes, inits = conv(rng, "conv1", "x", 3, 8, "c1")
    nodes.append(helper.make_node("ReduceMean", ["c1"], ["mean"], name="mean", keepdims=0))
    nodes.append(helper.make_node("Greater", ["mean", "zero"], ["cond"], name="positive"))
    inits.append(init("zero", np.array(0.0, np.float32)))
    inits.append(init("gain", (1 + 0.2 * rng.standard_normal((1, 8, 1, 1))).astype(np.float32)))
    then = helper.make_graph(
        [helper.make_node("Relu", ["c1"], ["t1"], name="then_relu"),
         helper.make_node("Mul", ["t1", "gain"], ["then_out"], name="then_mul")],
        "then", [], [helper.make_tensor_value_info("then_out", F, None)])
    other = helper.make_graph(
        [helper.make_node("Sigmoid", ["c1"], ["else_out"], name="else_sigmoid")],
        "else", [], [helper.make_tensor_value_info("else_out", F, None)])
    nodes.append(helper.make_node("If", ["cond"], ["branched"], name="if", then_branch=then, else_branch=other))
    n2, i2 = conv(rng, "conv2", "branched", 8, 4, "y")
    return nodes + n2, inits + i2, [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])], [helper.make_tensor_value_info("y", F, [1, 4, 8, 8])]


def model_loop(rng):
    nodes, inits = conv(rng, "conv1", "x", 3, 8, "c1")
    nodes.append(helper.make_node("Flatten", ["c1"], ["flat"], name="flat", axis=2))  # [1, 8, 64]
    inits.append(init("mix", (rng.standard_normal((64, 64)) / 8).astype(np.float32)))
    inits.append(init("trips", np.array(3, np.int64)))
    body = helper.make_graph(
        [helper.make_node("MatMul", ["state_in", "mix"], ["mixed"], name="body_matmul"),
         helper.make_node("Tanh", ["mixed"], ["state_out"], name="body_tanh"),
         helper.make_node("ReduceMax", ["state_out"], ["peak"], name="body_peak", keepdims=0),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")],
        "loop_body",
        [helper.make_tensor_value_info("iter", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("state_in", F, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("state_out", F, None),
         helper.make_tensor_value_info("peak", F, None)])
    nodes.append(helper.make_node("Loop", ["trips", "", "flat"], ["final", "peaks"], name="loop", body=body))
    nodes.append(helper.make_node("Flatten", ["final"], ["final_flat"], name="final_flat", axis=0))
    inits.append(init("head_w", (rng.standard_normal((512, 10)) / 20).astype(np.float32)))
    inits.append(init("head_b", np.zeros(10, np.float32)))
    nodes.append(helper.make_node("Gemm", ["final_flat", "head_w", "head_b"], ["y"], name="head"))
    return nodes, inits, [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])], [
        helper.make_tensor_value_info("y", F, [1, 10]), helper.make_tensor_value_info("peaks", F, [3])]


def model_scan(rng):
    inits = [init("w_in", (rng.standard_normal((8, 16)) / 3).astype(np.float32)),
             init("w_rec", (rng.standard_normal((16, 16)) / 4).astype(np.float32)),
             init("h0", np.zeros((1, 16), np.float32))]
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "w_in"], ["a"], name="body_in"),
         helper.make_node("MatMul", ["h_in", "w_rec"], ["b"], name="body_rec"),
         helper.make_node("Add", ["a", "b"], ["s"], name="body_add"),
         helper.make_node("Tanh", ["s"], ["h_out"], name="body_tanh"),
         helper.make_node("Identity", ["h_out"], ["y_t"], name="body_y")],
        "scan_body",
        [helper.make_tensor_value_info("h_in", F, [1, 16]), helper.make_tensor_value_info("x_t", F, [1, 8])],
        [helper.make_tensor_value_info("h_out", F, [1, 16]), helper.make_tensor_value_info("y_t", F, [1, 16])])
    nodes = [helper.make_node("Scan", ["h0", "seq"], ["h_last", "ys"], name="scan", body=body,
                              num_scan_inputs=1, scan_input_axes=[1], scan_output_axes=[1])]
    inits.append(init("out_w", (rng.standard_normal((16, 4)) / 4).astype(np.float32)))
    nodes.append(helper.make_node("MatMul", ["ys", "out_w"], ["y"], name="out_proj"))
    return nodes, inits, [helper.make_tensor_value_info("seq", F, [1, "time", 8])], [
        helper.make_tensor_value_info("y", F, [16, "time", 4]) if False else helper.make_tensor_value_info("y", F, [1, "time", 4]),
        helper.make_tensor_value_info("h_last", F, [1, 16])]


def model_nested(rng):
    nodes, inits = conv(rng, "conv1", "x", 3, 4, "c1")
    inits.append(init("scale", np.array(0.5, np.float32)))
    inits.append(init("two", np.array(2, np.int64)))
    nodes.append(helper.make_node("ReduceMean", ["c1"], ["mean"], name="mean", keepdims=0))
    nodes.append(helper.make_node("Greater", ["mean", "scale"], ["cond"], name="gt"))
    loop_body = helper.make_graph(
        [helper.make_node("Mul", ["v_in", "scale"], ["v_mul"], name="inner_mul"),
         helper.make_node("Add", ["v_mul", "c1"], ["v_out"], name="inner_add"),
         helper.make_node("Identity", ["c_in"], ["c_out"], name="inner_cond")],
        "inner", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                  helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                  helper.make_tensor_value_info("v_in", F, None)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("v_out", F, None)])
    then = helper.make_graph(
        [helper.make_node("Loop", ["two", "", "c1"], ["looped"], name="inner_loop", body=loop_body)],
        "then", [], [helper.make_tensor_value_info("looped", F, None)])
    other = helper.make_graph([helper.make_node("Neg", ["c1"], ["negated"], name="neg")], "else", [],
                              [helper.make_tensor_value_info("negated", F, None)])
    nodes.append(helper.make_node("If", ["cond"], ["branched"], name="outer_if", then_branch=then, else_branch=other))
    n2, i2 = conv(rng, "conv2", "branched", 4, 4, "y")
    return nodes + n2, inits + i2, [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])], [helper.make_tensor_value_info("y", F, [1, 4, 8, 8])]


def model_weighted(rng):
    nodes, inits = conv(rng, "conv1", "x", 3, 8, "c1")
    inits.append(init("zero", np.array(0.0, np.float32)))
    inits.append(init("two", np.array(2, np.int64)))
    nodes.append(helper.make_node("ReduceMean", ["c1"], ["mean"], name="mean", keepdims=0))
    nodes.append(helper.make_node("Greater", ["mean", "zero"], ["cond"], name="positive"))
    step, step_inits = conv(rng, "step_conv", "v_in", 8, 8, "v_conv")
    loop_body = helper.make_graph(
        step + [helper.make_node("Relu", ["v_conv"], ["v_out"], name="step_relu"),
                helper.make_node("Identity", ["c_in"], ["c_out"], name="step_cond")],
        "step", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("v_in", F, None)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("v_out", F, None)])
    then = helper.make_graph(
        [helper.make_node("Loop", ["two", "", "c1"], ["looped"], name="steps", body=loop_body)],
        "then", [], [helper.make_tensor_value_info("looped", F, None)])
    other_conv, other_inits = conv(rng, "else_conv", "c1", 8, 8, "e1")
    other = helper.make_graph(other_conv + [helper.make_node("Sigmoid", ["e1"], ["gated"], name="else_sigmoid")],
                              "else", [], [helper.make_tensor_value_info("gated", F, None)])
    nodes.append(helper.make_node("If", ["cond"], ["branched"], name="branch", then_branch=then, else_branch=other))
    n2, i2 = conv(rng, "conv2", "branched", 8, 4, "y")
    return nodes + n2, inits + step_inits + other_inits + i2, [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])], [
        helper.make_tensor_value_info("y", F, [1, 4, 8, 8])]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["if", "loop", "scan", "nested", "weighted"])
    p.add_argument("model")
    p.add_argument("calib")
    p.add_argument("n", type=int)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    nodes, inits, inputs, outputs = {"if": model_if, "loop": model_loop, "scan": model_scan, "nested": model_nested,
                                     "weighted": model_weighted}[a.kind](rng)
    g = helper.make_graph(nodes, a.kind, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, a.model)
    os.makedirs(a.calib, exist_ok=True)
    data = np.random.default_rng(a.seed + 1)
    for i in range(a.n):
        if a.kind == "scan":
            x = data.standard_normal((1, int(data.integers(6, 13)), 8)).astype(np.float32)
        else:
            # Both signs of the mean, so both branches run.
            x = (data.standard_normal((1, 3, 8, 8)) + (0.8 if i % 2 else -0.8)).astype(np.float32)
        np.save(os.path.join(a.calib, f"s{i:02d}.npy"), x)


if __name__ == "__main__":
    main()
