//! The standard optimisation pipeline.

use crate::{
    ConstantFolding, DeadCodeElimination, FoldBatchNorm, FoldChannelAffine, FoldIf, InferShapes,
    OptimizeOptions, Pass, PassError, PassManager, PassStats, RemoveIdentity,
};
use rtq_ir::Graph;

/// Names of the passes of the standard pipeline, for validating user input.
pub const PASS_NAMES: &[&str] = &[
    RemoveIdentity::NAME,
    InferShapes::NAME,
    ConstantFolding::NAME,
    FoldIf::NAME,
    FoldBatchNorm::NAME,
    FoldChannelAffine::NAME,
    DeadCodeElimination::NAME,
];

/// The standard optimisation pipeline, in order: identity/dropout removal, shape
/// inference, constant folding, BatchNormalization folding, Conv + Mul/Add channel
/// folding, dead-code elimination and shape inference again; minus the passes named in
/// `opts.disabled`. Run it with a [`PassManager`] (or [`optimize`]) to a fixed point.
pub fn optimization_passes(opts: &OptimizeOptions) -> Vec<Box<dyn Pass>> {
    let all: Vec<Box<dyn Pass>> = vec![
        Box::new(RemoveIdentity),
        Box::new(InferShapes),
        Box::new(ConstantFolding::new(opts.fold_size_limit)),
        Box::new(FoldIf),
        Box::new(FoldBatchNorm),
        Box::new(FoldChannelAffine),
        Box::new(DeadCodeElimination),
        Box::new(InferShapes),
    ];
    all.into_iter()
        .filter(|p| !opts.is_disabled(p.name()))
        .collect()
}

/// Runs the standard pipeline on `graph` to a fixed point; fails on a disabled pass name
/// that names no pass.
pub fn optimize(graph: &mut Graph, opts: &OptimizeOptions) -> Result<PassStats, PassError> {
    if let Some(name) = opts.unknown_disabled().first() {
        return Err(PassError::UnknownPass {
            name: name.to_string(),
            known: PASS_NAMES.join(", "),
        });
    }
    let mut manager = PassManager::new();
    manager
        .extend(optimization_passes(opts))
        .verify_each(opts.verify_each);
    manager.run(graph)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_order_and_disabling() {
        let names: Vec<&str> = optimization_passes(&OptimizeOptions::default())
            .iter()
            .map(|p| p.name())
            .collect();
        assert_eq!(
            names,
            vec![
                "remove-identity",
                "infer-shapes",
                "constant-folding",
                "fold-if",
                "fold-batch-norm",
                "fold-channel-affine",
                "dead-code-elimination",
                "infer-shapes"
            ]
        );
        let opts = OptimizeOptions {
            disabled: vec!["infer-shapes".into(), "fold-batch-norm".into()],
            ..OptimizeOptions::default()
        };
        let names: Vec<&str> = optimization_passes(&opts)
            .iter()
            .map(|p| p.name())
            .collect();
        assert_eq!(
            names,
            vec![
                "remove-identity",
                "constant-folding",
                "fold-if",
                "fold-channel-affine",
                "dead-code-elimination"
            ]
        );
    }

    #[test]
    fn unknown_disabled_pass_is_an_error() {
        let opts = OptimizeOptions {
            disabled: vec!["fold-bn".into()],
            ..OptimizeOptions::default()
        };
        let err = optimize(&mut Graph::new("g", 13), &opts)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("fold-bn") && err.contains("fold-batch-norm"),
            "{err}"
        );
    }
}
