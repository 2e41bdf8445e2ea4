//! The three op tables agree: every op the frontend imports (less those it rewrites
//! into other ops) has a shape-inference rule and an executor kernel, and the executor
//! implements no op the frontend cannot import unless it is listed below.

use std::collections::BTreeSet;

/// Ops the executor implements on purpose although the frontend does not import them
/// (one comment each saying why, e.g. ops only rtq's own passes insert). None today.
const KERNELS_NOT_IMPORTED: &[&str] = &[];

/// Ops of `wanted` not in `have`, in order.
fn missing<'a>(wanted: &[&'a str], have: &[&str]) -> Vec<&'a str> {
    let have: BTreeSet<&str> = have.iter().copied().collect();
    wanted
        .iter()
        .copied()
        .filter(|op| !have.contains(op))
        .collect()
}

/// What the importer leaves in a graph: every imported op but the rewritten ones.
fn reaching_the_graph() -> Vec<&'static str> {
    let rewritten = rtq_frontend::rewritten_ops();
    rtq_frontend::imported_ops()
        .into_iter()
        .filter(|op| !rewritten.contains(op))
        .collect()
}

#[test]
fn every_imported_op_has_a_shape_rule_and_a_kernel() {
    let ops = reaching_the_graph();
    let no_rule = missing(&ops, &rtq_passes::shape_rule_ops());
    let no_kernel = missing(&ops, &rtq_exec::supported_ops());
    assert!(
        no_rule.is_empty() && no_kernel.is_empty(),
        "imported ops without a shape rule: {no_rule:?}; without an executor kernel: {no_kernel:?}"
    );
}

#[test]
fn every_kernel_is_for_an_imported_op_or_allowed() {
    let kernels = rtq_exec::supported_ops();
    let mut allowed = rtq_frontend::imported_ops();
    allowed.extend_from_slice(KERNELS_NOT_IMPORTED);
    let stray = missing(&kernels, &allowed);
    assert!(
        stray.is_empty(),
        "executor kernels for ops the frontend does not import: {stray:?} \
         (import them, or list them in KERNELS_NOT_IMPORTED with the reason)"
    );
    // The allow-list holds no op that is imported or has no kernel after all.
    let stale: Vec<&str> = KERNELS_NOT_IMPORTED
        .iter()
        .copied()
        .filter(|op| rtq_frontend::imported_ops().contains(op) || !kernels.contains(op))
        .collect();
    assert!(
        stale.is_empty(),
        "KERNELS_NOT_IMPORTED lists ops that are imported or have no kernel: {stale:?}"
    );
}

#[test]
fn the_readme_lists_every_imported_op() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme
        .find("## Supported ops")
        .expect("README has a Supported ops section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let listed: BTreeSet<&str> = section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| family"))
        .filter_map(|l| l.split('|').nth(2))
        .flat_map(|ops| ops.split(','))
        .filter_map(|op| op.split_whitespace().next())
        .collect();
    let imported = rtq_frontend::imported_ops();
    let unlisted = missing(&imported, &listed.iter().copied().collect::<Vec<_>>());
    let imported: BTreeSet<&str> = imported.into_iter().collect();
    let unknown: Vec<&&str> = listed.iter().filter(|op| !imported.contains(*op)).collect();
    assert!(
        unlisted.is_empty() && unknown.is_empty(),
        "imported but not in README: {unlisted:?}; in README but not imported: {unknown:?}"
    );
}
