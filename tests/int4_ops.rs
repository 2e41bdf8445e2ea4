//! Signed INT4 (ONNX `INT4`) through every layer below the quantization pass.
//!
//! A model built with onnx's helper at opset 21: blocked DequantizeLinear of INT4
//! weights ([K = 100, N = 24] in blocks of 32 along K, so the last block has 4 rows; and
//! [24, 100] in blocks along the last axis) feeding MatMul with a float activation,
//! per-axis and per-tensor INT4 DequantizeLinear, QuantizeLinear -> DequantizeLinear
//! round trips of an activation (per tensor with an INT4 zero point or `output_dtype`,
//! per axis, blocked) over ties, values past [-8, 7] and infinities, and Cast int32 ->
//! INT4 -> int32. rtq's CPU runtime must give onnxruntime's outputs bit for bit (the
//! MatMul's inputs are chosen so its sums are exact in any order). rtq's import and
//! emission (the emitter directly, and an FP32 `rtq compile`) must keep the model valid
//! for `onnx.checker` (full check) with its packed INT4 initializer bytes unchanged,
//! and running as before.
//!
//! Needs requirements-test.txt (onnx, onnxruntime, ml_dtypes).

mod common;

use common::manifest::{entries, generate, read, run_rtq};
use common::*;

/// Writes, under `OUT`: model.onnx, the inputs (in/) and onnxruntime's outputs (ort/)
/// as raw little-endian bytes, and manifest.json naming them with their runtime types
/// and shapes. The packing is written out here and checked against onnx's.
const MAKE: &str = r#"
import json, os
import numpy as np, onnx, onnxruntime as ort, ml_dtypes
from onnx import helper as h, TensorProto as T, numpy_helper as nh

I4 = ml_dtypes.int4
f32, u8 = np.float32, np.uint8
rng = np.random.default_rng(20250521)
for d in ("in", "ort"):
    os.makedirs(f"{OUT}/{d}", exist_ok=True)

def pack(values):
    """INT4 values packed two per byte, the first in the low nibble."""
    nib = (np.asarray(values, np.int8).reshape(-1).astype(np.int16) & 0xF).astype(u8)
    if len(nib) % 2:
        nib = np.concatenate([nib, np.zeros(1, u8)])
    return (nib[0::2] | (nib[1::2] << 4)).astype(u8)

def int4_init(name, values, raw=True):
    values = np.asarray(values, np.int8)
    if raw:
        return h.make_tensor(name, T.INT4, values.shape, pack(values).tobytes(), raw=True)
    return h.make_tensor(name, T.INT4, values.shape, values.reshape(-1).tolist())

def ints(shape):
    return rng.integers(-8, 8, shape).astype(np.int8)

