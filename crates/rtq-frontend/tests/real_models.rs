//! Loads real models shipped inside PyPI wheels: every classic architecture under
//! `onnx/backend/test/data/light` of the `onnx` wheel and the PP-OCR models of
//! `rapidocr-onnxruntime`. The wheels are located through `python3`; set
//! `RTQ_SKIP_PYTHON_TESTS=1` to skip on a machine without them.

use rtq_test_support::{light_models, pp_ocr_models};

#[test]
fn loads_every_light_model_of_the_onnx_wheel() {
    let Some(files) = light_models() else {
        return;
    };
    for file in files {
        let graph =
            rtq_frontend::load_model(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(graph.node_count() > 10, "{}", file.display());
        assert_eq!(graph.outputs.len(), 1);
        // Legacy models list initializers as inputs; only the image input remains.
        assert_eq!(
            graph.inputs.len(),
            1,
            "{}: {:?}",
            file.display(),
            graph.inputs
        );
        rtq_ir::verify(&graph).unwrap();
    }
}

#[test]
fn loads_the_pp_ocr_models_of_rapidocr() {
    let Some(files) = pp_ocr_models() else {
        return;
    };
    for file in files {
        let graph =
            rtq_frontend::load_model(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let input = graph.value(graph.inputs[0]);
        // PP-OCR inputs have symbolic batch/height/width dims.
        assert!(
            input
                .shape
                .as_ref()
                .unwrap()
                .iter()
                .any(|d| d.is_symbolic()),
            "{}: {:?}",
            file.display(),
            input.shape
        );
        assert!(graph.opset >= 11);
    }
}
