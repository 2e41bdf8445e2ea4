//! The data-movement ops ONNX allows on INT4 tensors (and a few more the generic
//! kernels give for free) keep them INT4: every value, -8 and 7 included, comes out
//! where the op puts it, and the result is typed INT4, not INT8 (the IR stores both as
//! `i8`).

mod common;

use common::{ints, run};
use rtq_exec::eval_node;
use rtq_ir::{Attr, DType, Tensor, TensorData};
use rtq_test_support::node;

/// An INT4 tensor of `values` shaped `shape`.
fn int4(shape: &[usize], values: &[i8]) -> Tensor {
    Tensor::new(shape.to_vec(), TensorData::I4(values.to_vec())).unwrap()
}

/// The values of an INT4 tensor (panics for any other type).
fn values(t: &Tensor) -> Vec<i8> {
    match t.data() {
        TensorData::I4(v) => v.clone(),
        other => panic!("not INT4: {other:?}"),
    }
}

/// [2, 3] values with both ends of the range.
fn sample() -> Tensor {
    int4(&[2, 3], &[-8, 7, 0, -1, 3, -5])
}

#[test]
fn reshaping_ops_keep_the_values() {
    let x = sample();
    let all = values(&x);
    for (op, attrs, extra) in [
        ("Identity", vec![], None),
        ("Reshape", vec![], Some(ints(&[3, 2]))),
        ("Flatten", vec![("axis", Attr::Int(0))], None),
        ("Unsqueeze", vec![], Some(ints(&[0]))),
    ] {
        let mut inputs = vec![Some(&x)];
        inputs.extend(extra.as_ref().map(Some));
        let y = run(op, &attrs, &inputs);
        assert_eq!(y.dtype(), DType::I4, "{op}");
        assert_eq!(values(&y), all, "{op}");
    }
    let y = run(
        "Squeeze",
        &[],
        &[Some(&int4(&[1, 2], &[7, -8])), Some(&ints(&[0]))],
    );
    assert_eq!((y.shape(), values(&y)), (&[2][..], vec![7, -8]));
}

#[test]
fn moving_ops_put_each_value_in_its_place() {
    let x = sample();
    let y = run(
        "Transpose",
        &[("perm", Attr::Ints(vec![1, 0]))],
        &[Some(&x)],
    );
    assert_eq!(values(&y), [-8, -1, 7, 3, 0, -5]);
    let y = run("Concat", &[("axis", Attr::Int(0))], &[Some(&x), Some(&x)]);
    assert_eq!(values(&y), [values(&x), values(&x)].concat());
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
    assert_eq!(values(&y), [7, 0, 3, -5]);
    let y = run(
        "Gather",
        &[("axis", Attr::Int(1))],
        &[Some(&x), Some(&ints(&[2, 0]))],
    );
    assert_eq!(values(&y), [0, -8, -5, -1]);
    let y = run(
        "Expand",
        &[],
        &[Some(&int4(&[1, 2], &[-8, 7])), Some(&ints(&[2, 2]))],
    );
    assert_eq!(values(&y), [-8, 7, -8, 7]);
    let y = run(
        "Pad",
        &[],
        &[Some(&int4(&[2], &[7, -8])), Some(&ints(&[1, 0]))],
    );
    assert_eq!(values(&y), [0, 7, -8]);
}

#[test]
fn split_gives_int4_parts() {
    let x = sample();
    let n = node("Split", &[("axis", Attr::Int(1))], 3);
    let parts = eval_node(&n, &[Some(&x)]).unwrap();
    let got: Vec<Vec<i8>> = parts.iter().map(values).collect();
    assert_eq!(got, [vec![-8, -1], vec![7, 3], vec![0, -5]]);
}
