#!/usr/bin/env python3
"""Writes the seed corpus of the `decode_model` fuzz target (at most 200 KB in all).

Seeds: rtq's bundled models/tinyresnet.onnx, the small "light" models shipped in the
onnx wheel (alexnet, squeezenet, vgg19, zfnet512: opset 6-9, IR 3, ConstantOfShape
weights), and tiny onnx.helper models that each reach one import path of the
frontend: every opset-dependent canonicalisation (Upsample, Resize-10, legacy
Softmax, attribute-to-input moves for Slice/Pad/Clip/Squeeze/Unsqueeze/Split/TopK,
Reduce* axes inputs at opset 18), Constant nodes in all their forms, tensors of every
element type as typed fields and as raw_data, omitted optional inputs/outputs, IR-3
initializers listed as inputs, plus models the importer must reject (unsupported op,
dangling input, duplicate output, external data without a directory, bad raw_data,
raw_data whose byte count overflows).

Usage: python3 fuzz/make_corpus.py [--out DIR] [--tiny-only]
  --out        default: fuzz/corpus/decode_model
  --tiny-only  only the onnx.helper models (what fuzz/seeds/ holds, committed)
"""
import argparse
import hashlib
import importlib.util
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUDGET = 200 * 1024
F = TensorProto.FLOAT


