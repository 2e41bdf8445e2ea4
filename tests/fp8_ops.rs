//! FP8 E4M3 (ONNX `FLOAT8E4M3FN`) through every layer below the quantization pass.
//!
//! A model built with onnx's helper at opset 19 (QuantizeLinear/DequantizeLinear per
//! tensor and per axis, from f32 and f16, with `saturate=0`; Cast to and from FP8; a
//! per-axis DequantizeLinear of FP8 weights, alone and feeding MatMul and Conv) is fed
//! every FP8 code's value, the ties between neighbouring codes and the floats beside
//! them, values past 448, subnormals and ~11k random floats of every magnitude. rtq's
//! CPU runtime must give onnxruntime's outputs bit for bit, and ml_dtypes'
//! `float8_e4m3fn` conversion as an independent reference. rtq's import and emission
//! (the emitter directly, and `rtq compile`) must keep the model valid for
//! `onnx.checker` (full check) and its FP8 initializer bytes unchanged.
//!
//! One known difference: with `saturate=0`, onnxruntime's CPU conversion maps
//! magnitudes in [480, 496) to ±448, where the ONNX spec and ml_dtypes give NaN (E4M3FN
//! has no 480 and no infinity); rtq follows the spec there.
//!
//! Needs requirements-test.txt (onnx, onnxruntime, ml_dtypes).

mod common;

use common::manifest::{entries, generate, read, run_rtq};
use common::*;

/// Writes, under `OUT`: model.onnx, the inputs (in/), onnxruntime's outputs (ort/),
/// ml_dtypes' references for the FP8-derived outputs (ml/), all as raw little-endian
/// bytes, and manifest.json naming them with their runtime types and shapes.
const MAKE: &str = r#"
import json, os
import numpy as np, onnx, onnxruntime as ort, ml_dtypes
from onnx import helper as h, TensorProto as T, numpy_helper as nh

F8 = ml_dtypes.float8_e4m3fn
f32, f16, u8 = np.float32, np.float16, np.uint8
rng = np.random.default_rng(20240917)
os.makedirs(f"{OUT}/in", exist_ok=True)
os.makedirs(f"{OUT}/ort", exist_ok=True)
os.makedirs(f"{OUT}/ml", exist_ok=True)

def fp8_values(codes):
    return np.asarray(codes, u8).view(F8).astype(f32)

# x: every code's value, the midpoints between neighbours (ties) and the floats
# just beside them, values past 448, tiny ones, and random floats of every magnitude.
every = fp8_values(np.arange(256))
pos = np.unique(every[np.isfinite(every) & (every >= 0)])
mids = ((pos[:-1] + pos[1:]) / 2).astype(f32)
beside = np.concatenate([np.nextafter(mids, f32(np.inf)), np.nextafter(mids, f32(0))])
edges = np.array([448, 449, 460, 464, np.nextafter(f32(464), f32(1e9)), 470, 479.99, 480,
                  488, 495.99, 496, 500, 511.9, 512, 1e3, 1e6, 3.4e38, np.inf,
                  2.0**-10, 2.0**-11, 3 * 2.0**-11, 1e-30, 1e-45, 0.0], f32)
wide = (rng.choice([-1, 1], 8000) * np.exp2(rng.uniform(-14, 12, 8000))).astype(f32)
wider = (rng.choice([-1, 1], 2000) * np.exp2(rng.uniform(-60, 60, 2000))).astype(f32)
raw = rng.integers(0, 2**32, 1000, dtype=np.uint64).astype(np.uint32).view(f32)
x = np.concatenate([every, mids, -mids, beside, -beside, edges, -edges, wide, wider, raw]).astype(f32)
x = np.concatenate([x, np.zeros((-len(x)) % 4, f32)])
xr = x.reshape(-1, 4)

