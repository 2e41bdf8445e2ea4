//! Folding passes checked numerically: each hand-built graph is run on rtq's executor
//! before and after the optimisation pipeline on random inputs and weights, and the
//! results must agree while the folded nodes are gone.

mod common;

use common::max_abs_diff;
use rtq_ir::{Attr, DType, Dim, Graph, Tensor, ValueId};
use rtq_passes::{optimize, OptimizeOptions};
use rtq_test_support::{add_op, attrs, Rng};
use std::collections::BTreeMap;

/// Random BatchNormalization parameters for `c` channels with positive variance.
fn bn(g: &mut Graph, rng: &mut Rng, x: ValueId, c: usize, name: &str) -> ValueId {
    let scale = g.add_constant(&format!("{name}_scale"), rng.tensor(&[c]));
    let bias = g.add_constant(&format!("{name}_bias"), rng.tensor(&[c]));
    let mean = g.add_constant(&format!("{name}_mean"), rng.tensor(&[c]));
    let var_values: Vec<f32> = (0..c).map(|_| rng.signed_f32().abs() + 0.1).collect();
    let var = g.add_constant(
        &format!("{name}_var"),
        Tensor::from_f32(vec![c], var_values),
    );
    add_op(
        g,
        name,
        "BatchNormalization",
        &[Some(x), Some(scale), Some(bias), Some(mean), Some(var)],
        &[("epsilon", Attr::Float(1e-3))],
    )
}

fn unary(g: &mut Graph, op: &str, x: ValueId, name: &str) -> ValueId {
    add_op(g, name, op, &[Some(x)], &[])
}

fn binary(g: &mut Graph, op: &str, a: ValueId, b: ValueId, name: &str) -> ValueId {
    add_op(g, name, op, &[Some(a), Some(b)], &[])
}

fn count(g: &Graph, op: &str) -> usize {
    g.nodes().filter(|(_, n)| n.op_type == op).count()
}

/// Optimises a copy of `g`, checks the optimised graph computes the same outputs on
/// `feeds`, and returns it.
fn optimise_and_compare(g: &Graph, feeds: &[(String, Tensor)]) -> Graph {
    let mut opt = g.clone();
    let opts = OptimizeOptions {
        verify_each: true,
        ..OptimizeOptions::default()
    };
    let stats = optimize(&mut opt, &opts).unwrap_or_else(|e| panic!("{}: {e}", g.name));
    assert!(stats.converged, "{}: {stats}", g.name);
    let run = |graph: &Graph| {
        rtq_exec::Plan::new(graph)
            .and_then(|p| p.run(feeds))
            .unwrap_or_else(|e| panic!("{}: {e}", graph.name))
    };
    let (before, after) = (run(g), run(&opt));
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        let diff = max_abs_diff(b, a);
        assert!(diff < 1e-4, "{}: outputs differ by {diff}", g.name);
    }
    opt
}

#[test]
fn conv_bn_relu_folds_exactly() {
    let mut rng = Rng::new(1);
    for with_bias in [false, true] {
        let mut g = Graph::new("conv_bn", 13);
        let x = g.add_input(
            "x",
            DType::F32,
            vec![
                Dim::Sym("N".into()),
                Dim::Known(4),
                Dim::Known(7),
                Dim::Known(7),
            ],
        );
        let w = g.add_constant("w", rng.tensor(&[6, 2, 3, 3]));
        let b = with_bias.then(|| g.add_constant("b", rng.tensor(&[6])));
        let c = g.add_value("c", None, None);
        g.add_node(
            "conv",
            "Conv",
            vec![Some(x), Some(w), b],
            vec![c],
            attrs(&[
                ("group", Attr::Int(2)),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
                ("strides", Attr::Ints(vec![2, 2])),
            ]),
        );
        let y = bn(&mut g, &mut rng, c, 6, "bn");
        let r = unary(&mut g, "Relu", y, "y");
        g.outputs.push(r);
        let feeds = vec![("x".to_string(), rng.tensor(&[2, 4, 7, 7]))];
        let opt = optimise_and_compare(&g, &feeds);
        assert_eq!(count(&opt, "BatchNormalization"), 0);
        assert_eq!(opt.node_count(), 2);
        assert_eq!(
            opt.value(opt.outputs[0]).shape,
            Some(vec![
                Dim::Sym("N".into()),
                Dim::Known(6),
                Dim::Known(4),
                Dim::Known(4)
            ])
        );
    }
}

#[test]
fn conv_transpose_bn_folds_exactly() {
    let mut rng = Rng::new(2);
    let mut g = Graph::new("deconv_bn", 13);
    let x = g.add_input(
        "x",
        DType::F32,
        vec![Dim::Known(1), Dim::Known(4), Dim::Known(5), Dim::Known(5)],
    );
    // C_in = 4, group = 2, M/group = 3 -> 6 output channels.
    let w = g.add_constant("w", rng.tensor(&[4, 3, 3, 3]));
    let b = g.add_constant("b", rng.tensor(&[6]));
    let c = g.add_value("c", None, None);
    g.add_node(
        "deconv",
        "ConvTranspose",
        vec![Some(x), Some(w), Some(b)],
        vec![c],
        attrs(&[("group", Attr::Int(2)), ("strides", Attr::Ints(vec![2, 2]))]),
    );
    let y = bn(&mut g, &mut rng, c, 6, "bn");
    g.outputs.push(y);
    let feeds = vec![("x".to_string(), rng.tensor(&[1, 4, 5, 5]))];
    let opt = optimise_and_compare(&g, &feeds);
    assert_eq!(opt.node_count(), 1);
}

