//! Golden IR dumps of the standard pipeline on a small Conv -> BatchNormalization ->
//! Identity -> Relu graph whose weight is built by ConstantOfShape and whose Conv output
//! also feeds a dead branch (which blocks BN folding until DCE has removed it, so the
//! pipeline needs a second iteration). The same graph computes the same outputs with the
//! pipeline on and off.

mod common;

use common::max_abs_diff;
use rtq_ir::{dump, Attr, DType, Dim, Graph, Tensor};
use rtq_passes::{optimize, OptimizeOptions};
use rtq_test_support::Rng;
use std::collections::BTreeMap;

fn graph() -> Graph {
    let mut g = Graph::new("snapshot", 13);
    let x = g.add_input(
        "x",
        DType::F32,
        vec![
            Dim::Sym("N".into()),
            Dim::Known(3),
            Dim::Known(8),
            Dim::Known(8),
        ],
    );
    let shape = g.add_constant("w_shape", Tensor::from_i64(vec![4], vec![4, 3, 3, 3]));
    let w = g.add_value("w", None, None);
    let mut fill = BTreeMap::new();
    fill.insert(
        "value".to_string(),
        Attr::Tensor(Tensor::from_f32(vec![1], vec![0.1])),
    );
    g.add_node(
        "make_w",
        "ConstantOfShape",
        vec![Some(shape)],
        vec![w],
        fill,
    );
    let c = g.add_value("conv_out", None, None);
    let mut conv = BTreeMap::new();
    conv.insert("pads".to_string(), Attr::Ints(vec![1, 1, 1, 1]));
    conv.insert("strides".to_string(), Attr::Ints(vec![2, 2]));
    g.add_node("conv", "Conv", vec![Some(x), Some(w)], vec![c], conv);
    let p = |g: &mut Graph, name: &str, v: [f32; 4]| {
        Some(g.add_constant(name, Tensor::from_f32(vec![4], v.to_vec())))
    };
    let bn_inputs = vec![
        Some(c),
        p(&mut g, "gamma", [1.0, 2.0, 0.5, 1.0]),
        p(&mut g, "beta", [0.0, 0.1, 0.2, 0.3]),
        p(&mut g, "mean", [0.5, 0.0, -0.5, 1.0]),
        p(&mut g, "var", [1.0, 4.0, 0.25, 1.0]),
    ];
    let bn = g.add_value("bn_out", None, None);
    g.add_node(
        "bn",
        "BatchNormalization",
        bn_inputs,
        vec![bn],
        BTreeMap::new(),
    );
    let id = g.add_value("id_out", None, None);
    g.add_node("id", "Identity", vec![Some(bn)], vec![id], BTreeMap::new());
    let y = g.add_value("y", Some(DType::F32), None);
    g.add_node("relu", "Relu", vec![Some(id)], vec![y], BTreeMap::new());
    // Dead branch reading the conv output.
    let dead = g.add_value("dead", None, None);
    g.add_node(
        "unused",
        "Sigmoid",
        vec![Some(c)],
        vec![dead],
        BTreeMap::new(),
    );
    g.outputs.push(y);
    g
}

#[test]
fn pipeline_dump_before_and_after() {
    let mut g = graph();
    insta::assert_snapshot!(dump(&g), @r#"
    graph "snapshot" opset 13
      input  "x": float[N,3,8,8]
      const  "w_shape": int64[4]
      const  "gamma": float[4]
      const  "beta": float[4]
      const  "mean": float[4]
      const  "var": float[4]
      "w": ?[?] = ConstantOfShape("w_shape") {value=tensor<float[1]>}  # "make_w"
      "conv_out": ?[?] = Conv("x", "w") {pads=[1, 1, 1, 1], strides=[2, 2]}  # "conv"
      "bn_out": ?[?] = BatchNormalization("conv_out", "gamma", "beta", "mean", "var")  # "bn"
      "id_out": ?[?] = Identity("bn_out")  # "id"
      "y": float[?] = Relu("id_out")  # "relu"
      "dead": ?[?] = Sigmoid("conv_out")  # "unused"
      output "y": float[?]
    "#);
    let stats = optimize(
        &mut g,
        &OptimizeOptions {
            verify_each: true,
            ..OptimizeOptions::default()
        },
    )
    .unwrap();
    insta::assert_snapshot!(dump(&g), @r#"
    graph "snapshot" opset 13
      input  "x": float[N,3,8,8]
      const  "w_folded": float[4,3,3,3]
      const  "conv_bias_folded": float[4]
      "conv_out": float[N,4,4,4] = Conv("x", "w_folded", "conv_bias_folded") {pads=[1, 1, 1, 1], strides=[2, 2]}  # "conv"
      "y": float[N,4,4,4] = Relu("conv_out")  # "relu"
      output "y": float[N,4,4,4]
    "#);
    assert!(stats.converged);
    assert_eq!(stats.iterations, 3, "{stats}");
}

#[test]
fn pipeline_on_and_off_compute_the_same_outputs() {
    let original = graph();
    let mut optimized = graph();
    optimize(&mut optimized, &OptimizeOptions::default()).unwrap();
    assert_eq!(optimized.node_count(), 2);
    let mut rng = Rng::new(11);
    for batch in [1, 3] {
        let feeds = vec![("x".to_string(), rng.tensor(&[batch, 3, 8, 8]))];
        let run = |g: &Graph| rtq_exec::Plan::new(g).unwrap().run(&feeds).unwrap();
        let (before, after) = (run(&original), run(&optimized));
        assert_eq!(before[0].shape(), &[batch, 4, 4, 4]);
        let diff = max_abs_diff(&before[0], &after[0]);
        assert!(diff < 1e-5, "batch {batch}: outputs differ by {diff}");
    }
}