# FP8 weights: any finite code for the dequantized output, and codes of magnitude 1..15
# (multiples of 1/8) with power-of-two scales where MatMul and Conv sums stay exact.
finite = np.array([c for c in range(256) if (c & 0x7F) != 0x7F], u8)
small = np.array([c for c in finite if 1 <= abs(fp8_values([c])[0]) <= 15], u8)
w_any = rng.choice(finite, (16, 8)).astype(u8)
s_any = rng.uniform(0.001, 3, 8).astype(f32)
w_mm = rng.choice(small, (16, 8)).astype(u8)
s_mm = np.exp2(-rng.integers(0, 5, 8)).astype(f32)
w_cv = rng.choice(small, (4, 3, 3, 3)).astype(u8)
s_cv = np.exp2(-rng.integers(0, 5, 4)).astype(f32)
b_cv = (rng.integers(-16, 16, 4) / 8).astype(f32)
xw = rng.integers(-8, 9, (5, 16)).astype(f32)
xc = rng.integers(-8, 9, (1, 3, 9, 9)).astype(f32)

def fp8_init(name, codes):
    return h.make_tensor(name, T.FLOAT8E4M3FN, codes.shape, codes.tobytes(), raw=True)

def zero8(name, shape):
    return fp8_init(name, np.zeros(shape, u8))
S_AXIS = np.array([1.0, 0.37, 3.3, 1 / 64], f32)
inits = [
    nh.from_array(np.array(1.0, f32), "s1"), nh.from_array(np.array(0.37, f32), "s2"),
    nh.from_array(np.array(0.37, f16), "s16"), zero8("z", []),
    nh.from_array(S_AXIS, "s_axis"), zero8("z_axis", [4]),
    fp8_init("w_any", w_any), nh.from_array(s_any, "s_any"),
    fp8_init("w_mm", w_mm), nh.from_array(s_mm, "s_mm"),
    fp8_init("w_cv", w_cv), nh.from_array(s_cv, "s_cv"), nh.from_array(b_cv, "b_cv"),
]
N = h.make_node
nodes = [
    N("QuantizeLinear", ["x", "s1", "z"], ["q1"]),
    N("DequantizeLinear", ["q1", "s1", "z"], ["dq1"]),
    N("QuantizeLinear", ["x", "s2", "z"], ["q2"]),
    N("DequantizeLinear", ["q2", "s2", "z"], ["dq2"]),
    N("QuantizeLinear", ["x", "s1", "z"], ["q1ns"], saturate=0),
    N("Cast", ["x"], ["x16"], to=T.FLOAT16),
    N("QuantizeLinear", ["x16", "s16", "z"], ["q16"]),
    N("DequantizeLinear", ["q16", "s16", "z"], ["dq16"]),
    N("QuantizeLinear", ["xr", "s_axis", "z_axis"], ["qax"], axis=1),
    N("DequantizeLinear", ["qax", "s_axis", "z_axis"], ["dqax"], axis=1),
    N("Cast", ["x"], ["c8"], to=T.FLOAT8E4M3FN),
    N("Cast", ["c8"], ["cf"], to=T.FLOAT),
    N("Cast", ["c8"], ["c16"], to=T.FLOAT16),
    N("Cast", ["x"], ["c8ns"], to=T.FLOAT8E4M3FN, saturate=0),
    N("DequantizeLinear", ["w_any", "s_any"], ["wd"], axis=1),
    N("DequantizeLinear", ["w_mm", "s_mm"], ["w_mmd"], axis=1),
    N("MatMul", ["xw", "w_mmd"], ["mm"]),
    N("DequantizeLinear", ["w_cv", "s_cv"], ["w_cvd"], axis=0),
    N("Conv", ["xc", "w_cvd", "b_cv"], ["conv"], strides=[2, 2], pads=[1, 1, 1, 1]),
]
inputs = {"x": x, "xr": xr, "xw": xw, "xc": xc}
vi = lambda name, ty, shape: h.make_tensor_value_info(name, ty, shape)
FP8_OUT = ["q1", "q2", "q1ns", "q16", "qax", "c8", "c8ns"]
out_types = {**{n: T.FLOAT8E4M3FN for n in FP8_OUT}, "dq16": T.FLOAT16, "c16": T.FLOAT16}
OUTS = ["q1", "dq1", "q2", "dq2", "q1ns", "q16", "dq16", "qax", "dqax", "c8", "cf", "c16",
        "c8ns", "wd", "mm", "conv"]
