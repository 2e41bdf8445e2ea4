//! End-to-end tests of `Plan` on small hand-built graphs: a CNN classifier head in
//! FP32 and FP16, a Q/DQ graph with per-axis weights, observation of intermediates and
//! error reporting.

use half::f16;
use rtq_exec::{ExecError, Plan};
use rtq_ir::{Attr, DType, Dim, Graph, Tensor, TensorData, ValueId};
use std::collections::BTreeMap;

fn attrs(list: &[(&str, Attr)]) -> BTreeMap<String, Attr> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// The ids of the classifier graph's values, in execution order.
struct Classifier {
    graph: Graph,
    x: ValueId,
    conv: ValueId,
    relu: ValueId,
    pool: ValueId,
    flat: ValueId,
    logits: ValueId,
    probs: ValueId,
}

/// x[1,1,4,4] -> Conv(2 filters 3x3, pad 1) -> Relu -> MaxPool(2x2, s2) -> Flatten ->
/// Gemm(8 -> 3, transB) -> Softmax.
///
/// Filter 0 sums each 3x3 window (bias -50); filter 1 is minus the centre (bias 10). With
/// x = 1..16 the pooled features are [4, 13, 40, 49] and [9, 7, 1, 0]; the Gemm rows pick
/// f0, f4 - f0 and 0.1*f3 + 1.1, giving logits [4, 5, 6].
fn classifier(dtype: DType) -> Classifier {
    let mut g = Graph::new("classifier", 13);
    let cast = |t: Tensor| t.cast(dtype);
    let x = g.add_input(
        "x",
        dtype,
        vec![
            Dim::Sym("N".into()),
            Dim::Known(1),
            Dim::Known(4),
            Dim::Known(4),
        ],
    );
    let mut w = vec![1.0f32; 9];
    let mut center = vec![0.0f32; 9];
    center[4] = -1.0;
    w.extend(center);
    let w = g.add_constant("w", cast(Tensor::from_f32(vec![2, 1, 3, 3], w)));
    let b = g.add_constant("b", cast(Tensor::from_f32(vec![2], vec![-50.0, 10.0])));
    let mut fc = vec![0.0f32; 24];
    fc[0] = 1.0; // logit 0 = f0
    fc[8] = -1.0; // logit 1 = f4 - f0
    fc[8 + 4] = 1.0;
    fc[16 + 3] = 0.1; // logit 2 = 0.1 * f3 + 1.1
    let fc_w = g.add_constant("fc_w", cast(Tensor::from_f32(vec![3, 8], fc)));
    let fc_b = g.add_constant("fc_b", cast(Tensor::from_f32(vec![3], vec![0.0, 0.0, 1.1])));
    let conv = g.add_value("conv", None, None);
    let relu = g.add_value("relu", None, None);
    let pool = g.add_value("pool", None, None);
    let flat = g.add_value("flat", None, None);
    let logits = g.add_value("logits", None, None);
    let probs = g.add_value("probs", None, None);
    g.add_node(
        "conv0",
        "Conv",
        vec![Some(x), Some(w), Some(b)],
        vec![conv],
        attrs(&[("pads", Attr::Ints(vec![1, 1, 1, 1]))]),
    );
    g.add_node(
        "relu0",
        "Relu",
        vec![Some(conv)],
        vec![relu],
        BTreeMap::new(),
    );
    g.add_node(
        "pool0",
        "MaxPool",
        vec![Some(relu)],
        vec![pool],
        attrs(&[
            ("kernel_shape", Attr::Ints(vec![2, 2])),
            ("strides", Attr::Ints(vec![2, 2])),
        ]),
    );
    g.add_node(
        "flatten0",
        "Flatten",
        vec![Some(pool)],
        vec![flat],
        BTreeMap::new(),
    );
    g.add_node(
        "fc0",
        "Gemm",
        vec![Some(flat), Some(fc_w), Some(fc_b)],
        vec![logits],
        attrs(&[("transB", Attr::Int(1))]),
    );
    g.add_node(
        "softmax0",
        "Softmax",
        vec![Some(logits)],
        vec![probs],
        BTreeMap::new(),
    );
    g.outputs.push(probs);
    Classifier {
        graph: g,
        x,
        conv,
        relu,
        pool,
        flat,
        logits,
        probs,
    }
}