def model(nodes, inputs, outputs, opset=13, inits=(), ir=7, value_info=()):
    graph = helper.make_graph(nodes, "seed", inputs, outputs, initializer=list(inits), value_info=list(value_info))
    m = helper.make_model(graph, producer_name="rtq-fuzz-seed", opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m.SerializeToString()


def vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def unary(op, opset=13, shape=(1, 4), **attrs):
    return model([helper.make_node(op, ["x"], ["y"], name=op.lower(), **attrs)], [vi("x", list(shape))],
                 [vi("y", None)], opset)


def tiny_models():
    """(name, bytes) of the hand-written seeds."""
    seeds = []
    add = lambda name, data: seeds.append((name, data))  # noqa: E731

    add("relu_opset13", unary("Relu"))
    add("sigmoid_symbolic_dims", unary("Sigmoid", shape=("N", 3)))
    w = numpy_helper.from_array(np.arange(2 * 3 * 3 * 3, dtype=np.float32).reshape(2, 3, 3, 3) / 50, "w")
    bn = [numpy_helper.from_array(np.full(2, v, np.float32), n) for n, v in
          (("g", 1.0), ("b", 0.1), ("m", 0.0), ("v", 1.0))]
    fc = helper.make_tensor("fc", F, [4, 2], [0.5, -0.5] * 4)  # typed float_data
    add("conv_bn_gemm", model([
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["n"], name="bn", epsilon=1e-5),
        helper.make_node("Relu", ["n"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="gap"),
        helper.make_node("Flatten", ["p"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fc"], ["y"], name="gemm", transB=1),
        helper.make_node("Softmax", ["y"], ["z"], name="softmax", axis=1),
    ], [vi("x", [1, 3, 8, 8])], [vi("z", [1, 4])], 13, [w, *bn, fc]))

    # Opset-dependent forms the frontend canonicalises.
    add("upsample_opset9", model([helper.make_node("Upsample", ["x", "s"], ["y"], mode="nearest")],
                                 [vi("x", [1, 1, 2, 2])], [vi("y", None)], 9,
                                 [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")]))
    add("upsample_opset7_attr", unary("Upsample", 7, (1, 1, 2, 2), scales=[1.0, 1.0, 2.0, 2.0], mode="bilinear"))
    add("resize_opset10", model([helper.make_node("Resize", ["x", "s"], ["y"], mode="linear")],
                                [vi("x", [1, 1, 2, 2])], [vi("y", None)], 10,
                                [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")]))
    add("softmax_opset11_axis1", unary("Softmax", 11, (2, 3, 4), axis=1))
    add("logsoftmax_opset11_last", unary("LogSoftmax", 11, (2, 3), axis=-1))
    add("hardmax_opset11_unknown_rank", model([helper.make_node("Hardmax", ["x"], ["y"])],
                                              [helper.make_tensor_value_info("x", F, None)], [vi("y", None)], 11))
    add("slice_opset9_attrs", unary("Slice", 9, (4, 4), starts=[1], ends=[3], axes=[0]))
    add("pad_opset7_attrs", unary("Pad", 7, (2, 2), pads=[1, 1, 1, 1], value=0.5))
    add("clip_opset7_attrs", unary("Clip", 7, (4,), min=0.0, max=6.0))
    add("squeeze_opset11_axes", unary("Squeeze", 11, (1, 4), axes=[0]))
    add("unsqueeze_opset11_axes", unary("Unsqueeze", 11, (4,), axes=[0]))
    add("reducesum_opset11_axes", unary("ReduceSum", 11, (2, 4), axes=[1], keepdims=0))
    add("split_opset11_attr", model([helper.make_node("Split", ["x"], ["a", "b"], axis=0, split=[1, 3])],
                                    [vi("x", [4])], [vi("a", None), vi("b", None)], 11))
    add("split_opset18_num_outputs", model([helper.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=2)],
                                           [vi("x", [4])], [vi("a", None), vi("b", None)], 18))
    add("topk_opset9_attr", model([helper.make_node("TopK", ["x"], ["v", "i"], k=2)],
                                  [vi("x", [1, 5])], [vi("v", None), vi("i", None, TensorProto.INT64)], 9))
    add("reducemean_opset18_axes_input", model(
        [helper.make_node("ReduceMean", ["x", "ax"], ["y"], keepdims=1)], [vi("x", [2, 4])], [vi("y", None)], 18,
        [numpy_helper.from_array(np.array([1], np.int64), "ax")]))
    add("reducemax_opset18_axes_from_graph_input", model(
        [helper.make_node("ReduceMax", ["x", "ax"], ["y"])],
        [vi("x", [2, 4]), vi("ax", [1], TensorProto.INT64)], [vi("y", None)], 18))
    add("dropout_unused_mask", model(
        [helper.make_node("Dropout", ["x"], ["y", ""], ratio=0.3), helper.make_node("Identity", ["y"], ["z"])],
        [vi("x", [3])], [vi("z", None)], 11))
    add("clip_omitted_min", model([helper.make_node("Clip", ["x", "", "mx"], ["y"])], [vi("x", [3])],
                                  [vi("y", None)], 13, [numpy_helper.from_array(np.array(6.0, np.float32), "mx")]))

    # Constant nodes in all their forms, and tensors of every element type.
    consts = [
        helper.make_node("Constant", [], ["c0"], value=helper.make_tensor("t", F, [2], [1.0, 2.0])),
        helper.make_node("Constant", [], ["c1"], value_float=3.0),
        helper.make_node("Constant", [], ["c2"], value_floats=[1.0, 2.0]),
        helper.make_node("Constant", [], ["c3"], value_int=4),
        helper.make_node("Constant", [], ["c4"], value_ints=[1, 2]),
        helper.make_node("Add", ["c0", "c2"], ["s"]),
        helper.make_node("Mul", ["s", "c1"], ["y"]),
        helper.make_node("Add", ["c3", "c4"], ["yi"]),
    ]
    add("constants", model(consts, [], [vi("y", None), vi("yi", None, TensorProto.INT64)], 13))
    typed = []
    for i, dt in enumerate([TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.INT8, TensorProto.UINT8,
                            TensorProto.INT16, TensorProto.UINT16, TensorProto.INT32, TensorProto.UINT32,
                            TensorProto.INT64, TensorProto.UINT64, TensorProto.BOOL, TensorProto.DOUBLE]):
        vals = [1, 0] if dt != TensorProto.DOUBLE else [1.5, -2.0]
        raw = i % 2 == 0
        if raw:
            np_dt = helper.tensor_dtype_to_np_dtype(dt)
            typed.append(helper.make_tensor(f"t{i}", dt, [2], np.array(vals).astype(np_dt).tobytes(), raw=True))
        else:
            typed.append(helper.make_tensor(f"t{i}", dt, [2], vals))
    typed.append(helper.make_tensor("str", TensorProto.STRING, [1], [b"hello"]))
    add("all_dtypes", model([helper.make_node("Identity", [t.name], [f"o{k}"]) for k, t in enumerate(typed)],
                            [], [vi(f"o{k}", None, t.data_type) for k, t in enumerate(typed)], 13, typed))

    # IR 3: initializers are also graph inputs.
    b = numpy_helper.from_array(np.ones(4, np.float32), "bias")
    add("ir3_initializer_inputs", model([helper.make_node("Add", ["x", "bias"], ["y"])],
                                        [vi("x", [1, 4]), vi("bias", [4])], [vi("y", None)], 8, [b], ir=3))
    add("value_info_declared", model([helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])],
                                     [vi("x", [2])], [vi("y", [2])], 13, value_info=[vi("h", [2])]))
    add("nodes_out_of_order", model([helper.make_node("Neg", ["h"], ["y"]), helper.make_node("Relu", ["x"], ["h"])],
                                    [vi("x", [2])], [vi("y", None)], 13))
    add("qdq", model([helper.make_node("QuantizeLinear", ["x", "sc", "zp"], ["q"]),
                      helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["y"])],
                     [vi("x", [4])], [vi("y", None)], 13,
                     [numpy_helper.from_array(np.array(0.1, np.float32), "sc"),
                      numpy_helper.from_array(np.array(0, np.int8), "zp")]))

    # Inputs the importer must reject with an error.
    add("bad_custom_domain", model([helper.make_node("Foo", ["x"], ["y"], domain="com.example")],
                                   [vi("x", [1])], [vi("y", None)], 13))
    add("bad_dangling_input", model([helper.make_node("Relu", ["ghost"], ["y"])], [vi("x", [1])],
                                    [vi("y", None)], 13))
    add("bad_duplicate_output", model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])],
                                      [vi("x", [1])], [vi("y", None)], 13))
    add("bad_cycle", model([helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Neg", ["a"], ["b"])],
                           [vi("x", [1])], [vi("a", None)], 13))
    ext = TensorProto(name="w", data_type=F, dims=[4])
    ext.data_location = TensorProto.EXTERNAL
    ext.external_data.add(key="location", value="w.bin")
    ext.external_data.add(key="offset", value="0")
    ext.external_data.add(key="length", value="16")
    add("bad_external_data", model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [4])],
                                   [vi("y", None)], 13, [ext]))
    short = TensorProto(name="w", data_type=F, dims=[4], raw_data=b"\x00" * 12)
    add("bad_short_raw_data", model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [4])],
                                    [vi("y", None)], 13, [short]))
    # Regression: 2^62+1 floats in 4 bytes of raw_data overflowed the byte count (a panic).
    huge = TensorProto(name="w", data_type=F, dims=[(1 << 62) + 1], raw_data=b"\x00" * 4)
    add("regress_raw_bytes_overflow", model([helper.make_node("Relu", ["w"], ["y"])], [], [vi("y", None)], 13, [huge]))
    add("bad_old_opset", unary("Relu", 5))
    add("bad_arity", model([helper.make_node("Add", ["x"], ["y"])], [vi("x", [1])], [vi("y", None)], 13))
    add("bad_subgraph_attr", model(
        [helper.make_node("Relu", ["x"], ["y"], body=helper.make_graph([], "g", [], []))],
        [vi("x", [1])], [vi("y", None)], 13))
    return seeds