K, N, M, B = 100, 24, 5, 32
KB = -(-K // B)
# Blocked weights along K (axis 0): a last block of 100 - 96 = 4 rows. Power-of-two
# scales and small integer activations keep every MatMul sum exact in f32.
w_blk, z_blk = ints((K, N)), ints((KB, N))
s_blk = np.exp2(-rng.integers(0, 5, (KB, N))).astype(f32)
xa = rng.integers(-8, 9, (M, K)).astype(f32)
# The same blocking with arbitrary scales (compared as DQ output), and blocks along
# the last axis ([N, K], axis 1, contiguous blocks), odd sizes both.
s_any = rng.uniform(0.001, 3, (KB, N)).astype(f32)
w_t, z_t = ints((N, K)), ints((N, KB))
s_t = rng.uniform(0.001, 3, (N, KB)).astype(f32)
# Per axis (axis 1 of [16, 7]) and per tensor.
w_ax, z_ax = ints((16, 7)), ints(7)
s_ax = rng.uniform(0.01, 2, 7).astype(f32)
w_pt = ints((3, 5))
# Activation round trip: ties at every half step, values past the range, infinities.
halves = np.arange(-24, 24, 0.5, dtype=f32)
x = np.concatenate([halves, [1e9, -1e9, np.inf, -np.inf, 0.0, -0.0, 7.49, 7.51, -8.49, -8.51],
                    rng.normal(0, 4, 1000)]).astype(f32)
x = np.concatenate([x, np.zeros((-len(x)) % 8, f32)])
xr = x.reshape(-1, 8)
S_X = np.array(0.37, f32)
s_xax = np.array([0.5, 1, 0.25, 2, 0.3, 0.7, 1.5, 4], f32)
z_xax = np.array([0, 1, -1, 3, -8, 7, 2, -3], np.int8)
# Blocked activation quantization along axis 1: [rows, 8] in blocks of 3 (3, 3, 2).
s_xb = rng.uniform(0.2, 2, (len(xr), 3)).astype(f32)
z_xb = ints((len(xr), 3))
xi = np.concatenate([np.arange(-40, 40), [2**31 - 1, -2**31]]).astype(np.int32)

inits = [
    int4_init("w_blk", w_blk), int4_init("z_blk", z_blk), nh.from_array(s_blk, "s_blk"),
    nh.from_array(s_any, "s_any"),
    int4_init("w_t", w_t), int4_init("z_t", z_t, raw=False), nh.from_array(s_t, "s_t"),
    int4_init("w_ax", w_ax, raw=False), int4_init("z_ax", z_ax), nh.from_array(s_ax, "s_ax"),
    int4_init("w_pt", w_pt), nh.from_array(np.array(0.25, f32), "s_pt"),
    int4_init("z_pt", np.array(-3, np.int8)),
    nh.from_array(S_X, "s_x"), int4_init("z_x", np.array(2, np.int8)),
    nh.from_array(s_xax, "s_xax"), int4_init("z_xax", z_xax),
    nh.from_array(s_xb, "s_xb"), int4_init("z_xb", z_xb),
]
N_ = h.make_node
nodes = [
    N_("DequantizeLinear", ["w_blk", "s_blk", "z_blk"], ["wd_blk"], axis=0, block_size=B),
    N_("MatMul", ["xa", "wd_blk"], ["mm"]),
    N_("DequantizeLinear", ["w_blk", "s_any", "z_blk"], ["wd_any"], axis=0, block_size=B),
    N_("DequantizeLinear", ["w_t", "s_t", "z_t"], ["wd_t"], axis=1, block_size=B),
    N_("DequantizeLinear", ["w_ax", "s_ax", "z_ax"], ["wd_ax"], axis=1),
    N_("DequantizeLinear", ["w_pt", "s_pt", "z_pt"], ["wd_pt"]),
    N_("QuantizeLinear", ["x", "s_x", "z_x"], ["q_x"]),
    N_("DequantizeLinear", ["q_x", "s_x", "z_x"], ["dq_x"]),
    N_("QuantizeLinear", ["x", "s_x"], ["q_x0"], output_dtype=T.INT4),
    N_("DequantizeLinear", ["q_x0", "s_x"], ["dq_x0"]),
    N_("Cast", ["q_x0"], ["q_x0f"], to=T.FLOAT),
    N_("QuantizeLinear", ["xr", "s_xax", "z_xax"], ["q_xax"], axis=1),
    N_("DequantizeLinear", ["q_xax", "s_xax", "z_xax"], ["dq_xax"], axis=1),
    N_("QuantizeLinear", ["xr", "s_xb", "z_xb"], ["q_xb"], axis=1, block_size=3),
    N_("DequantizeLinear", ["q_xb", "s_xb", "z_xb"], ["dq_xb"], axis=1, block_size=3),
    N_("Cast", ["xi"], ["ci4"], to=T.INT4),
    N_("Cast", ["ci4"], ["ci"], to=T.INT32),
]
inputs = {"xa": xa, "x": x, "xr": xr, "xi": xi}
OUTS = {"mm": [M, N], "wd_blk": [K, N], "wd_any": [K, N], "wd_t": [N, K], "wd_ax": [16, 7],
        "wd_pt": [3, 5], "dq_x": [len(x)], "dq_x0": [len(x)], "q_x0f": [len(x)],
        "dq_xax": list(xr.shape), "dq_xb": list(xr.shape), "ci": [len(xi)]}
in_types = {"xi": T.INT32}
out_types = {"ci": T.INT32}
vi = h.make_tensor_value_info
graph = h.make_graph(
    nodes, "int4_ops",
    [vi(k, in_types.get(k, T.FLOAT), list(v.shape)) for k, v in inputs.items()],
    [vi(n, out_types.get(n, T.FLOAT), s) for n, s in OUTS.items()],
    inits,
)
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])
model.ir_version = 10
onnx.checker.check_model(model, full_check=True)
onnx.save(model, f"{OUT}/model.onnx")

session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
results = dict(zip(OUTS, session.run(list(OUTS), inputs)))
# Independent checks of onnxruntime's results with NumPy: the exact MatMul, and the
# blocked dequantization written with np.repeat.
def deq_blocked(q, s, z, axis):
    rep = lambda a: np.repeat(a, B, axis=axis).take(range(q.shape[axis]), axis=axis)
    return ((q.astype(f32) - rep(z).astype(f32)) * rep(s)).astype(f32)
wd = deq_blocked(w_blk, s_blk, z_blk, 0)
assert np.array_equal(results["wd_blk"], wd)
assert np.array_equal(results["mm"], (xa.astype(np.float64) @ wd.astype(np.float64)).astype(f32))
assert np.array_equal(results["wd_t"], deq_blocked(w_t, s_t, z_t, 1))
np.seterr(all="ignore")
q = np.clip(np.rint(x / S_X) + 2, -8, 7)
assert np.array_equal(results["dq_x"], ((q - 2) * S_X).astype(f32))

NAMES = {np.dtype(f32): "float32", np.dtype(np.int32): "int32"}
for k, v in inputs.items():
    v.tofile(f"{OUT}/in/{k}.bin")
for n, v in results.items():
    np.ascontiguousarray(v).tofile(f"{OUT}/ort/{n}.bin")