out_shapes = {"qax": list(xr.shape), "dqax": list(xr.shape), "wd": [16, 8], "mm": [5, 8],
              "conv": [1, 4, 5, 5]}
graph = h.make_graph(
    nodes, "fp8_ops",
    [vi(k, T.FLOAT, list(v.shape)) for k, v in inputs.items()],
    [vi(n, out_types.get(n, T.FLOAT), out_shapes.get(n, [len(x)])) for n in OUTS],
    inits,
)
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 19)])
model.ir_version = 9
onnx.checker.check_model(model, full_check=True)
onnx.save(model, f"{OUT}/model.onnx")

session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
results = dict(zip(OUTS, session.run(OUTS, inputs)))

# Independent references from ml_dtypes: float32 -> float8_e4m3fn rounds to nearest
# even and, out of range, gives NaN (saturate=0); saturate=1 clamps first.
def sat(v):
    return np.clip(v, f32(-448), f32(448)).astype(F8).view(u8)
def nosat(v):
    return v.astype(F8).view(u8)
def deq(codes, scale):
    return codes.view(F8).astype(f32) * scale
x16 = x.astype(f16).astype(f32)
np.seterr(all="ignore")
ml = {
    "q1": sat(x), "q1ns": nosat(x), "q2": sat(x / f32(0.37)),
    "q16": sat(x16 / f16(0.37).astype(f32)), "qax": sat(xr / S_AXIS),
    "c8": sat(x), "c8ns": nosat(x),
}
ml["dq1"] = deq(ml["q1"], f32(1))
ml["dq2"] = deq(ml["q2"], f32(0.37))
ml["cf"] = deq(ml["c8"], f32(1))
ml["dq16"] = deq(ml["q16"], f16(0.37).astype(f32)).astype(f16)
ml["c16"] = deq(ml["c8"], f32(1)).astype(f16)
ml["dqax"] = deq(ml["qax"], S_AXIS)
ml["wd"] = deq(w_any, s_any)

NAMES = {np.dtype(f32): "float32", np.dtype(f16): "float16"}
def type_name(n, a):
    return "fp8e4m3" if out_types.get(n) == T.FLOAT8E4M3FN else NAMES[a.dtype]
for k, v in inputs.items():
    v.tofile(f"{OUT}/in/{k}.bin")
for n, v in results.items():
    np.ascontiguousarray(v).view(u8).tofile(f"{OUT}/ort/{n}.bin")
for n, v in ml.items():
    np.ascontiguousarray(v).view(u8).tofile(f"{OUT}/ml/{n}.bin")
manifest = {
    "inputs": [[k, "float32", list(v.shape)] for k, v in inputs.items()],
    "outputs": [[n, type_name(n, results[n]), list(results[n].shape)] for n in OUTS],
    "ml": sorted(ml),
    "fp8_initializers": ["w_any", "w_mm", "w_cv", "z", "z_axis"],
}
with open(f"{OUT}/manifest.json", "w") as f:
    json.dump(manifest, f)
"#;

/// Element `i` of `bytes` (elements of `width` bytes) as an integer, for messages.
fn element(bytes: &[u8], width: usize, i: usize) -> u64 {
    let mut v = [0u8; 8];
    v[..width].copy_from_slice(&bytes[i * width..][..width]);
    u64::from_le_bytes(v)
}

/// Indices where `got` and `want` (elements of `width` bytes) differ.
fn mismatches(got: &[u8], want: &[u8], width: usize) -> Vec<usize> {
    assert_eq!(got.len(), want.len());
    (0..got.len() / width)
        .filter(|&i| got[i * width..][..width] != want[i * width..][..width])
        .collect()
}