fn input(dtype: DType) -> Tensor {
    Tensor::from_f32(vec![1, 1, 4, 4], (1..=16).map(|v| v as f32).collect()).cast(dtype)
}

fn expected_probs() -> [f32; 3] {
    let z = 1.0 + (-1.0f32).exp() + (-2.0f32).exp();
    [(-2.0f32).exp() / z, (-1.0f32).exp() / z, 1.0 / z]
}

#[test]
fn classifier_outputs_and_observed_intermediates() {
    let c = classifier(DType::F32);
    let plan = Plan::new(&c.graph).unwrap();
    assert_eq!(plan.input_names(), vec!["x"]);
    assert_eq!(plan.output_names(), vec!["probs"]);
    let mut seen: Vec<(ValueId, Tensor)> = Vec::new();
    let out = plan
        .run_observed(&[("x".to_string(), input(DType::F32))], &mut |id, t| {
            seen.push((id, (**t).clone()))
        })
        .unwrap();
    let probs = out[0].as_f32().unwrap();
    for (p, e) in probs.iter().zip(expected_probs()) {
        assert!((p - e).abs() < 1e-6, "{probs:?}");
    }
    let ids: Vec<ValueId> = seen.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        ids,
        vec![c.x, c.conv, c.relu, c.pool, c.flat, c.logits, c.probs]
    );
    let get = |id: ValueId| {
        seen.iter()
            .find(|(v, _)| *v == id)
            .map(|(_, t)| t.clone())
            .unwrap()
    };
    // Conv filter 0 at (1,1): window sum 54 - 50 = 4; filter 1 at (0,0): 10 - 1 = 9.
    assert_eq!(get(c.conv).shape(), &[1, 2, 4, 4]);
    assert_eq!(get(c.conv).as_f32().unwrap()[5], 4.0);
    assert_eq!(get(c.conv).as_f32().unwrap()[16], 9.0);
    assert!(get(c.relu).as_f32().unwrap().iter().all(|&v| v >= 0.0));
    assert_eq!(
        get(c.flat).as_f32().unwrap(),
        &[4.0, 13.0, 40.0, 49.0, 9.0, 7.0, 1.0, 0.0]
    );
    let logits = get(c.logits);
    for (l, e) in logits.as_f32().unwrap().iter().zip([4.0, 5.0, 6.0]) {
        assert!((l - e).abs() < 1e-5, "{logits:?}");
    }
    assert_eq!(get(c.probs), out[0]);
    assert_eq!(plan.observed_values(), ids);
}

#[test]
fn fp16_graph_runs_in_half_precision() {
    let c = classifier(DType::F16);
    let plan = Plan::new(&c.graph).unwrap();
    let out = plan.run(&[("x".to_string(), input(DType::F16))]).unwrap();
    assert_eq!(out[0].dtype(), DType::F16);
    let probs = out[0].to_f32_vec();
    for (p, e) in probs.iter().zip(expected_probs()) {
        assert!((p - e).abs() < 2e-3, "{probs:?}");
        // Every output is a half-precision value.
        assert_eq!(*p, f16::from_f32(*p).to_f32());
    }
    // An FP32 feed does not match the FP16 input declaration.
    let err = plan
        .run(&[("x".to_string(), input(DType::F32))])
        .unwrap_err();
    assert!(matches!(err, ExecError::FeedMismatch { .. }), "{err}");
}

#[test]
fn batches_and_threads_share_one_plan() {
    let c = classifier(DType::F32);
    let plan = Plan::new(&c.graph).unwrap();
    // Batch of two identical images through the symbolic batch dimension.
    let one = input(DType::F32);
    let mut data = one.to_f32_vec();
    data.extend(one.to_f32_vec());
    let batch = Tensor::from_f32(vec![2, 1, 4, 4], data);
    let out = plan.run(&[("x".to_string(), batch)]).unwrap();
    assert_eq!(out[0].shape(), &[2, 3]);
    let v = out[0].as_f32().unwrap();
    assert_eq!(v[..3], v[3..]);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| s.spawn(|| plan.run(&[("x".to_string(), input(DType::F32))]).unwrap()))
            .collect();
        for h in handles {
            let out = h.join().unwrap();
            assert!((out[0].as_f32().unwrap()[2] - expected_probs()[2]).abs() < 1e-6);
        }
    });
}

