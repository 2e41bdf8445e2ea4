#!/usr/bin/env python3
"""Reference outputs for rtq-exec's kernels, computed by onnxruntime.

Builds one single-node ONNX model per case with onnx.helper, runs it with
onnxruntime's CPU provider on seeded random inputs, and prints a JSON document with
the inputs, attributes and expected outputs of every case to stdout (or writes it to
the path given as the first argument). The Rust test `tests/ort_reference.rs` rebuilds
each node as an rtq IR node and compares.
"""

import json
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(20240611)

DTYPES = {
    np.dtype("float32"): ("float32", TensorProto.FLOAT),
    np.dtype("float16"): ("float16", TensorProto.FLOAT16),
    np.dtype("int64"): ("int64", TensorProto.INT64),
    np.dtype("int32"): ("int32", TensorProto.INT32),
    np.dtype("int16"): ("int16", TensorProto.INT16),
    np.dtype("int8"): ("int8", TensorProto.INT8),
    np.dtype("uint8"): ("uint8", TensorProto.UINT8),
    np.dtype("bool"): ("bool", TensorProto.BOOL),
}


def rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def ints(values, dtype=np.int64):
    return np.array(values, dtype=dtype)


def encode(arr):
    name, _ = DTYPES[arr.dtype]
    flat = arr.reshape(-1)
    if arr.dtype == np.bool_:
        data = [bool(v) for v in flat]
    elif arr.dtype.kind == "f":
        # JSON has no non-finite numbers: those travel as the strings "inf", "-inf", "nan".
        data = [float(v) if np.isfinite(v) else str(float(v)) for v in flat.astype(np.float64)]
    else:
        data = [int(v) for v in flat]
    return {"dtype": name, "shape": list(arr.shape), "data": data}


def encode_attr(name, value):
    if isinstance(value, bool) or isinstance(value, (int, np.integer)):
        return {"name": name, "type": "int", "value": int(value)}
    if isinstance(value, float):
        return {"name": name, "type": "float", "value": value}
    if isinstance(value, str):
        return {"name": name, "type": "string", "value": value}
    if isinstance(value, np.ndarray):
        return {"name": name, "type": "tensor", "value": encode(value)}
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, str) for v in value):
            return {"name": name, "type": "strings", "value": list(value)}
        if all(isinstance(v, (int, np.integer)) for v in value):
            return {"name": name, "type": "ints", "value": [int(v) for v in value]}
        return {"name": name, "type": "floats", "value": [float(v) for v in value]}
    raise TypeError(f"attribute {name}: {value!r}")


def onnx_attr(value):
    if isinstance(value, np.ndarray):
        return numpy_helper.from_array(value)
    return value


CASES = []


