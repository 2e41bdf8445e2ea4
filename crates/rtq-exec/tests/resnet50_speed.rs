//! Speed check on a ResNet-50-shaped graph (random weights, BatchNorm folded into the
//! convolutions as an optimised graph has it). Ignored by default; run with
//! `cargo test -p rtq-exec --test resnet50_speed -- --ignored --nocapture`.

use rtq_exec::Plan;
use rtq_ir::{Attr, DType, Dim, Graph, Tensor, ValueId};
use rtq_test_support::{add_op, attrs, Rng};
use std::collections::BTreeMap;
use std::time::Instant;

/// A tensor of `shape` with values uniform in [-`scale` / 2, `scale` / 2).
fn weights(rng: &mut Rng, shape: &[usize], scale: f32) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_f32(
        shape.to_vec(),
        (0..n).map(|_| rng.signed_f32() * 0.5 * scale).collect(),
    )
}

struct Builder {
    g: Graph,
    rng: Rng,
    count: usize,
}

impl Builder {
    fn conv(
        &mut self,
        x: ValueId,
        cin: usize,
        cout: usize,
        k: usize,
        stride: usize,
        relu: bool,
    ) -> ValueId {
        self.count += 1;
        let n = self.count;
        let scale = (2.0 / (cin * k * k) as f32).sqrt();
        let w = self.g.add_constant(
            &format!("w{n}"),
            weights(&mut self.rng, &[cout, cin, k, k], scale),
        );
        let b = self
            .g
            .add_constant(&format!("b{n}"), weights(&mut self.rng, &[cout], 0.1));
        let p = (k / 2) as i64;
        let y = add_op(
            &mut self.g,
            &format!("conv{n}"),
            "Conv",
            &[Some(x), Some(w), Some(b)],
            &[
                ("pads", Attr::Ints(vec![p, p, p, p])),
                ("strides", Attr::Ints(vec![stride as i64; 2])),
            ],
        );
        if relu {
            self.unary("Relu", y)
        } else {
            y
        }
    }

    fn unary(&mut self, op: &str, x: ValueId) -> ValueId {
        self.count += 1;
        add_op(
            &mut self.g,
            &format!("{op}{}", self.count),
            op,
            &[Some(x)],
            &[],
        )
    }

    fn add_relu(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.count += 1;
        let name = format!("add{}", self.count);
        let y = add_op(&mut self.g, &name, "Add", &[Some(a), Some(b)], &[]);
        self.unary("Relu", y)
    }

    fn bottleneck(&mut self, x: ValueId, cin: usize, mid: usize, stride: usize) -> ValueId {
        let cout = mid * 4;
        let a = self.conv(x, cin, mid, 1, 1, true);
        let b = self.conv(a, mid, mid, 3, stride, true);
        let c = self.conv(b, mid, cout, 1, 1, false);
        let skip = if stride != 1 || cin != cout {
            self.conv(x, cin, cout, 1, stride, false)
        } else {
            x
        };
        self.add_relu(c, skip)
    }
}

fn resnet50() -> Graph {
    let mut b = Builder {
        g: Graph::new("resnet50", 13),
        rng: Rng::new(7),
        count: 0,
    };
    let x = b.g.add_input(
        "x",
        DType::F32,
        vec![
            Dim::Sym("N".into()),
            Dim::Known(3),
            Dim::Known(224),
            Dim::Known(224),
        ],
    );
    let mut y = b.conv(x, 3, 64, 7, 2, true);
    let pooled = b.g.add_value("pool", None, None);
    b.g.add_node(
        "maxpool",
        "MaxPool",
        vec![Some(y)],
        vec![pooled],
        attrs(&[
            ("kernel_shape", Attr::Ints(vec![3, 3])),
            ("strides", Attr::Ints(vec![2, 2])),
            ("pads", Attr::Ints(vec![1, 1, 1, 1])),
        ]),
    );
    y = pooled;
    let mut cin = 64;
    for (blocks, mid, stride) in [(3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)] {
        for i in 0..blocks {
            y = b.bottleneck(y, cin, mid, if i == 0 { stride } else { 1 });
            cin = mid * 4;
        }
    }
    let gap = b.unary("GlobalAveragePool", y);
    let flat = b.unary("Flatten", gap);
    let w = weights(&mut b.rng, &[1000, 2048], 0.02);
    let w = b.g.add_constant("fc_w", w);
    let bias = weights(&mut b.rng, &[1000], 0.1);
    let bias = b.g.add_constant("fc_b", bias);
    let logits = b.g.add_value("logits", None, None);
    b.g.add_node(
        "fc",
        "Gemm",
        vec![Some(flat), Some(w), Some(bias)],
        vec![logits],
        attrs(&[("transB", Attr::Int(1))]),
    );
    let probs = b.unary("Softmax", logits);
    b.g.outputs.push(probs);
    b.g
}

#[test]
#[ignore = "speed measurement; run explicitly"]
fn resnet50_forward_speed() {
    let g = resnet50();
    let plan = Plan::new(&g).unwrap();
    let x = weights(&mut Rng::new(1), &[1, 3, 224, 224], 2.0);
    let feeds = [("x".to_string(), x)];
    plan.run(&feeds).unwrap(); // warm-up
    let runs = 3;
    let start = Instant::now();
    for _ in 0..runs {
        let out = plan.run(&feeds).unwrap();
        let s: f32 = out[0].as_f32().unwrap().iter().sum();
        assert!((s - 1.0).abs() < 1e-3);
    }
    let per_run = start.elapsed().as_secs_f64() / runs as f64;
    println!(
        "ResNet-50 224x224 batch 1: {:.1} ms per forward ({} threads)",
        per_run * 1e3,
        rayon::current_num_threads()
    );
}

#[test]
#[ignore = "profile; run explicitly"]
fn resnet50_profile() {
    let g = resnet50();
    let plan = Plan::new(&g).unwrap();
    let x = weights(&mut Rng::new(1), &[1, 3, 224, 224], 2.0);
    let feeds = [("x".to_string(), x)];
    plan.run(&feeds).unwrap();
    let mut last = Instant::now();
    let mut times: Vec<(ValueId, f64)> = Vec::new();
    plan.run_observed(&feeds, &mut |id, _| {
        let now = Instant::now();
        times.push((id, (now - last).as_secs_f64()));
        last = now;
    })
    .unwrap();
    let mut by_op: BTreeMap<String, f64> = BTreeMap::new();
    for (id, t) in &times {
        if let Some((n, _)) = g.value(*id).producer {
            let node = g.node(n);
            let key = if node.op_type == "Conv" {
                let w = g.value(node.inputs[1].unwrap()).constant.as_ref().unwrap();
                format!("Conv{}x{}", w.shape()[2], w.shape()[3])
            } else {
                node.op_type.clone()
            };
            *by_op.entry(key).or_default() += t;
        }
    }
    for (k, v) in by_op {
        println!("{k:>20}: {:.1} ms", v * 1e3);
    }
}
