"""Generates random single-op ONNX models and records the output shapes onnxruntime
computes for them: the ground truth for rtq-passes' shape inference rules.

usage: single_op_models.py OUTDIR [COUNT_PER_OP] [SEED]

Writes OUTDIR/<op>_<i>.onnx and prints a JSON list of cases:
{"file", "op", "static", "inputs": {name: fed shape}, "shapes": {output: shape}}.
Configurations onnxruntime rejects are left out. Symbolic input dimensions are named
N (fed as 2), H and W (fed as the sizes drawn for the case).
"""
import json
import os
import random
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OPSET = 18


def rand_dims(rng, rank, lo=1, hi=6):
    return [rng.randint(lo, hi) for _ in range(rank)]


def case_conv(rng):
    spatial = rng.randint(1, 3)
    g = rng.choice([1, 1, 2, 3])
    c, m = g * rng.randint(1, 3), g * rng.randint(1, 3)
    k = [rng.randint(1, 4) for _ in range(spatial)]
    d = [rng.randint(1, 2) for _ in range(spatial)]
    s = [rng.randint(1, 3) for _ in range(spatial)]
    size = [rng.randint(1, 12) for _ in range(spatial)]
    attrs = dict(kernel_shape=k, strides=s, dilations=d, group=g)
    ap = rng.choice(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
    if ap == "NOTSET":
        attrs["pads"] = [rng.randint(0, 2) for _ in range(2 * spatial)]
    else:
        attrs["auto_pad"] = ap
    x = [2, c] + size
    inits = [("w", np.zeros([m, c // g] + k, np.float32))]
    if rng.random() < 0.5:
        inits.append(("b", np.zeros([m], np.float32)))
    return "Conv", {"x": x}, inits, attrs, 1


def case_conv_transpose(rng):
    spatial = rng.randint(1, 2)
    g = rng.choice([1, 2])
    c, mg = g * rng.randint(1, 2), rng.randint(1, 3)
    k = [rng.randint(1, 4) for _ in range(spatial)]
    s = [rng.randint(1, 3) for _ in range(spatial)]
    d = [rng.randint(1, 2) for _ in range(spatial)]
    size = [rng.randint(1, 6) for _ in range(spatial)]
    attrs = dict(kernel_shape=k, strides=s, dilations=d, group=g)
    mode = rng.choice(["pads", "pads", "same", "output_shape"])
    if mode == "pads":
        attrs["pads"] = [rng.randint(0, 1) for _ in range(2 * spatial)]
        attrs["output_padding"] = [rng.randint(0, max(s[i], d[i]) - 1) for i in range(spatial)]
    elif mode == "same":
        attrs["auto_pad"] = rng.choice(["SAME_UPPER", "SAME_LOWER"])
    else:
        attrs["output_shape"] = [size[i] * s[i] + rng.randint(0, s[i] - 1) for i in range(spatial)]
    return "ConvTranspose", {"x": [1, c] + size}, [("w", np.zeros([c, mg] + k, np.float32))], attrs, 1


def case_pool(rng):
    op = rng.choice(["MaxPool", "AveragePool"])
    spatial = rng.randint(1, 2)
    k = [rng.randint(1, 4) for _ in range(spatial)]
    s = [rng.randint(1, 3) for _ in range(spatial)]
    size = [rng.randint(4, 12) for _ in range(spatial)]
    attrs = dict(kernel_shape=k, strides=s, ceil_mode=rng.randint(0, 1))
    if op == "MaxPool" and rng.random() < 0.3:
        attrs["dilations"] = [rng.randint(1, 2) for _ in range(spatial)]
    ap = rng.choice(["NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "VALID"])
    if ap == "NOTSET":
        attrs["pads"] = [rng.randint(0, k[i % spatial] - 1) for i in range(2 * spatial)]
    else:
        attrs["auto_pad"] = ap
    return op, {"x": [1, 2] + size}, [], attrs, 1


def case_slice(rng):
    rank = rng.randint(1, 4)
    x = rand_dims(rng, rank, 1, 9)
    naxes = rng.randint(1, rank)
    axes = rng.sample(range(rank), naxes)
    starts, ends, steps = [], [], []
    for a in axes:
        step = rng.choice([1, 1, 2, 3, -1, -2])
        starts.append(rng.choice([0, 1, -1, -2, x[a], 100, -100, rng.randint(-x[a], x[a])]))
        ends.append(rng.choice([x[a], -1, 2, 2**62, -(2**62), rng.randint(-x[a], x[a])]))
        steps.append(step)
    axes = [a - rank if rng.random() < 0.3 else a for a in axes]
    inits = [(n, np.array(v, np.int64)) for n, v in [("starts", starts), ("ends", ends), ("axes", axes), ("steps", steps)]]
    return "Slice", {"x": x}, inits, {}, 1


def case_pad(rng):
    rank = rng.randint(1, 4)
    x = rand_dims(rng, rank, 2, 6)
    pads = [rng.randint(-1, 3) for _ in range(2 * rank)]
    inits = [("pads", np.array(pads, np.int64))]
    if rng.random() < 0.3:
        naxes = rng.randint(1, rank)
        axes = rng.sample(range(rank), naxes)
        pads = [rng.randint(0, 2) for _ in range(2 * naxes)]
        inits = [("pads", np.array(pads, np.int64)), ("value", np.array(0.0, np.float32)), ("axes", np.array(axes, np.int64))]
    return "Pad", {"x": x}, inits, {"mode": rng.choice(["constant", "edge", "reflect"])}, 1


def case_resize(rng):
    x = [1, 2, rng.randint(1, 9), rng.randint(1, 9)]
    attrs = {"mode": rng.choice(["nearest", "linear"]),
             "coordinate_transformation_mode": rng.choice(["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"])}
    if rng.random() < 0.5:
        scales = [1.0, 1.0, rng.choice([0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 0.3, 0.7]), rng.choice([0.5, 1.0, 2.0, 1.7, 0.6])]
        inits = [("roi", np.zeros([0], np.float32)), ("scales", np.array(scales, np.float32))]
    else:
        sizes = [1, 2, rng.randint(1, 12), rng.randint(1, 12)]
        inits = [("roi", np.zeros([0], np.float32)), ("scales", np.zeros([0], np.float32)), ("sizes", np.array(sizes, np.int64))]
    return "Resize", {"x": x}, inits, attrs, 1


def case_reshape(rng):
    x = rand_dims(rng, rng.randint(1, 4), 1, 5)
    total = int(np.prod(x))
    target = []
    rest = total
    while rest > 1 and len(target) < 3:
        divisors = [d for d in range(1, rest + 1) if rest % d == 0]
        d = rng.choice(divisors)
        target.append(d)
        rest //= d
    target.append(rest)
    rng.shuffle(target)
    if rng.random() < 0.5:
        target[rng.randrange(len(target))] = -1
    for i in range(min(len(x), len(target))):
        if target[i] == x[i] and rng.random() < 0.5:
            target[i] = 0
    return "Reshape", {"x": x}, [("shape", np.array(target, np.int64))], {}, 1


def case_split(rng):
    rank = rng.randint(1, 3)
    x = rand_dims(rng, rank, 2, 8)
    axis = rng.randrange(rank)
    if rng.random() < 0.5:
        parts = []
        rest = x[axis]
        while rest > 0:
            p = rng.randint(1, rest)
            parts.append(p)
            rest -= p
        return "Split", {"x": x}, [("split", np.array(parts, np.int64))], {"axis": axis}, len(parts)
    divisors = [d for d in range(1, x[axis] + 1) if x[axis] % d == 0]
    n = rng.choice(divisors)
    return "Split", {"x": x}, [], {"axis": axis - rank, "num_outputs": n}, n


def case_gather(rng):
    rank = rng.randint(1, 3)
    x = rand_dims(rng, rank, 2, 5)
    axis = rng.randrange(rank)
    ishape = rand_dims(rng, rng.randint(0, 2), 1, 3)
    idx = np.array(np.random.default_rng(rng.randint(0, 99)).integers(-x[axis], x[axis], ishape), np.int64)
    return "Gather", {"x": x}, [("i", idx)], {"axis": axis - rank if rng.random() < 0.3 else axis}, 1


def case_matmul(rng):
    m, k, n = rand_dims(rng, 3)
    batch = rand_dims(rng, rng.randint(0, 2))
    a = batch + [m, k]
    b = [rng.choice([1, d]) for d in batch][rng.randint(0, len(batch)):] + [k, n]
    if rng.random() < 0.2:
        a = [k]
    elif rng.random() < 0.2:
        b = [k]
    return "MatMul", {"a": a, "b": b}, [], {}, 1


def case_gemm(rng):
    m, k, n = rand_dims(rng, 3)
    ta, tb = rng.randint(0, 1), rng.randint(0, 1)
    a = [k, m] if ta else [m, k]
    b = [n, k] if tb else [k, n]
    c = rng.choice([[n], [1, n], [m, 1], [m, n], []])
    return "Gemm", {"a": a}, [("b", np.zeros(b, np.float32)), ("c", np.zeros(c, np.float32))], {"transA": ta, "transB": tb}, 1


def case_reduce(rng):
    op = rng.choice(["ReduceMean", "ReduceSum", "ReduceMax", "ReduceL2"])
    rank = rng.randint(1, 4)
    x = rand_dims(rng, rank)
    axes = rng.sample(range(-rank, rank), rng.randint(0, rank))
    axes = [a for i, a in enumerate(axes) if a % rank not in [b % rank for b in axes[:i]]]
    inits = [("axes", np.array(axes, np.int64))] if axes or rng.random() < 0.5 else []
    return op, {"x": x}, inits, {"keepdims": rng.randint(0, 1)}, 1


def case_misc(rng):
    choice = rng.choice(["Flatten", "Transpose", "Squeeze", "Unsqueeze", "Expand", "Tile", "DepthToSpace",
                         "SpaceToDepth", "TopK", "Concat", "ArgMax", "LayerNormalization", "GlobalAveragePool", "Where"])
    rank = rng.randint(1, 4)
    x = rand_dims(rng, rank)
    if choice == "Flatten":
        return choice, {"x": x}, [], {"axis": rng.randint(-rank, rank)}, 1
    if choice == "Transpose":
        perm = list(range(rank))
        rng.shuffle(perm)
        return choice, {"x": x}, [], {"perm": perm}, 1
    if choice == "Squeeze":
        x = [rng.choice([1, d]) for d in x]
        ones = [i for i, d in enumerate(x) if d == 1]
        if ones and rng.random() < 0.7:
            return choice, {"x": x}, [("axes", np.array(rng.sample(ones, rng.randint(1, len(ones))), np.int64))], {}, 1
        return choice, {"x": x}, [], {}, 1
    if choice == "Unsqueeze":
        n = rng.randint(1, 2)
        axes = rng.sample(range(-(rank + n), rank + n), n)
        if len({a % (rank + n) for a in axes}) < n:
            axes = axes[:1]
        return choice, {"x": x}, [("axes", np.array(axes, np.int64))], {}, 1
    if choice == "Expand":
        x = [rng.choice([1, d]) for d in x]
        target = [rng.choice([1, d if d > 1 else rng.randint(1, 4)]) for d in x]
        target = rand_dims(rng, rng.randint(0, 1)) + target
        return choice, {"x": x}, [("shape", np.array(target, np.int64))], {}, 1
    if choice == "Tile":
        return choice, {"x": x}, [("repeats", np.array(rand_dims(rng, rank, 1, 3), np.int64))], {}, 1
    if choice == "DepthToSpace":
        b = rng.randint(1, 3)
        return choice, {"x": [1, b * b * rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 4)]}, [], {"blocksize": b}, 1
    if choice == "SpaceToDepth":
        b = rng.randint(1, 3)
        return choice, {"x": [1, 2, b * rng.randint(1, 3), b * rng.randint(1, 3)]}, [], {"blocksize": b}, 1
    if choice == "TopK":
        axis = rng.randint(-rank, rank - 1)
        k = rng.randint(1, x[axis])
        return choice, {"x": x}, [("k", np.array([k], np.int64))], {"axis": axis}, 2
    if choice == "Concat":
        axis = rng.randrange(rank)
        y = list(x)
        y[axis] = rng.randint(1, 5)
        return choice, {"x": x, "y": y}, [], {"axis": axis}, 1
    if choice == "ArgMax":
        return choice, {"x": x}, [], {"axis": rng.randint(-rank, rank - 1), "keepdims": rng.randint(0, 1)}, 1
    if choice == "LayerNormalization":
        axis = rng.randint(-rank, rank - 1)
        return choice, {"x": x}, [("scale", np.ones(x[axis % rank:], np.float32))], {"axis": axis}, 3
    if choice == "GlobalAveragePool":
        return choice, {"x": [1, 2] + rand_dims(rng, rng.randint(1, 2))}, [], {}, 1
    cond = [rng.choice([1, d]) for d in x]
    return "Where", {"c": cond, "x": x, "y": x[rng.randint(0, rank):]}, [], {}, 1


def case_einsum(rng):
    letters = "abcdef"
    size = {c: rng.randint(1, 4) for c in letters}
    n_inputs = rng.randint(1, 2)
    terms = []
    for _ in range(n_inputs):
        k = rng.randint(1, 3)
        terms.append("".join(rng.sample(letters[:4], k)))
    used = sorted(set("".join(terms)))
    ellipsis = rng.random() < 0.3
    inputs = {}
    for i, t in enumerate(terms):
        batch = [rng.choice([1, 2])] if ellipsis else []
        inputs[f"x{i}"] = batch + [size[c] for c in t]
    if ellipsis:
        terms = ["..." + t for t in terms]
    if rng.random() < 0.5:
        out = "".join(rng.sample(used, rng.randint(0, len(used))))
        equation = ",".join(terms) + "->" + ("..." if ellipsis else "") + out
    else:
        equation = ",".join(terms)
    return "Einsum", inputs, [], {"equation": equation}, 1


def case_recurrent(rng):
    op = rng.choice(["RNN", "GRU", "LSTM"])
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    dirs = rng.choice([1, 2])
    hidden, inp, seq, batch = rng.randint(1, 5), rng.randint(1, 4), rng.randint(1, 5), rng.randint(1, 3)
    layout = rng.randint(0, 1)
    x = [batch, seq, inp] if layout else [seq, batch, inp]
    attrs = {"hidden_size": hidden, "direction": "bidirectional" if dirs == 2 else "forward", "layout": layout}
    inits = [("w", np.zeros([dirs, gates * hidden, inp], np.float32)), ("r", np.zeros([dirs, gates * hidden, hidden], np.float32))]
    return op, {"x": x}, inits, attrs, 3 if op == "LSTM" else 2


def case_grid_sample(rng):
    x = [rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 6), rng.randint(1, 6)]
    grid = [x[0], rng.randint(1, 5), rng.randint(1, 5), 2]
    return "GridSample", {"x": x, "grid": grid}, [], {"mode": rng.choice(["bilinear", "nearest"])}, 1


GENERATORS = [case_einsum, case_conv, case_conv_transpose, case_pool, case_slice, case_pad, case_resize, case_reshape,
              case_split, case_gather, case_matmul, case_gemm, case_reduce, case_misc]


def build(op, inputs, inits, attrs, n_out, symbolic):
    graph_inputs, feeds, fed = [], {}, {}
    for name, shape in inputs.items():
        dtype = TensorProto.BOOL if (op == "Where" and name == "c") else TensorProto.FLOAT
        declared = list(shape)
        if symbolic and declared and declared[0] == 2:
            declared[0] = "N"
        graph_inputs.append(helper.make_tensor_value_info(name, dtype, declared))
        array = np.random.default_rng(0).random(shape)
        feeds[name] = array > 0.5 if dtype == TensorProto.BOOL else array.astype(np.float32)
        fed[name] = list(shape)
    names = list(inputs) + [n for n, _ in inits]
    if op == "Pad" and len(inits) == 3:
        names = ["x", "pads", "value", "axes"]
    if op == "Resize":
        names = ["x"] + [n for n, _ in inits]
    outputs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outputs, name="node", **attrs)
    graph = helper.make_graph(
        [node], "case", graph_inputs,
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(v, n) for n, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model, feeds, fed


def main():
    out_dir = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1234)
    os.makedirs(out_dir, exist_ok=True)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    cases = []
    for gen in GENERATORS:
        for i in range(count * (6 if gen is case_misc else 1)):
            op, inputs, inits, attrs, n_out = gen(rng)
            symbolic = rng.random() < 0.3
            model, feeds, fed = build(op, inputs, inits, attrs, n_out, symbolic)
            data = model.SerializeToString()
            try:
                session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
                results = session.run(None, feeds)
            except Exception:
                continue
            path = os.path.join(out_dir, f"{gen.__name__[5:]}_{i}.onnx")
            with open(path, "wb") as f:
                f.write(data)
            cases.append({
                "file": path, "op": op, "static": not symbolic, "inputs": fed,
                "shapes": {o.name: list(r.shape) for o, r in zip(session.get_outputs(), results)},
            })
    print(json.dumps(cases))


if __name__ == "__main__":
    main()