#[test]
fn qdq_graph_with_per_axis_weights() {
    // x -> Q/DQ (per tensor, uint8) -> Conv with int8 weights dequantized per output channel.
    let mut g = Graph::new("qdq", 13);
    let x = g.add_input(
        "x",
        DType::F32,
        vec![Dim::Known(1), Dim::Known(1), Dim::Known(2), Dim::Known(2)],
    );
    let xs = g.add_constant("x_scale", Tensor::scalar_f32(0.5));
    let xz = g.add_constant(
        "x_zp",
        Tensor::new(vec![], TensorData::U8(vec![128])).unwrap(),
    );
    let wq = g.add_constant(
        "w_q",
        Tensor::new(vec![2, 1, 1, 1], TensorData::I8(vec![3, -5])).unwrap(),
    );
    let ws = g.add_constant("w_scale", Tensor::from_f32(vec![2], vec![0.25, 2.0]));
    let wz = g.add_constant(
        "w_zp",
        Tensor::new(vec![2], TensorData::I8(vec![0, 0])).unwrap(),
    );
    let (q, dq, w, y) = (
        g.add_value("x_q", None, None),
        g.add_value("x_dq", None, None),
        g.add_value("w", None, None),
        g.add_value("y", None, None),
    );
    g.add_node(
        "q",
        "QuantizeLinear",
        vec![Some(x), Some(xs), Some(xz)],
        vec![q],
        BTreeMap::new(),
    );
    g.add_node(
        "dq",
        "DequantizeLinear",
        vec![Some(q), Some(xs), Some(xz)],
        vec![dq],
        BTreeMap::new(),
    );
    g.add_node(
        "dq_w",
        "DequantizeLinear",
        vec![Some(wq), Some(ws), Some(wz)],
        vec![w],
        attrs(&[("axis", Attr::Int(0))]),
    );
    g.add_node(
        "conv",
        "Conv",
        vec![Some(dq), Some(w)],
        vec![y],
        BTreeMap::new(),
    );
    g.outputs.push(y);
    let plan = Plan::new(&g).unwrap();
    // x/0.5: 0.5 -> 1 ; 0.75 -> 1.5 -> 2 (even) ; 0.25 -> 0.5 -> 0 (even) ; 100 -> saturates at 255-128.
    let xin = Tensor::from_f32(vec![1, 1, 2, 2], vec![0.5, 0.75, 0.25, 100.0]);
    let out = plan.run(&[("x".to_string(), xin)]).unwrap();
    let xq = [0.5f32, 1.0, 0.0, 63.5];
    let want: Vec<f32> = [0.75f32, -10.0]
        .iter()
        .flat_map(|w| xq.iter().map(move |v| v * w))
        .collect();
    assert_eq!(out[0].as_f32().unwrap(), &want[..]);
}

