//! Fuzz target: arbitrary bytes through rtq's ONNX decoder and importer.
//!
//! `load_model_bytes` must never panic, abort or hang, whatever it is given: an `Err`
//! is the expected answer for malformed input. When a model does import, the IR it
//! produced must also survive the verifier and the text dump.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match rtq_frontend::load_model_bytes(data) {
        Ok(graph) => {
            // The importer verifies before returning, so a failure here is a bug in
            // either the importer or the verifier; both must still not panic.
            let verified = rtq_ir::verify(&graph);
            assert!(
                verified.is_ok(),
                "imported graph fails verification: {verified:?}"
            );
            let text = rtq_ir::dump(&graph);
            assert!(text.starts_with("graph "), "dump has no header: {text}");
        }
        Err(e) => {
            // Error messages are user-facing: formatting them must not panic either.
            let _ = e.to_string();
        }
    }
});
