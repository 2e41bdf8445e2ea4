//! Robustness sweep: every supported op is evaluated on many combinations of small,
//! mismatched or degenerate inputs and attributes. Each evaluation may succeed or return
//! an error, but must never panic (malformed models must not crash the compiler).

use half::f16;
use rtq_ir::{Attr, Node, Tensor, TensorData, F8E4M3};
use rtq_test_support::{node, Rng};
use std::panic::{catch_unwind, AssertUnwindSafe};

fn pool() -> Vec<Tensor> {
    let f = |shape: &[usize]| {
        let n = shape.iter().product();
        Tensor::from_f32(
            shape.to_vec(),
            (0..n).map(|i| i as f32 * 0.37 - 1.0).collect(),
        )
    };
    vec![
        Tensor::scalar_f32(0.5),
        f(&[3]),
        f(&[2, 3]),
        f(&[1, 2, 3, 3]),
        f(&[2, 2, 4]),
        f(&[1, 1, 2, 2, 2]),
        f(&[0]),
        f(&[2, 0, 3]),
        Tensor::from_i64(vec![2], vec![2, 3]),
        Tensor::from_i64(vec![4], vec![1, -1, 0, 2]),
        Tensor::from_i64(vec![], vec![1]),
        Tensor::from_i64(vec![], vec![-7]),
        Tensor::from_i64(vec![1], vec![i64::MAX]),
        Tensor::from_i64(vec![2], vec![i64::MIN, 0]),
        Tensor::new(vec![2], TensorData::Bool(vec![true, false])).unwrap(),
        Tensor::new(vec![3], TensorData::U8(vec![0, 128, 255])).unwrap(),
        Tensor::new(vec![2], TensorData::I8(vec![-128, 127])).unwrap(),
        Tensor::new(vec![2, 2], TensorData::F16(vec![f16::ONE; 4])).unwrap(),
        Tensor::new(vec![1], TensorData::String(vec![b"x".to_vec()])).unwrap(),
        Tensor::new(vec![2], TensorData::I32(vec![0, 1])).unwrap(),
        fp8(&[2, 2], &[0x7F, 0x80, 0x7E, 0x38]),
        fp8(&[], &[0x00]),
        int4(&[3], &[-8, 7, 0]),
        int4(&[], &[1]),
    ]
}

/// An INT4 tensor of `values`.
fn int4(shape: &[usize], values: &[i8]) -> Tensor {
    Tensor::new(shape.to_vec(), TensorData::I4(values.to_vec())).unwrap()
}

/// An FP8 tensor of `codes`.
fn fp8(shape: &[usize], codes: &[u8]) -> Tensor {
    let v = codes.iter().map(|&c| F8E4M3::from_bits(c)).collect();
    Tensor::new(shape.to_vec(), TensorData::F8E4M3(v)).unwrap()
}

fn attr_sets() -> Vec<Vec<(&'static str, Attr)>> {
    vec![
        vec![],
        vec![("axis", Attr::Int(5))],
        vec![("axis", Attr::Int(-1)), ("keepdims", Attr::Int(0))],
        vec![("axis", Attr::Int(1))],
        vec![
            ("kernel_shape", Attr::Ints(vec![2, 2])),
            ("pads", Attr::Ints(vec![1, 1, 1, 1])),
        ],
        vec![
            ("kernel_shape", Attr::Ints(vec![i64::MAX])),
            ("strides", Attr::Ints(vec![i64::MAX])),
        ],
        vec![
            ("dilations", Attr::Ints(vec![i64::MAX, 1])),
            ("group", Attr::Int(0)),
        ],
        vec![
            ("perm", Attr::Ints(vec![1, 0])),
            ("blocksize", Attr::Int(i64::MAX)),
        ],
        vec![
            ("to", Attr::Int(99)),
            ("mode", Attr::String("bogus".into())),
        ],
        vec![
            ("axes", Attr::Ints(vec![0, 0])),
            ("block_size", Attr::Int(2)),
        ],
        vec![
            ("equation", Attr::String("ij,jk->ik".into())),
            ("size", Attr::Int(3)),
        ],
        vec![("value", Attr::Tensor(Tensor::from_i64(vec![2], vec![1, 2])))],
        vec![
            ("to", Attr::Int(17)),
            ("saturate", Attr::Int(0)),
            ("output_dtype", Attr::Int(17)),
        ],
        vec![
            ("to", Attr::Int(22)),
            ("output_dtype", Attr::Int(22)),
            ("axis", Attr::Int(0)),
            ("block_size", Attr::Int(2)),
        ],
    ]
}