#[test]
fn unsupported_ops_are_all_listed() {
    let mut g = Graph::new("g", 13);
    let x = g.add_input("x", DType::F32, vec![Dim::Known(2)]);
    let a = g.add_value("a", None, None);
    let b = g.add_value("b", None, None);
    let c = g.add_value("c", None, None);
    g.add_node(
        "mystery_one",
        "FancyOp",
        vec![Some(x)],
        vec![a],
        BTreeMap::new(),
    );
    g.add_node("fine", "Relu", vec![Some(a)], vec![b], BTreeMap::new());
    let id = g.add_node(
        "mystery_two",
        "Relu",
        vec![Some(b)],
        vec![c],
        BTreeMap::new(),
    );
    g.node_mut(id).domain = "com.microsoft".into();
    g.outputs.push(c);
    let err = Plan::new(&g).err().expect("two unsupported nodes");
    match &err {
        ExecError::UnsupportedMany(list) => {
            assert_eq!(list.len(), 2);
            assert_eq!(list[0], ("mystery_one".to_string(), "FancyOp".to_string()));
            assert_eq!(
                list[1],
                ("mystery_two".to_string(), "com.microsoft.Relu".to_string())
            );
        }
        other => panic!("unexpected error {other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("mystery_one") && text.contains("mystery_two"),
        "{text}"
    );
}

#[test]
fn kernel_errors_name_the_node() {
    let c = classifier(DType::F32);
    let plan = Plan::new(&c.graph).unwrap();
    // 3x3 input: the pooled features no longer fit the 8-wide Gemm.
    let x = Tensor::from_f32(vec![1, 1, 2, 2], vec![1.0; 4]);
    let err = plan.run(&[("x".to_string(), x)]).unwrap_err().to_string();
    assert!(err.contains("`x`"), "{err}");
    let x = Tensor::from_f32(vec![1, 1, 6, 6], vec![1.0; 36]);
    let mut g = c.graph.clone();
    g.value_mut(c.x).shape = None;
    let plan = Plan::new(&g).unwrap();
    let err = plan.run(&[("x".to_string(), x)]).unwrap_err().to_string();
    assert!(err.contains("fc0") && err.contains("Gemm"), "{err}");
}

/// A 3x3 convolution of 32 channels (the Winograd kernel's size) whose weights are a
/// constant or, when `fed`, a graph input.
fn winograd_conv(fed: bool) -> (Graph, Tensor) {
    let mut g = Graph::new("wino", 13);
    let x = g.add_input(
        "x",
        DType::F32,
        vec![Dim::Known(1), Dim::Known(32), Dim::Known(6), Dim::Known(6)],
    );
    let w = Tensor::from_f32(
        vec![32, 32, 3, 3],
        (0..32 * 32 * 9)
            .map(|i| ((i * 37 % 19) as f32 - 9.0) * 0.01)
            .collect(),
    );
    let w_id = if fed {
        g.add_input(
            "w",
            DType::F32,
            vec![Dim::Known(32), Dim::Known(32), Dim::Known(3), Dim::Known(3)],
        )
    } else {
        g.add_constant("w", w.clone())
    };
    let y = g.add_value("y", None, None);
    g.add_node(
        "conv",
        "Conv",
        vec![Some(x), Some(w_id)],
        vec![y],
        attrs(&[("pads", Attr::Ints(vec![1, 1, 1, 1]))]),
    );
    g.outputs.push(y);
    (g, w)
}

#[test]
fn constant_weights_are_prepared_once_and_fed_weights_every_run() {
    let x = Tensor::from_f32(
        vec![1, 32, 6, 6],
        (0..32 * 36)
            .map(|i| ((i * 11 % 23) as f32 - 11.0) * 0.1)
            .collect(),
    );
    let (graph, w) = winograd_conv(false);
    let plan = Plan::new(&graph).unwrap();
    let feeds = [("x".to_string(), x.clone())];
    let first = plan.run(&feeds).unwrap();
    // The second run reads the transformed weights kept by the plan.
    assert_eq!(plan.run(&feeds).unwrap(), first);
    let node = graph.node(graph.topo_order().unwrap()[0]);
    let single = rtq_exec::eval_node(node, &[Some(&x), Some(&w)]).unwrap();
    assert_eq!(single, first, "a plan and a single evaluation agree");

    // Weights that are a graph input may change between runs: nothing is kept.
    let (graph, _) = winograd_conv(true);
    let plan = Plan::new(&graph).unwrap();
    let run = |w: &Tensor| {
        plan.run(&[("x".to_string(), x.clone()), ("w".to_string(), w.clone())])
            .unwrap()
    };
    assert_eq!(run(&w), first);
    let doubled = w.to_f32_vec().iter().map(|v| v * 2.0).collect();
    let twice = run(&Tensor::from_f32(vec![32, 32, 3, 3], doubled));
    let want: Vec<f32> = first[0].to_f32_vec().iter().map(|v| v * 2.0).collect();
    assert_eq!(twice[0].to_f32_vec(), want);
}

/// `out = If(c) { Relu(x) } else { If(c2) { Neg(x) } else { Abs(x) } }`, bodies reading
/// the outer `x` (and `c2`) as captures.
fn nested_ifs() -> Graph {
    use rtq_ir::Subgraph;
    use std::sync::Arc;
    let unary = |op: &str| {
        let mut b = Graph::new(op, 13);
        let x = b.add_input("x", DType::F32, vec![Dim::Known(4)]);
        let y = b.add_value(&format!("{op}_out"), None, None);
        b.add_node(op, op, vec![Some(x)], vec![y], BTreeMap::new());
        b.outputs.push(y);
        b.captures = 1;
        Subgraph(Arc::new(b))
    };
    let mut inner = Graph::new("inner", 13);
    let x = inner.add_input("x", DType::F32, vec![Dim::Known(4)]);
    let c2 = inner.add_input("c2", DType::Bool, vec![]);
    let y = inner.add_value("inner_out", Some(DType::F32), None);
    inner.add_node(
        "if2",
        "If",
        vec![Some(c2), Some(x)],
        vec![y],
        attrs(&[
            ("then_branch", Attr::Graph(unary("Neg"))),
            ("else_branch", Attr::Graph(unary("Abs"))),
        ]),
    );
    inner.outputs.push(y);
    inner.captures = 2;
    let relu = {
        // Same captures as the else branch (x, c2), reading only x.
        let mut b = Graph::new("relu", 13);
        let x = b.add_input("x", DType::F32, vec![Dim::Known(4)]);
        b.add_input("c2", DType::Bool, vec![]);
        let y = b.add_value("relu_out", None, None);
        b.add_node("relu", "Relu", vec![Some(x)], vec![y], BTreeMap::new());
        b.outputs.push(y);
        b.captures = 2;
        Subgraph(Arc::new(b))
    };
    let mut g = Graph::new("g", 13);
    let x = g.add_input("x", DType::F32, vec![Dim::Known(4)]);
    let c = g.add_input("c", DType::Bool, vec![]);
    let c2 = g.add_input("c2", DType::Bool, vec![]);
    let out = g.add_value("out", Some(DType::F32), None);
    g.add_node(
        "if1",
        "If",
        vec![Some(c), Some(x), Some(c2)],
        vec![out],
        attrs(&[
            ("then_branch", Attr::Graph(relu)),
            ("else_branch", Attr::Graph(Subgraph(Arc::new(inner)))),
        ]),
    );
    g.outputs.push(out);
    g
}

#[test]
fn nested_observation_reports_body_values_with_their_scopes() {
    let g = nested_ifs();
    let plan = Plan::new(&g).unwrap();
    let flag = |v: bool| Tensor::new(vec![], TensorData::Bool(vec![v])).unwrap();
    let x = Tensor::from_f32(vec![4], vec![-2.0, -1.0, 1.0, 2.0]);
    let feeds = |c: bool, c2: bool| {
        vec![
            ("x".to_string(), x.clone()),
            ("c".to_string(), flag(c)),
            ("c2".to_string(), flag(c2)),
        ]
    };
    let mut seen: Vec<(Vec<String>, usize, Vec<f32>)> = Vec::new();
    let out = plan
        .run_observed_nested(&feeds(false, true), &mut |scopes, v, t| {
            let path = scopes
                .iter()
                .map(|s| format!("{}.{}", s.node, s.attr))
                .collect();
            let values = if t.dtype() == DType::F32 {
                t.to_f32_vec()
            } else {
                Vec::new()
            };
            seen.push((path, v.index(), values));
        })
        .unwrap();
    assert_eq!(out[0].to_f32_vec(), vec![2.0, 1.0, -1.0, -2.0]);
    let paths: Vec<Vec<String>> = seen.iter().map(|(p, _, _)| p.clone()).collect();
    // Top-level feeds, the outer If's else body (its two captured feeds), the inner
    // If's then body (its feed, then Neg's output), then each If's output on the way out.
    let top: Vec<String> = Vec::new();
    let else1 = vec!["if1.else_branch".to_string()];
    let then2 = vec!["if1.else_branch".to_string(), "if2.then_branch".to_string()];
    assert_eq!(
        paths,
        vec![
            top.clone(),
            top.clone(),
            top.clone(),
            else1.clone(),
            else1.clone(),
            then2.clone(),
            then2.clone(),
            else1,
            top
        ]
    );
    assert_eq!(seen[6].2, vec![2.0, 1.0, -1.0, -2.0], "Neg's output");
    // The flat observer sees the top graph only, and a plain run is unchanged.
    let mut flat = 0;
    plan.run_observed(&feeds(false, true), &mut |_, _| flat += 1)
        .unwrap();
    assert_eq!(flat, 4);
    assert_eq!(
        plan.run(&feeds(true, true)).unwrap()[0].to_f32_vec(),
        vec![0.0, 0.0, 1.0, 2.0]
    );
}