def case(name, op, inputs, attrs=None, outputs=1, opset=17, rtol=1e-4, atol=1e-5,
         evaluator="onnxruntime"):
    """Runs `op` on `inputs` (None = omitted optional input) with onnxruntime, or with
    onnx's reference evaluator (`evaluator="onnx"`) where onnxruntime lacks the form."""
    attrs = attrs or {}
    in_names = []
    feeds = {}
    graph_inputs = []
    for i, arr in enumerate(inputs):
        if arr is None:
            in_names.append("")
            continue
        n = f"in{i}"
        in_names.append(n)
        feeds[n] = arr
        graph_inputs.append(helper.make_tensor_value_info(n, DTYPES[arr.dtype][1], list(arr.shape)))
    out_names = [f"out{i}" for i in range(outputs)]
    node = helper.make_node(op, in_names, out_names, **{k: onnx_attr(v) for k, v in attrs.items()})
    graph = helper.make_graph(
        [node],
        name,
        graph_inputs,
        [onnx.ValueInfoProto(name=n) for n in out_names],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    if evaluator == "onnx":
        from onnx.reference import ReferenceEvaluator
        results = ReferenceEvaluator(model).run(out_names, feeds)
    else:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        results = sess.run(out_names, feeds)
    CASES.append(
        {
            "name": name,
            "op": op,
            "attrs": [encode_attr(k, v) for k, v in attrs.items()],
            "inputs": [None if a is None else encode(a) for a in inputs],
            "outputs": [encode(np.asarray(r)) for r in results],
            "rtol": rtol,
            "atol": atol,
        }
    )


def build():
    # --- Convolutions -------------------------------------------------------------
    case("conv_group_dilation_pads_strides", "Conv",
         [rand(2, 4, 9, 10), rand(6, 2, 3, 3), rand(6)],
         {"group": 2, "dilations": [2, 1], "pads": [1, 2, 1, 0], "strides": [1, 2]}, atol=1e-4)
    case("conv_depthwise_stride2", "Conv",
         [rand(1, 8, 11, 11), rand(8, 1, 3, 3), rand(8)],
         {"group": 8, "pads": [1, 1, 1, 1], "strides": [2, 2]}, atol=1e-4)
    case("conv_depthwise_multiplier", "Conv",
         [rand(1, 3, 7, 6), rand(6, 1, 3, 3)], {"group": 3, "dilations": [2, 2], "pads": [2, 2, 2, 2]}, atol=1e-4)
    case("conv_pointwise", "Conv", [rand(2, 16, 5, 7), rand(8, 16, 1, 1)], atol=1e-4)
    case("conv_same_upper_5x5_s2", "Conv",
         [rand(1, 3, 13, 12), rand(4, 3, 5, 5), rand(4)], {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, atol=1e-4)
    case("conv_same_lower", "Conv", [rand(1, 2, 6, 6), rand(2, 2, 4, 4)], {"auto_pad": "SAME_LOWER"}, atol=1e-4)
    case("conv_1d", "Conv", [rand(2, 3, 20), rand(5, 3, 4), rand(5)], {"pads": [1, 2], "strides": [3]}, atol=1e-4)
    case("conv_3d", "Conv", [rand(1, 2, 5, 6, 4), rand(3, 2, 3, 3, 2)], {"pads": [1, 1, 0, 1, 1, 1]}, atol=1e-4)
    case("conv_transpose_s2_pads_outpad_group", "ConvTranspose",
         [rand(1, 4, 5, 6), rand(4, 3, 3, 3), rand(6)],
         {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}, atol=1e-4)
    case("conv_transpose_output_shape_dilation", "ConvTranspose",
         [rand(2, 3, 4, 4), rand(3, 2, 3, 2)],
         {"strides": [2, 3], "dilations": [2, 1], "output_shape": [10, 12]}, atol=1e-4)
    case("conv_transpose_1d", "ConvTranspose", [rand(1, 2, 7), rand(2, 3, 4)], {"strides": [2]}, atol=1e-4)
    # --- Pools ----------------------------------------------------------------------
    case("maxpool_3x3_s2_p1", "MaxPool", [rand(2, 3, 11, 10)],
         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    case("maxpool_ceil_dilation", "MaxPool", [rand(1, 2, 9, 8)],
         {"kernel_shape": [2, 3], "strides": [2, 2], "dilations": [2, 1], "ceil_mode": 1})
    case("maxpool_indices", "MaxPool", [rand(1, 2, 6, 6)],
         {"kernel_shape": [2, 2], "strides": [2, 2]}, outputs=2)
    case("avgpool_include_pad_ceil", "AveragePool", [rand(1, 3, 10, 9)],
         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1, "ceil_mode": 1})
    case("avgpool_exclude_pad", "AveragePool", [rand(2, 2, 7, 7)],
         {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1]})
    case("global_average_pool", "GlobalAveragePool", [rand(2, 5, 7, 3)])
    case("global_max_pool", "GlobalMaxPool", [rand(2, 5, 4, 3)])
    # --- Resize -----------------------------------------------------------------------
    x = rand(1, 2, 5, 6)
    case("resize_linear_half_pixel_x2", "Resize",
         [x, None, np.array([1, 1, 2, 2], np.float32)], {"mode": "linear"})
    case("resize_linear_align_corners_sizes_down", "Resize",
         [x, None, None, ints([1, 2, 3, 4])], {"mode": "linear", "coordinate_transformation_mode": "align_corners"})
    case("resize_linear_pytorch_half_pixel", "Resize",
         [x, None, None, ints([1, 2, 1, 9])], {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"})
    case("resize_nearest_asymmetric_floor", "Resize",
         [x, None, np.array([1, 1, 2, 3], np.float32)],
         {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"})
    case("resize_nearest_half_pixel_prefer_floor", "Resize",
         [x, None, np.array([1, 1, 1.5, 1.5], np.float32)], {"mode": "nearest"})
    case("resize_nearest_prefer_ceil_sizes", "Resize",
         [x, None, None, ints([1, 2, 8, 3])],
         {"mode": "nearest", "nearest_mode": "round_prefer_ceil", "coordinate_transformation_mode": "half_pixel"})
    # (tf_half_pixel_for_nearest is gone from onnxruntime; a unit test covers it.)
    case("resize_cubic_x2", "Resize", [x, None, np.array([1, 1, 2, 2], np.float32)], {"mode": "cubic"})
    case("resize_cubic_exclude_outside", "Resize",
         [x, None, np.array([1, 1, 0.6, 1.7], np.float32)],
         {"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": -0.5})
    # --- Normalisation and softmax ----------------------------------------------------
    case("softmax_axis1", "Softmax", [rand(2, 5, 3, lo=-5, hi=5)], {"axis": 1})
    case("logsoftmax_default", "LogSoftmax", [rand(3, 7, lo=-5, hi=5)])
    case("lrn_size5", "LRN", [rand(2, 7, 3, 3)], {"size": 5, "alpha": 0.01, "beta": 0.75, "bias": 2.0})
    case("batchnorm_inference", "BatchNormalization",
         [rand(2, 4, 3, 3), rand(4), rand(4), rand(4), rand(4, lo=0.1, hi=2.0)], {"epsilon": 1e-3})
    case("instancenorm", "InstanceNormalization", [rand(2, 3, 4, 5), rand(3), rand(3)], {"epsilon": 1e-4})
    case("layernorm_last_axis", "LayerNormalization", [rand(2, 3, 8), rand(8), rand(8)], rtol=1e-4, atol=1e-4)
    case("layernorm_axis1_stats", "LayerNormalization",
         [rand(2, 3, 4), rand(3, 4)], {"axis": 1, "epsilon": 1e-3}, outputs=3, atol=1e-4)
    case("groupnorm_per_channel", "GroupNormalization",
         [rand(2, 6, 3, 3), rand(6), rand(6)], {"num_groups": 3}, opset=21, atol=1e-4)
    case("lpnorm_l2", "LpNormalization", [rand(3, 4)], {"axis": 0, "p": 2})
    # --- Matrix products ----------------------------------------------------------------
    case("gemm_transposes_alpha_beta", "Gemm",
         [rand(5, 4), rand(6, 5), rand(6)], {"transA": 1, "transB": 1, "alpha": 0.7, "beta": 1.3})
    case("gemm_matrix_c", "Gemm", [rand(3, 4), rand(4, 2), rand(3, 1)])
    case("gemm_no_c", "Gemm", [rand(3, 4), rand(2, 4)], {"transB": 1})
    case("matmul_batch_broadcast", "MatMul", [rand(2, 1, 3, 4), rand(3, 4, 5)])
    case("matmul_vector_left", "MatMul", [rand(4), rand(2, 4, 3)])
    case("matmul_shared_weights", "MatMul", [rand(2, 3, 8), rand(8, 5)])
    case("einsum_bhqd", "Einsum", [rand(1, 2, 3, 4), rand(1, 2, 5, 4)], {"equation": "bhqd,bhkd->bhqk"}, opset=17)
    # --- Quantization -------------------------------------------------------------------
    w = rand(4, 3, 2, 2, lo=-3, hi=3)
    w_scale = np.array([0.01, 0.02, 0.05, 0.1], np.float32)
    case("quantize_per_axis_int8", "QuantizeLinear",
         [w, w_scale, np.zeros(4, np.int8)], {"axis": 0}, opset=13)
    ties = (np.arange(-20, 20, dtype=np.float32) + 0.5) * 0.5
    case("quantize_per_tensor_uint8_ties", "QuantizeLinear",
         [ties, np.array(0.5, np.float32), np.array(3, np.uint8)], opset=13)
    case("quantize_default_uint8", "QuantizeLinear",
         [rand(2, 3, lo=-2, hi=300), np.array(0.7, np.float32)], opset=13)
    q = RNG.integers(-128, 128, size=(2, 3, 4)).astype(np.int8)
    case("dequantize_per_axis_int8", "DequantizeLinear",
         [q, np.array([0.5, 0.25, 0.125], np.float32), np.array([1, -2, 3], np.int8)], {"axis": 1}, opset=13)
    bias = RNG.integers(-100000, 100000, size=(5,)).astype(np.int32)
    case("dequantize_int32_bias", "DequantizeLinear",
         [bias, rand(5, lo=1e-4, hi=1e-2)], {"axis": 0}, opset=13)
    case("dequantize_blocked", "DequantizeLinear",
         [RNG.integers(-8, 8, size=(2, 6)).astype(np.int8), rand(2, 2, lo=0.1, hi=1.0), np.zeros((2, 2), np.int8)],
         {"axis": 1, "block_size": 3}, opset=21)
    case("dynamic_quantize", "DynamicQuantizeLinear", [rand(3, 4, lo=-2, hi=5)], outputs=3, opset=13)
    # --- Elementwise ----------------------------------------------------------------------
    case("add_broadcast", "Add", [rand(2, 3, 4), rand(3, 1)])
    case("div_broadcast", "Div", [rand(2, 3), rand(2, 1, 3, lo=0.5, hi=2)])
    case("pow_float", "Pow", [rand(3, 4, lo=0.1, hi=3), rand(4, lo=-2, hi=2)])
    case("mod_int_python", "Mod", [ints([-7, 7, -8, 9]), ints([3, -3, 5, -4])])
    case("prelu_channel", "PRelu", [rand(2, 3, 2, 2), rand(3, 1, 1)])
    case("erf", "Erf", [rand(50, lo=-3, hi=3)])
    case("gelu_exact", "Gelu", [rand(40, lo=-4, hi=4)], opset=20)
    case("gelu_tanh", "Gelu", [rand(40, lo=-4, hi=4)], {"approximate": "tanh"}, opset=20)
    case("mish", "Mish", [rand(30, lo=-5, hi=5)], opset=18)
    case("hardswish", "HardSwish", [rand(30, lo=-5, hi=5)])
    case("selu", "Selu", [rand(20, lo=-3, hi=3)])
    case("softplus", "Softplus", [rand(20, lo=-30, hi=30)])
    case("clip_min_max", "Clip", [rand(20, lo=-3, hi=3), np.array(-1, np.float32), np.array(1.5, np.float32)])
    case("where_broadcast", "Where", [RNG.random((2, 1, 3)) > 0.5, rand(4, 3), rand(1)])
    case("sum_variadic", "Sum", [rand(2, 3), rand(3), rand(2, 1)])
    case("cast_to_f16", "Cast", [rand(30, lo=-70000, hi=70000)], {"to": TensorProto.FLOAT16})
    case("f16_mul", "Mul", [rand(4, 5).astype(np.float16), rand(5).astype(np.float16)], rtol=1e-3, atol=1e-3)
    # --- Reductions -------------------------------------------------------------------------
    case("reduce_mean_axes_attr", "ReduceMean", [rand(2, 3, 4)], {"axes": [0, 2], "keepdims": 0})
    case("reduce_sum_axes_input", "ReduceSum", [rand(2, 3, 4), ints([-1])])
    case("reduce_logsumexp", "ReduceLogSumExp", [rand(3, 5, lo=-3, hi=3)], {"axes": [1]})
    case("reduce_l2", "ReduceL2", [rand(3, 4, 2)], {"axes": [1, 2]})
    # --- Shape and data movement ------------------------------------------------------------------
    case("slice_negative_steps", "Slice",
         [rand(5, 6, 3), ints([-1, 4]), ints([-100, 0]), ints([0, 1]), ints([-2, -3])])
    case("pad_reflect", "Pad", [rand(1, 2, 4, 5), ints([0, 0, 2, 1, 0, 0, 1, 3])], {"mode": "reflect"})
    case("pad_edge_crop", "Pad", [rand(2, 3, 4), ints([0, -1, 2, 0, 1, -1])], {"mode": "edge"})
    case("pad_wrap_axes", "Pad", [rand(2, 3, 4), ints([2, 3, 1, 2]), None, ints([1, -1])], {"mode": "wrap"}, opset=19)
    case("pad_constant_value", "Pad", [rand(2, 3), ints([1, 0, 0, 2]), np.array(1.5, np.float32)])
    case("transpose_perm", "Transpose", [rand(2, 3, 4, 5)], {"perm": [2, 0, 3, 1]})
    case("depth_to_space_crd", "DepthToSpace", [rand(1, 8, 2, 3)], {"blocksize": 2, "mode": "CRD"})
    case("space_to_depth", "SpaceToDepth", [rand(1, 2, 4, 6)], {"blocksize": 2})
    case("gather_axis1_negative", "Gather", [rand(3, 5, 2), ints([[0, -1], [2, 3]])], {"axis": 1})
    case("expand", "Expand", [rand(3, 1), ints([2, 1, 4])])
    case("tile", "Tile", [rand(2, 3), ints([2, 2])])
    case("concat_axis1", "Concat", [rand(2, 1, 3), rand(2, 4, 3)], {"axis": 1})
    case("split_uneven", "Split", [rand(2, 7), ints([3, 4])], {"axis": 1}, outputs=2)
    case("argmax_select_last", "ArgMax", [np.array([[1, 3, 3], [2, 2, 0]], np.float32)],
         {"axis": 1, "select_last_index": 1})
    case("topk_largest", "TopK", [rand(3, 6), ints([2])], {"axis": 1}, outputs=2)
    case("cumsum_exclusive_reverse", "CumSum", [rand(3, 4), ints(1)], {"exclusive": 1, "reverse": 1})
    case("gather_elements", "GatherElements", [rand(3, 4), ints([[0, 3, -1], [2, 1, 0]])], {"axis": 1})
    case("gather_nd_batch", "GatherND", [rand(2, 3, 4), ints([[[1], [0]], [[2], [2]]])], {"batch_dims": 1})
    case("scatter_nd_add", "ScatterND", [rand(4, 3), ints([[1], [3], [1]]), rand(3, 3)], {"reduction": "add"}, opset=16)
    case("one_hot_axis0", "OneHot", [ints([[1, -1], [0, 7]]), ints(4), np.array([-2, 5], np.float32)], {"axis": 0})
    case("trilu_lower_k", "Trilu", [rand(2, 4, 5), ints(1)], {"upper": 0}, opset=14)
    case("hardmax_axis0", "Hardmax", [rand(4, 3)], {"axis": 0}, opset=13)
    case("reduce_prod_int", "ReduceProd", [ints([[1, 2, 3], [4, 5, 6]])], {"axes": [1]}, opset=13)
    case("argmin_keepdims0", "ArgMin", [rand(3, 4, 2)], {"axis": -2, "keepdims": 0})
    case("nonzero", "NonZero", [np.array([[0, 1.5, 0], [2, 0, -1]], np.float32)])
    case("range_float", "Range", [np.array(1.0, np.float32), np.array(3.1, np.float32), np.array(0.3, np.float32)])
    case("maxpool_1d_same", "MaxPool", [rand(1, 2, 9)], {"kernel_shape": [4], "strides": [2], "auto_pad": "SAME_UPPER"})
    case("avgpool_dilated", "AveragePool", [rand(1, 2, 8, 8)],
         {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 0}, opset=19)
    case("quantize_int16_per_axis", "QuantizeLinear",
         [rand(2, 3, lo=-500, hi=500), np.array([0.01, 0.05, 0.2], np.float32), np.array([0, 10, -10], np.int16)],
         {"axis": 1}, opset=21)
    case("resize_tf_crop_and_resize", "Resize",
         [rand(1, 1, 4, 5), np.array([0, 0, 0.2, -0.1, 1, 1, 0.9, 1.2], np.float32), None, ints([1, 1, 3, 4])],
         {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": -3.0})
    case("resize_axes_not_larger", "Resize",
         [rand(1, 2, 4, 6), None, None, ints([6, 6])],
         {"mode": "nearest", "axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"}, opset=18)
    case("instancenorm_f16", "InstanceNormalization",
         [rand(1, 2, 3, 3).astype(np.float16), rand(2).astype(np.float16), rand(2).astype(np.float16)],
         rtol=2e-3, atol=2e-3)
    case("softmax_f16", "Softmax", [rand(2, 5, lo=-3, hi=3).astype(np.float16)], rtol=2e-3, atol=1e-3)
    case("relu_f16", "Relu", [rand(10).astype(np.float16)], rtol=0, atol=0)
    # --- Recurrent layers -----------------------------------------------------------
    seq, batch, inp, hid = 5, 3, 4, 6
    lens = np.array([5, 2, 0], np.int32)

    def rnn_inputs(gates, dirs, layout=0, bias=True, states=0, peep=False, seq_lens=None):
        x = rand(batch, seq, inp) if layout else rand(seq, batch, inp)
        state = (lambda: rand(batch, dirs, hid)) if layout else (lambda: rand(dirs, batch, hid))
        ins = [x, rand(dirs, gates * hid, inp), rand(dirs, gates * hid, hid),
               rand(dirs, 2 * gates * hid) if bias else None, seq_lens]
        ins += [state() for _ in range(states)]
        if peep:
            ins += [None] * (2 - states) + [rand(dirs, 3 * hid)]
        while ins and ins[-1] is None:
            ins.pop()
        return ins

    case("lstm_forward", "LSTM", rnn_inputs(4, 1), {"hidden_size": hid}, outputs=3, opset=14)
    case("lstm_bidirectional_lens_states_peepholes", "LSTM",
         rnn_inputs(4, 2, states=2, peep=True, seq_lens=lens),
         {"hidden_size": hid, "direction": "bidirectional"}, outputs=3, opset=14)
    # onnxruntime runs layout 0 only: layout 1 against onnx's reference evaluator (which
    # ignores `clip`: clip is checked against onnxruntime in layout 0).
    case("lstm_layout1_states", "LSTM", rnn_inputs(4, 2, layout=1, states=2),
         {"hidden_size": hid, "layout": 1, "direction": "bidirectional"}, outputs=3, opset=14,
         evaluator="onnx")
    case("lstm_clip_lens", "LSTM", rnn_inputs(4, 1, states=2, seq_lens=lens),
         {"hidden_size": hid, "clip": 0.7}, outputs=3, opset=14)
    case("lstm_reverse_input_forget", "LSTM", rnn_inputs(4, 1, states=1),
         {"hidden_size": hid, "direction": "reverse", "input_forget": 1}, outputs=3, opset=14)
    case("lstm_activations", "LSTM", rnn_inputs(4, 1),
         {"hidden_size": hid, "activations": ["HardSigmoid", "LeakyRelu", "Softsign"],
          "activation_alpha": [0.3, 0.05], "activation_beta": [0.4]}, outputs=3, opset=14)
    case("gru_forward_states", "GRU", rnn_inputs(3, 1, states=1), {"hidden_size": hid},
         outputs=2, opset=14)
    case("gru_bidirectional_linear_before_reset_lens", "GRU", rnn_inputs(3, 2, seq_lens=lens),
         {"hidden_size": hid, "direction": "bidirectional", "linear_before_reset": 1},
         outputs=2, opset=14)
    case("gru_layout1_no_bias", "GRU", rnn_inputs(3, 1, layout=1, bias=False),
         {"hidden_size": hid, "layout": 1}, outputs=2, opset=14, evaluator="onnx")
    case("rnn_bidirectional_relu_lens", "RNN", rnn_inputs(1, 2, states=1, seq_lens=lens),
         {"hidden_size": hid, "direction": "bidirectional", "activations": ["Relu", "Tanh"]},
         outputs=2, opset=14)
    case("rnn_reverse_layout1", "RNN", rnn_inputs(1, 1, layout=1),
         {"hidden_size": hid, "direction": "reverse", "layout": 1}, outputs=2,
         opset=14, evaluator="onnx")
    case("rnn_reverse_clip", "RNN", rnn_inputs(1, 1),
         {"hidden_size": hid, "direction": "reverse", "clip": 0.5}, outputs=2, opset=14)
    case("dequantize_f16_scale", "DequantizeLinear",
         [RNG.integers(0, 256, size=(6,)).astype(np.uint8), np.array(0.0123, np.float16), np.array(7, np.uint8)],
         opset=19, rtol=0, atol=0)
    return CASES


def main():
    doc = {"onnx": onnx.__version__, "onnxruntime": ort.__version__, "cases": build()}
    text = json.dumps(doc)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