#[test]
fn gemm_bn_folds_for_every_layout_and_bias_shape() {
    let mut rng = Rng::new(3);
    let biases: [Option<Vec<usize>>; 4] = [None, Some(vec![5]), Some(vec![1, 5]), Some(vec![3, 5])];
    for trans_b in [0, 1] {
        for bias in &biases {
            let mut g = Graph::new("gemm_bn", 13);
            let a = g.add_input("a", DType::F32, vec![Dim::Known(3), Dim::Known(4)]);
            let b_shape = if trans_b == 1 { [5, 4] } else { [4, 5] };
            let b = g.add_constant("b", rng.tensor(&b_shape));
            let c = bias.as_ref().map(|s| g.add_constant("c", rng.tensor(s)));
            let y = g.add_value("y", None, None);
            g.add_node(
                "fc",
                "Gemm",
                vec![Some(a), Some(b), c],
                vec![y],
                attrs(&[
                    ("transB", Attr::Int(trans_b)),
                    ("alpha", Attr::Float(0.5)),
                    ("beta", Attr::Float(2.0)),
                ]),
            );
            let out = bn(&mut g, &mut rng, y, 5, "bn");
            g.outputs.push(out);
            let feeds = vec![("a".to_string(), rng.tensor(&[3, 4]))];
            let opt = optimise_and_compare(&g, &feeds);
            assert_eq!(opt.node_count(), 1, "transB={trans_b} bias={bias:?}");
        }
    }
}

#[test]
fn per_channel_mul_add_sub_div_fold_into_conv_and_batch_norm() {
    let mut rng = Rng::new(4);
    let mut g = Graph::new("affine", 13);
    let x = g.add_input(
        "x",
        DType::F32,
        vec![Dim::Known(1), Dim::Known(3), Dim::Known(6), Dim::Known(6)],
    );
    let w = g.add_constant("w", rng.tensor(&[4, 3, 1, 1]));
    let c = g.add_value("c", None, None);
    g.add_node(
        "conv",
        "Conv",
        vec![Some(x), Some(w)],
        vec![c],
        BTreeMap::new(),
    );
    let m = g.add_constant("m", rng.tensor(&[4, 1, 1]));
    let a = g.add_constant("a", rng.tensor(&[1, 4, 1, 1]));
    let d = g.add_constant("d", Tensor::scalar_f32(3.0));
    let s = g.add_constant("s", rng.tensor(&[1]));
    let t1 = binary(&mut g, "Mul", m, c, "t1");
    let t2 = binary(&mut g, "Add", t1, a, "t2");
    let t3 = binary(&mut g, "Div", t2, d, "t3");
    let t4 = binary(&mut g, "Sub", t3, s, "t4");
    // DenseNet's pre-activation: BN -> Mul -> Add, folded into the BN.
    let b = bn(&mut g, &mut rng, t4, 4, "bn");
    let m2 = g.add_constant("m2", rng.tensor(&[4, 1, 1]));
    let a2 = g.add_constant("a2", rng.tensor(&[4, 1, 1]));
    let t5 = binary(&mut g, "Mul", b, m2, "t5");
    let t6 = binary(&mut g, "Add", t5, a2, "t6");
    let y = unary(&mut g, "Relu", t6, "y");
    g.outputs.push(y);
    let feeds = vec![("x".to_string(), rng.tensor(&[1, 3, 6, 6]))];
    let opt = optimise_and_compare(&g, &feeds);
    // Everything collapses into one Conv (the BN folds too, after the chain) and the Relu.
    assert_eq!(opt.node_count(), 2, "{}", rtq_ir::dump(&opt));
}

#[test]
fn shared_weights_are_not_mutated() {
    let mut rng = Rng::new(5);
    let mut g = Graph::new("shared", 13);
    let x = g.add_input(
        "x",
        DType::F32,
        vec![Dim::Known(1), Dim::Known(2), Dim::Known(4), Dim::Known(4)],
    );
    let w = g.add_constant("w", rng.tensor(&[2, 2, 3, 3]));
    let c1 = g.add_value("c1", None, None);
    let c2 = g.add_value("c2", None, None);
    let pads = attrs(&[("pads", Attr::Ints(vec![1, 1, 1, 1]))]);
    g.add_node(
        "conv1",
        "Conv",
        vec![Some(x), Some(w)],
        vec![c1],
        pads.clone(),
    );
    g.add_node("conv2", "Conv", vec![Some(x), Some(w)], vec![c2], pads);
    let y1 = bn(&mut g, &mut rng, c1, 2, "bn1");
    g.outputs.extend([y1, c2]);
    let feeds = vec![("x".to_string(), rng.tensor(&[1, 2, 4, 4]))];
    let opt = optimise_and_compare(&g, &feeds);
    assert_eq!(opt.node_count(), 2);
    assert_eq!(opt.constant(w), g.constant(w));
}
