//! The optimisation pipeline on real models shipped inside PyPI wheels: the classic
//! architectures under `onnx/backend/test/data/light` of the `onnx` wheel (all weights
//! built by `ConstantOfShape`, BatchNormalization everywhere) and the PP-OCR models of
//! `rapidocr-onnxruntime` (symbolic batch/height/width, shape arithmetic, Resize).
//!
//! Inferred shapes are checked against the shapes onnxruntime actually computes for every
//! tensor, before and after optimisation; optimised and original graphs must compute the
//! same outputs on rtq's executor. Needs `python3` with the packages of
//! requirements-test.txt; set `RTQ_SKIP_PYTHON_TESTS=1` to skip.

mod common;

use common::{actual_shapes, check_facts, max_abs_diff};
use rtq_ir::{known_shape, Dim, Graph};
use rtq_passes::{infer_shapes, optimize, OptimizeOptions};
use rtq_test_support::{light_models, pp_ocr_models, Rng};
use std::path::Path;

fn load(file: &Path) -> Graph {
    rtq_frontend::load_model(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

fn ops(graph: &Graph, op: &str) -> usize {
    graph.nodes().filter(|(_, n)| n.op_type == op).count()
}

/// Node outputs shape inference left without a shape.
fn unshaped(graph: &Graph) -> Vec<String> {
    graph
        .nodes()
        .flat_map(|(_, n)| n.outputs.iter().map(move |&o| (n, o)))
        .filter(|&(_, o)| graph.value(o).shape.is_none())
        .map(|(n, o)| format!("{} ({}) -> {}", n.name, n.op_type, graph.value(o).name))
        .collect()
}

/// Runs `graph` on `feeds` with rtq's executor.
fn run(graph: &Graph, feeds: &[(String, rtq_ir::Tensor)]) -> Vec<rtq_ir::Tensor> {
    rtq_exec::Plan::new(graph)
        .and_then(|p| p.run(feeds))
        .unwrap_or_else(|e| panic!("{}: {e}", graph.name))
}

#[test]
fn light_models_infer_exact_shapes_and_optimise_without_changing_results() {
    let Some(files) = light_models() else {
        return;
    };
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let actual = actual_shapes(&file, 64);
        let original = load(&file);

        let mut inferred = original.clone();
        infer_shapes(&mut inferred).unwrap_or_else(|e| panic!("{name}: {e}"));
        let checked = check_facts(&inferred, &actual, &name);
        assert!(checked > 20, "{name}: only {checked} values compared");
        assert_eq!(unshaped(&inferred), Vec::<String>::new(), "{name}");

        let mut optimized = original.clone();
        let opts = OptimizeOptions {
            verify_each: true,
            ..OptimizeOptions::default()
        };
        let stats = optimize(&mut optimized, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(stats.converged, "{name}: {stats}");
        check_facts(&optimized, &actual, &format!("{name} (optimized)"));
        assert_eq!(unshaped(&optimized), Vec::<String>::new(), "{name}");
        // Every weight is folded to a constant, except those over the size limit (VGG's
        // 411 MB fc6), every BatchNormalization after a Conv into it, and no Dropout
        // survives.
        assert_eq!(ops(&optimized, "Dropout"), 0, "{name}: Dropout left");
        for (_, node) in optimized
            .nodes()
            .filter(|(_, n)| n.op_type == "ConstantOfShape")
        {
            let out = optimized.value(node.outputs[0]);
            let bytes = known_shape(out.shape.as_deref().unwrap())
                .unwrap()
                .iter()
                .product::<usize>()
                * 4;
            assert!(
                bytes > opts.fold_size_limit,
                "{name}: `{}` ({bytes} bytes) was not folded\n{stats}",
                node.name
            );
        }
        let bn_after_conv = original
            .nodes()
            .filter(|(_, n)| n.op_type == "BatchNormalization")
            .filter(|(_, n)| {
                n.input(0)
                    .and_then(|x| original.value(x).producer)
                    .is_some_and(|(p, _)| original.node(p).op_type == "Conv")
            })
            .count();
        assert!(
            ops(&optimized, "BatchNormalization") + bn_after_conv
                <= ops(&original, "BatchNormalization"),
            "{name}: {stats}"
        );
        assert!(optimized.node_count() < original.node_count(), "{name}");

        // Same results before and after on a random input.
        let input = original.value(original.inputs[0]);
        let dims = known_shape(input.shape.as_deref().unwrap()).expect("static input");
        let feeds = vec![(input.name.clone(), Rng::new(7).tensor(&dims))];
        let before = run(&original, &feeds);
        let after = run(&optimized, &feeds);
        for (b, a) in before.iter().zip(&after) {
            let scale = b
                .to_f32_vec()
                .iter()
                .fold(0.0f32, |m, v| m.max(v.abs()))
                .max(1e-6);
            let diff = max_abs_diff(b, a);
            assert!(
                diff <= 1e-3 * scale,
                "{name}: outputs differ by {diff} (scale {scale})"
            );
        }
    }
}

#[test]
fn pp_ocr_models_infer_symbolic_shapes_consistently() {
    let Some(files) = pp_ocr_models() else {
        return;
    };
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let actual = actual_shapes(&file, 64);
        let mut graph = load(&file);
        assert!(
            graph
                .value(graph.inputs[0])
                .shape
                .as_ref()
                .is_some_and(|s| s.iter().any(Dim::is_symbolic)),
            "{name}: expected a symbolic input"
        );
        infer_shapes(&mut graph).unwrap_or_else(|e| panic!("{name}: {e}"));
        let checked = check_facts(&graph, &actual, &name);
        assert!(checked > 20, "{name}: only {checked} values compared");
        assert_eq!(unshaped(&graph), Vec::<String>::new(), "{name}");
        let opts = OptimizeOptions {
            verify_each: true,
            ..OptimizeOptions::default()
        };
        let stats = optimize(&mut graph, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(stats.converged, "{name}: {stats}");
        check_facts(&graph, &actual, &format!("{name} (optimized)"));
        // The graph output's rank is always known.
        for &o in &graph.outputs {
            assert!(
                graph.value(o).shape.is_some(),
                "{name}: output without shape"
            );
        }
    }
}