def file_seeds():
    """(name, bytes) of the bundled model and the onnx wheel's small light models."""
    out = []
    paths = [os.path.join(ROOT, "models", "tinyresnet.onnx")]
    spec = importlib.util.find_spec("onnx")
    if spec and spec.submodule_search_locations:
        light = os.path.join(list(spec.submodule_search_locations)[0], "backend", "test", "data", "light")
        paths += [os.path.join(light, f"light_{n}.onnx") for n in ("bvlc_alexnet", "zfnet512", "vgg19", "squeezenet")]
    for p in paths:
        if os.path.isfile(p):
            with open(p, "rb") as f:
                out.append((os.path.splitext(os.path.basename(p))[0], f.read()))
        else:
            print(f"note: {p} not found, not seeded", file=sys.stderr)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "fuzz", "corpus", "decode_model"))
    ap.add_argument("--tiny-only", action="store_true")
    args = ap.parse_args()
    seeds = tiny_models() + ([] if args.tiny_only else file_seeds())
    total = sum(len(d) for _, d in seeds)
    if total > BUDGET:
        sys.exit(f"seed corpus would be {total} bytes, over the {BUDGET}-byte budget")
    os.makedirs(args.out, exist_ok=True)
    for name, data in seeds:
        digest = hashlib.sha1(data).hexdigest()[:10]
        with open(os.path.join(args.out, f"{name}-{digest}.onnx"), "wb") as f:
            f.write(data)
    print(f"wrote {len(seeds)} seeds ({total} bytes) to {args.out}")


if __name__ == "__main__":
    main()