#[test]
fn no_op_panics_on_malformed_inputs() {
    let tensors = pool();
    let attrs = attr_sets();
    let mut rng = Rng::new(42);
    let mut panics = Vec::new();
    let mut evaluations = 0;
    for op in rtq_exec::supported_ops() {
        for trial in 0..600 {
            let n_inputs = 1 + rng.below(5);
            let picks: Vec<Option<&Tensor>> = (0..n_inputs)
                .map(|_| {
                    let k = rng.below(tensors.len() + 1);
                    tensors.get(k)
                })
                .collect();
            let set = &attrs[trial % attrs.len()];
            let n = Node {
                name: format!("{op}_{trial}"),
                ..node(op, set, 1 + rng.below(3))
            };
            evaluations += 1;
            let result = catch_unwind(AssertUnwindSafe(|| rtq_exec::eval_node(&n, &picks)));
            if result.is_err() {
                let desc: Vec<String> = picks
                    .iter()
                    .map(|t| {
                        t.map_or("None".to_string(), |t| {
                            format!("{}{:?}", t.dtype(), t.shape())
                        })
                    })
                    .collect();
                panics.push(format!("{op} inputs {desc:?} attrs {set:?}"));
            }
        }
    }
    assert!(evaluations > 5000);
    assert!(
        panics.is_empty(),
        "{} evaluations panicked:\n{}",
        panics.len(),
        panics.join("\n")
    );
}

#[test]
fn no_op_panics_on_fp8_inputs() {
    // Every op on FP8 tensors (NaN, -0.0, 448 among them) alone, in pairs and mixed
    // with f32 and integer tensors, under every attribute set.
    let a = fp8(&[2, 3], &[0x7F, 0x80, 0x7E, 0xFE, 0xFF, 0x38]);
    let b = fp8(&[3], &[0x01, 0x00, 0x40]);
    let s = fp8(&[], &[0x00]);
    let f = Tensor::from_f32(vec![2, 3], vec![0.5, -1.0, 448.0, 500.0, f32::NAN, 0.0]);
    let i = Tensor::from_i64(vec![1], vec![1]);
    let combos: [&[&Tensor]; 7] = [
        &[&a],
        &[&a, &b],
        &[&a, &s, &s],
        &[&f, &s],
        &[&f, &f, &s],
        &[&a, &i],
        &[&b, &f, &s],
    ];
    assert_no_panics(&combos);
}

#[test]
fn no_op_panics_on_int4_inputs() {
    // Every op on INT4 tensors (-8 and 7 among them, an odd count) alone, in pairs and
    // mixed with f32, INT8 and integer tensors, under every attribute set.
    let a = int4(&[2, 3], &[-8, 7, 0, -1, 3, 5]);
    let b = int4(&[3], &[1, -2, 7]);
    let s = int4(&[], &[0]);
    let z = int4(&[1, 3], &[0, 0, 0]);
    let f = Tensor::from_f32(vec![2, 3], vec![0.5, -1.0, 7.5, -8.5, f32::NAN, 1e9]);
    let scales = Tensor::from_f32(vec![1, 3], vec![0.5, 1.0, 2.0]);
    let i = Tensor::from_i64(vec![1], vec![1]);
    let i8s = Tensor::new(vec![3], TensorData::I8(vec![-128, 0, 127])).unwrap();
    let combos: [&[&Tensor]; 9] = [
        &[&a],
        &[&a, &b],
        &[&a, &s, &s],
        &[&f, &s],
        &[&f, &f, &s],
        &[&a, &i],
        &[&a, &scales, &z],
        &[&f, &scales, &z],
        &[&b, &i8s, &s],
    ];
    assert_no_panics(&combos);
}

/// Evaluates every op on each input combination under every attribute set; fails
/// listing the evaluations that panicked.
fn assert_no_panics(combos: &[&[&Tensor]]) {
    let mut panics = Vec::new();
    for op in rtq_exec::supported_ops() {
        for set in attr_sets() {
            for inputs in combos {
                let picks: Vec<Option<&Tensor>> = inputs.iter().map(|&t| Some(t)).collect();
                let n = node(op, &set, 1);
                let result = catch_unwind(AssertUnwindSafe(|| rtq_exec::eval_node(&n, &picks)));
                if result.is_err() {
                    let desc: Vec<String> = inputs
                        .iter()
                        .map(|t| format!("{}{:?}", t.dtype(), t.shape()))
                        .collect();
                    panics.push(format!("{op} inputs {desc:?} attrs {set:?}"));
                }
            }
        }
    }
    assert!(
        panics.is_empty(),
        "{} evaluations panicked:\n{}",
        panics.len(),
        panics.join("\n")
    );
}
