//! The committed bindings (`src/bindings.rs`) are what bindgen makes of the shim header
//! today. Runs with the `regenerate-bindings` feature, which needs libclang
//! (`scripts/test.sh` runs it where libclang is installed, as on CI); with
//! `RTQ_REGENERATE_BINDINGS=1` it rewrites the committed file instead
//! (`scripts/gen-trt-bindings.sh`).

#![cfg(feature = "regenerate-bindings")]

const FRESH: &str = include_str!(concat!(env!("OUT_DIR"), "/bindings.rs"));

#[test]
fn committed_bindings_match_the_header() {
    let committed_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bindings.rs");
    if std::env::var_os("RTQ_REGENERATE_BINDINGS").is_some() {
        std::fs::write(&committed_path, FRESH).expect("writing src/bindings.rs");
        return;
    }
    let committed = std::fs::read_to_string(&committed_path).expect("reading src/bindings.rs");
    assert!(
        committed == FRESH,
        "{} is stale: the shim header changed; run scripts/gen-trt-bindings.sh and commit the result",
        committed_path.display()
    );
}