manifest = {
    "inputs": [[k, NAMES[v.dtype], list(v.shape)] for k, v in inputs.items()],
    "outputs": [[n, NAMES[results[n].dtype], list(results[n].shape)] for n in OUTS],
    "int4_initializers": sorted(t.name for t in inits if t.data_type == T.INT4),
}
with open(f"{OUT}/manifest.json", "w") as f:
    json.dump(manifest, f)

# The packing above is onnx's (numpy_helper with ml_dtypes' int4).
assert nh.from_array(w_blk.astype(I4), "w").raw_data == pack(w_blk).tobytes()
"#;

#[test]
fn int4_ops_match_onnxruntime_bit_for_bit() {
    if skip_python() {
        return;
    }
    let (dir, manifest) = generate(MAKE);
    let dir = dir.path();
    let outputs = run_rtq(dir, &dir.join("model.onnx"), &manifest);
    let expected = entries(&manifest["outputs"]);
    assert_eq!(outputs.len(), expected.len());
    for (got, (name, dtype, shape)) in outputs.iter().zip(&expected) {
        assert_eq!(&got.name, name);
        assert_eq!(got.dtype(), *dtype, "{name}");
        assert_eq!(got.shape(), shape.as_slice(), "{name}");
        let want = read(dir, "ort", name);
        let width = dtype.bits() / 8;
        let bad: Vec<usize> = (0..want.len() / width)
            .filter(|&i| got.bytes()[i * width..][..width] != want[i * width..][..width])
            .collect();
        assert!(
            bad.is_empty(),
            "{name}: {} of {} elements differ from onnxruntime, first at {}",
            bad.len(),
            want.len() / width,
            bad[0]
        );
    }
}

#[test]
fn int4_models_survive_import_and_emission() {
    if skip_python() {
        return;
    }
    let (dir, manifest) = generate(MAKE);
    let dir = dir.path();
    let model = dir.join("model.onnx");
    let mut graph = rtq_frontend::load_model(&model).unwrap();
    // Typed intermediates (INT4 from zero points, `output_dtype` and Cast) for value_info.
    rtq_passes::infer_shapes(&mut graph).unwrap();
    let opts = rtq_emit::EmitOptions {
        value_info: true,
        ..Default::default()
    };
    let emitted = dir.join("emitted.onnx");
    std::fs::write(&emitted, rtq_emit::to_model_bytes(&graph, &opts).unwrap()).unwrap();
    let inits: Vec<&str> = manifest["int4_initializers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    // And an FP32 build, which must keep the INT4 weights as they are.
    let out = dir.join("build");
    compile_ok(&model, &out, &["--quiet"]);
    let built = built_model(&out);
    for (candidate, typed) in [(&emitted, true), (&built, false)] {
        let check = format!(
            r#"
import numpy as np, onnx, onnxruntime as ort
from onnx import TensorProto as T, numpy_helper as nh
original, candidate = onnx.load(r"{model}"), onnx.load(r"{candidate}")
onnx.checker.check_model(candidate, full_check=True)
assert [o.version for o in candidate.opset_import if o.domain in ("", "ai.onnx")] == [21]
assert candidate.ir_version == 10
def int4(m):
    return {{t.name: t for t in m.graph.initializer if t.data_type == T.INT4}}
want, got = int4(original), int4(candidate)
assert sorted(want) == sorted({inits:?}), sorted(want)
assert sorted(got) == sorted(want), (sorted(got), sorted(want))
for name, t in want.items():
    c = got[name]
    assert list(c.dims) == list(t.dims), name
    # rtq writes raw_data, packed two per byte (onnx's own packing of the values).
    assert not c.int32_data and len(c.raw_data) == -(-int(np.prod(t.dims)) // 2), name
    packed = t.raw_data if t.raw_data else bytes(v & 0xFF for v in t.int32_data)
    assert c.raw_data == packed, (name, c.raw_data, packed)
    assert np.array_equal(nh.to_array(c), nh.to_array(t)), name
# Intermediate INT4 values are typed INT4 (value_info, where emitted with it).
types = {{v.name: v.type.tensor_type.elem_type for v in candidate.graph.value_info}}
for name in ["q_x", "q_x0", "q_xax", "q_xb", "ci4"] if {typed} else []:
    assert types.get(name) == T.INT4, (name, types.get(name))
# onnxruntime runs the candidate as it runs the original.
feeds = {{}}
for i in original.graph.input:
    dtype = np.int32 if i.type.tensor_type.elem_type == T.INT32 else np.float32
    shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
    feeds[i.name] = np.fromfile(rf"{dir}/in/{{i.name}}.bin", dtype).reshape(shape)
run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
for a, b in zip(run(original), run(candidate)):
    assert a.tobytes() == b.tobytes()
"#,
            model = model.display(),
            candidate = candidate.display(),
            typed = if typed { "True" } else { "False" },
            dir = dir.display(),
        );
        python_inline(&check);
        // The candidate runs in rtq as the original does.
        let a = run_rtq(dir, &model, &manifest);
        let b = run_rtq(dir, candidate, &manifest);
        for (a, b) in a.iter().zip(&b) {
            assert_eq!(a.bytes(), b.bytes(), "{}", a.name);
        }
    }
}
