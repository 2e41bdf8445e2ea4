//! The data-movement ops ONNX allows on FP8 tensors (and a few more the generic
//! kernels give for free) move FP8 codes without changing them: every code, NaN and
//! -0.0 included, comes out bit for bit where the op puts it.

mod common;

use common::{ints, run};
use rtq_exec::eval_node;
use rtq_ir::{Attr, Tensor, TensorData, F8E4M3};
use rtq_test_support::node;

/// A tensor of FP8 `codes` shaped `shape`.
fn fp8(shape: &[usize], codes: &[u8]) -> Tensor {
    let v = codes.iter().map(|&c| F8E4M3::from_bits(c)).collect();
    Tensor::new(shape.to_vec(), TensorData::F8E4M3(v)).unwrap()
}

/// The codes of an FP8 tensor (panics for any other type).
fn codes(t: &Tensor) -> Vec<u8> {
    match t.data() {
        TensorData::F8E4M3(v) => v.iter().map(F8E4M3::to_bits).collect(),
        other => panic!("not FP8: {other:?}"),
    }
}

/// [2, 3] codes with NaN (0x7F, 0xFF), -0.0 (0x80), ±448 (0x7E, 0xFE) and 1.0.
fn sample() -> Tensor {
    fp8(&[2, 3], &[0x7F, 0x80, 0x7E, 0xFE, 0xFF, 0x38])
}

#[test]
fn reshaping_ops_keep_the_codes() {
    let x = sample();
    let all = codes(&x);
    for (op, attrs, extra) in [
        ("Identity", vec![], None),
        ("Reshape", vec![], Some(ints(&[3, 2]))),
        ("Flatten", vec![("axis", Attr::Int(0))], None),
        ("Unsqueeze", vec![], Some(ints(&[0]))),
    ] {
        let mut inputs = vec![Some(&x)];
        inputs.extend(extra.as_ref().map(Some));
        let y = run(op, &attrs, &inputs);
        assert_eq!(codes(&y), all, "{op}");
    }
    let y = run(
        "Squeeze",
        &[],
        &[Some(&fp8(&[1, 2], &[0xFF, 0x80])), Some(&ints(&[0]))],
    );
    assert_eq!((y.shape(), codes(&y)), (&[2][..], vec![0xFF, 0x80]));
}

#[test]
fn moving_ops_put_each_code_in_its_place() {
    let x = sample();
    let y = run(
        "Transpose",
        &[("perm", Attr::Ints(vec![1, 0]))],
        &[Some(&x)],
    );
    assert_eq!(codes(&y), [0x7F, 0xFE, 0x80, 0xFF, 0x7E, 0x38]);
    let y = run("Concat", &[("axis", Attr::Int(0))], &[Some(&x), Some(&x)]);
    assert_eq!(codes(&y), [codes(&x), codes(&x)].concat());
    let y = run(
        "Slice",
        &[],
        &[
            Some(&x),
            Some(&ints(&[1])),
            Some(&ints(&[3])),
            Some(&ints(&[1])),
        ],
    );
    assert_eq!(codes(&y), [0x80, 0x7E, 0xFF, 0x38]);
    let y = run(
        "Gather",
        &[("axis", Attr::Int(1))],
        &[Some(&x), Some(&ints(&[2, 0]))],
    );
    assert_eq!(codes(&y), [0x7E, 0x7F, 0x38, 0xFE]);
    let y = run(
        "Expand",
        &[],
        &[Some(&fp8(&[1, 2], &[0xFF, 0x01])), Some(&ints(&[2, 2]))],
    );
    assert_eq!(codes(&y), [0xFF, 0x01, 0xFF, 0x01]);
    let y = run(
        "Pad",
        &[],
        &[Some(&fp8(&[2], &[0x7F, 0x80])), Some(&ints(&[1, 0]))],
    );
    assert_eq!(codes(&y), [0x00, 0x7F, 0x80]);
}

#[test]
fn split_gives_fp8_parts() {
    let x = sample();
    let n = node("Split", &[("axis", Attr::Int(1))], 3);
    let parts = eval_node(&n, &[Some(&x)]).unwrap();
    let got: Vec<Vec<u8>> = parts.iter().map(codes).collect();
    assert_eq!(got, [vec![0x7F, 0xFE], vec![0x80, 0xFF], vec![0x7E, 0x38]]);
}
