//! The bindgen output covers the whole shim header.

use std::collections::BTreeSet;

const HEADER: &str = include_str!("../shim/rtq_trt.h");
const BINDINGS: &str = include_str!("../src/bindings.rs");

/// The header text without `/* ... */` and `// ...` comments.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |end| &after[end + 2..]);
        } else if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |end| &after[end..]);
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Identifiers starting with `prefix` in `text`, with what follows each (trimmed).
fn identifiers<'a>(text: &'a str, prefix: &str) -> Vec<(&'a str, &'a str)> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = Vec::new();
    let mut start = 0;
    while let Some(pos) = text[start..].find(prefix) {
        let begin = start + pos;
        let preceded_by_ident = text[..begin].chars().next_back().is_some_and(is_ident);
        let end = text[begin..]
            .find(|c: char| !is_ident(c))
            .map_or(text.len(), |n| begin + n);
        if !preceded_by_ident {
            found.push((&text[begin..end], text[end..].trim_start()));
        }
        start = end;
    }
    found
}

/// Names of the functions the header declares (identifiers followed by `(`).
fn header_functions() -> BTreeSet<String> {
    let code = strip_comments(HEADER);
    identifiers(&code, "rtq_trt_")
        .into_iter()
        .filter(|(_, after)| after.starts_with('('))
        .map(|(name, _)| name.to_string())
        .collect()
}

#[test]
fn header_declares_the_expected_functions() {
    let functions = header_functions();
    for expected in [
        "rtq_trt_library_version",
        "rtq_trt_header_version",
        "rtq_trt_last_error",
        "rtq_trt_builder_create",
        "rtq_trt_builder_destroy",
        "rtq_trt_builder_log",
        "rtq_trt_build_engine",
        "rtq_trt_blob_data",
        "rtq_trt_blob_size",
        "rtq_trt_blob_destroy",
        "rtq_trt_engine_deserialize",
        "rtq_trt_engine_destroy",
        "rtq_trt_engine_num_io_tensors",
        "rtq_trt_engine_io_tensor",
        "rtq_trt_engine_num_profiles",
        "rtq_trt_engine_profile_shape",
        "rtq_trt_context_create",
        "rtq_trt_context_destroy",
        "rtq_trt_context_set_input_shape",
        "rtq_trt_context_tensor_shape",
        "rtq_trt_context_set_tensor_address",
        "rtq_trt_context_enqueue",
    ] {
        assert!(functions.contains(expected), "header lacks {expected}");
    }
    assert_eq!(functions.len(), 22, "header functions: {functions:?}");
}

#[test]
fn every_header_function_is_bound() {
    for name in header_functions() {
        let needle = format!("pub fn {name}(");
        assert!(
            BINDINGS.contains(&needle),
            "bindings.rs lacks `{needle}`: was bindgen's allowlist changed?"
        );
    }
}

#[test]
fn every_header_type_and_constant_is_bound() {
    let code = strip_comments(HEADER);
    let types: BTreeSet<&str> = identifiers(&code, "rtq_trt_")
        .into_iter()
        .filter(|(_, after)| !after.starts_with('('))
        .map(|(name, _)| name)
        .collect();
    assert!(types.contains("rtq_trt_build_options"));
    for ty in types {
        let as_struct = format!("pub struct {ty} ");
        let as_alias = format!("pub type {ty} ");
        assert!(
            BINDINGS.contains(&as_struct) || BINDINGS.contains(&as_alias),
            "bindings.rs lacks type {ty}"
        );
    }
    let constants: BTreeSet<&str> = identifiers(&code, "RTQ_TRT_")
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| *name != "RTQ_TRT_H")
        .collect();
    assert_eq!(constants.len(), 37, "constants: {constants:?}");
    for constant in constants {
        let needle = format!("pub const {constant}:");
        assert!(BINDINGS.contains(&needle), "bindings.rs lacks {constant}");
    }
}

#[test]
fn comment_stripping_and_identifier_scan_work() {
    let code = strip_comments("int a; /* rtq_trt_x( */ int rtq_trt_y(void); // rtq_trt_z(\n");
    let names: Vec<&str> = identifiers(&code, "rtq_trt_")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, vec!["rtq_trt_y"]);
}