#[test]
fn fp8_ops_match_onnxruntime_and_ml_dtypes_bit_for_bit() {
    if skip_python() {
        return;
    }
    let (dir, manifest) = generate(MAKE);
    let dir = dir.path();
    let x: Vec<f32> = read(dir, "in", "x")
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let outputs = run_rtq(dir, &dir.join("model.onnx"), &manifest);
    let expected = entries(&manifest["outputs"]);
    assert_eq!(outputs.len(), expected.len());
    let with_ml: Vec<&str> = manifest["ml"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut ort_quirks = 0;
    for (got, (name, dtype, shape)) in outputs.iter().zip(&expected) {
        assert_eq!(&got.name, name);
        assert_eq!(got.dtype(), *dtype, "{name}");
        assert_eq!(got.shape(), shape.as_slice(), "{name}");
        let width = dtype.bits() / 8;
        let ours = got.bytes();
        if with_ml.contains(&name.as_str()) {
            let ml = read(dir, "ml", name);
            let bad = mismatches(ours, &ml, width);
            assert!(
                bad.is_empty(),
                "{name}: {} elements differ from ml_dtypes, first at {} (rtq {:#x}, ml_dtypes {:#x})",
                bad.len(),
                bad[0],
                element(ours, width, bad[0]),
                element(&ml, width, bad[0]),
            );
        }
        let ort = read(dir, "ort", name);
        for i in mismatches(ours, &ort, width) {
            // onnxruntime's saturate=0 quirk: [480, 496) becomes ±448, not NaN.
            let quirk = matches!(name.as_str(), "q1ns" | "c8ns")
                && (480.0..496.0).contains(&x[i].abs())
                && ort[i] & 0x7F == 0x7E
                && ours[i] == (ort[i] | 0x7F);
            assert!(
                quirk,
                "{name}[{i}] (x = {:e}): rtq {:#x}, onnxruntime {:#x}",
                x.get(i).copied().unwrap_or(f32::NAN),
                element(ours, width, i),
                element(&ort, width, i),
            );
            ort_quirks += 1;
        }
    }
    eprintln!(
        "{} inputs; {ort_quirks} saturate=0 elements in [480, 496) where onnxruntime gives ±448",
        x.len()
    );
}

#[test]
fn fp8_models_survive_import_and_emission() {
    if skip_python() {
        return;
    }
    let (dir, manifest) = generate(MAKE);
    let dir = dir.path();
    let model = dir.join("model.onnx");
    // The emitter directly, with value_info.
    let graph = rtq_frontend::load_model(&model).unwrap();
    let opts = rtq_emit::EmitOptions {
        value_info: true,
        ..Default::default()
    };
    let emitted = dir.join("emitted.onnx");
    std::fs::write(&emitted, rtq_emit::to_model_bytes(&graph, &opts).unwrap()).unwrap();
    // And an FP32 build.
    let out = dir.join("build");
    compile_ok(&model, &out, &["--quiet"]);
    let built = built_model(&out);
    let inits: Vec<&str> = manifest["fp8_initializers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for candidate in [&emitted, &built] {
        let check = format!(
            r#"
import numpy as np, onnx, onnxruntime as ort
original, candidate = onnx.load(r"{model}"), onnx.load(r"{candidate}")
onnx.checker.check_model(candidate, full_check=True)
assert [o.version for o in candidate.opset_import if o.domain in ("", "ai.onnx")] == [19]
def fp8_bytes(m):
    return {{t.name: (t.data_type, list(t.dims), onnx.numpy_helper.to_array(t).tobytes())
            for t in m.graph.initializer if t.data_type == onnx.TensorProto.FLOAT8E4M3FN}}
want, got = fp8_bytes(original), fp8_bytes(candidate)
assert sorted(want) == sorted({inits:?}), sorted(want)
assert got == want, (sorted(got), sorted(want))
# onnxruntime runs the candidate as it runs the original.
feeds = {{i.name: np.fromfile(rf"{dir}/in/{{i.name}}.bin", np.float32).reshape(
    [d.dim_value for d in i.type.tensor_type.shape.dim]) for i in original.graph.input}}
run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
for a, b in zip(run(original), run(candidate)):
    assert a.tobytes() == b.tobytes()
"#,
            model = model.display(),
            candidate = candidate.display(),
            dir = dir.display(),
        );
        python_inline(&check);
    }
    // The re-emitted model runs in rtq as the original does.
    let a = run_rtq(dir, &model, &manifest);
    let b = run_rtq(dir, &emitted, &manifest);
    for (a, b) in a.iter().zip(&b) {
        assert_eq!(a.bytes(), b.bytes(), "{}", a.name);
    }
}
