//! The precision transforms as [`Pass`]es, so the pass manager runs them like any
//! other pass: verification between passes, `--dump-ir`, `--stop-after` and per-pass
//! statistics apply to them too. Each applies its transform once (a second run changes
//! nothing) and keeps the transform's summary for the report.

use super::{
    apply_equalization, apply_int4, apply_int8, apply_int8_in_bodies, convert_fp16, BodiesSummary,
    BodyRanges, EqualizeOptions, EqualizeSite, EqualizeSummary, Fp16Options, Fp16Summary,
    Int4Options, Int4Plan, Int4Summary, Int4Tuning, Int8Options, Int8Plan, Int8Summary,
};
use crate::{Pass, PassError};
use rtq_ir::{Graph, NodeId, QuantGrid, ValueId};
use std::collections::HashMap;

/// Inserts INT8 Q/DQ nodes per a plan ([`super::plan_int8`]) with calibrated ranges
/// ([`apply_int8`]).
#[derive(Debug)]
pub struct Int8QdqPass<'a> {
    plan: &'a Int8Plan,
    ranges: &'a HashMap<ValueId, f32>,
    summary: Option<Int8Summary>,
}

impl<'a> Int8QdqPass<'a> {
    /// Name of the pass.
    pub const NAME: &'static str = "int8-qdq";
    /// Name of the pass when the plan quantizes to FP8 E4M3.
    pub const FP8_NAME: &'static str = "fp8-qdq";

    /// The pass for `plan`, with `ranges` giving each planned activation's amax.
    pub fn new(plan: &'a Int8Plan, ranges: &'a HashMap<ValueId, f32>) -> Int8QdqPass<'a> {
        Int8QdqPass {
            plan,
            ranges,
            summary: None,
        }
    }

    /// What the transform did, once the pass has run.
    pub fn summary(&self) -> Option<&Int8Summary> {
        self.summary.as_ref()
    }
}

impl Pass for Int8QdqPass<'_> {
    fn name(&self) -> &'static str {
        match self.plan.grid {
            QuantGrid::Int8 => Self::NAME,
            QuantGrid::Fp8E4M3 => Self::FP8_NAME,
        }
    }

    fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
        let (plan, ranges) = (self.plan, self.ranges);
        let name = self.name();
        run_once(&mut self.summary, name, || apply_int8(graph, plan, ranges))
    }
}

/// Inserts Q/DQ inside control-flow bodies ([`apply_int8_in_bodies`]) with the ranges
/// observed inside them.
#[derive(Debug)]
pub struct Int8BodiesPass<'a> {
    ranges: &'a BodyRanges,
    options: Int8Options,
    summary: Option<BodiesSummary>,
}

impl<'a> Int8BodiesPass<'a> {
    /// Name of the pass.
    pub const NAME: &'static str = "qdq-in-bodies";

    /// The pass with each body's ranges and the top graph's options.
    pub fn new(ranges: &'a BodyRanges, options: Int8Options) -> Int8BodiesPass<'a> {
        Int8BodiesPass {
            ranges,
            options,
            summary: None,
        }
    }

    /// What the transform did, once the pass has run.
    pub fn summary(&self) -> Option<&BodiesSummary> {
        self.summary.as_ref()
    }
}

impl Pass for Int8BodiesPass<'_> {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
        let (ranges, options) = (self.ranges, &self.options);
        run_once(&mut self.summary, Self::NAME, || {
            apply_int8_in_bodies(graph, ranges, options)
        })
    }
}

/// Rescales activation channels ahead of INT8 ([`apply_equalization`]), with each
/// site's channel ranges from calibration data.
#[derive(Debug)]
pub struct EqualizePass<'a> {
    sites: &'a [EqualizeSite],
    channel_ranges: &'a HashMap<ValueId, Vec<f32>>,
    options: EqualizeOptions,
    summary: Option<EqualizeSummary>,
}

impl<'a> EqualizePass<'a> {
    /// Name of the pass.
    pub const NAME: &'static str = "equalize";

    /// The pass for `sites`, with `channel_ranges` giving each site's per-channel
    /// largest magnitude.
    pub fn new(
        sites: &'a [EqualizeSite],
        channel_ranges: &'a HashMap<ValueId, Vec<f32>>,
        options: EqualizeOptions,
    ) -> EqualizePass<'a> {
        EqualizePass {
            sites,
            channel_ranges,
            options,
            summary: None,
        }
    }

    /// What the transform did, once the pass has run.
    pub fn summary(&self) -> Option<&EqualizeSummary> {
        self.summary.as_ref()
    }
}

impl Pass for EqualizePass<'_> {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
        let (sites, ranges, options) = (self.sites, self.channel_ranges, &self.options);
        run_once(&mut self.summary, Self::NAME, || {
            apply_equalization(graph, sites, ranges, options)
        })
    }
}

/// Stores MatMul/Gemm weights as blockwise INT4 ([`apply_int4`]).
#[derive(Debug)]
pub struct Int4WeightsPass<'a> {
    plan: &'a Int4Plan,
    options: Int4Options,
    tuning: &'a HashMap<NodeId, Int4Tuning>,
    summary: Option<Int4Summary>,
}

impl<'a> Int4WeightsPass<'a> {
    /// Name of the pass.
    pub const NAME: &'static str = "int4-weights";

    /// The pass for `plan`, with per-node AWQ `tuning` (nodes without one are
    /// quantized round-to-nearest).
    pub fn new(
        plan: &'a Int4Plan,
        options: Int4Options,
        tuning: &'a HashMap<NodeId, Int4Tuning>,
    ) -> Int4WeightsPass<'a> {
        Int4WeightsPass {
            plan,
            options,
            tuning,
            summary: None,
        }
    }

    /// What the transform did, once the pass has run.
    pub fn summary(&self) -> Option<&Int4Summary> {
        self.summary.as_ref()
    }
}

impl Pass for Int4WeightsPass<'_> {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
        let (plan, options, tuning) = (self.plan, &self.options, self.tuning);
        run_once(&mut self.summary, Self::NAME, || {
            apply_int4(graph, plan, options, tuning)
        })
    }
}

/// Converts the graph to FP16 ([`convert_fp16`]).
#[derive(Debug)]
pub struct Fp16Pass {
    options: Fp16Options,
    summary: Option<Fp16Summary>,
}

impl Fp16Pass {
    /// Name of the pass.
    pub const NAME: &'static str = "fp16";

    /// The pass with the transform's options.
    pub fn new(options: Fp16Options) -> Fp16Pass {
        Fp16Pass {
            options,
            summary: None,
        }
    }

    /// What the transform did, once the pass has run.
    pub fn summary(&self) -> Option<&Fp16Summary> {
        self.summary.as_ref()
    }
}

impl Pass for Fp16Pass {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
        let options = &self.options;
        run_once(&mut self.summary, Self::NAME, || {
            convert_fp16(graph, options)
        })
    }
}

/// Applies a one-shot transform unless it already ran (its summary is kept): the
/// pass changes the graph once, then reports no change.
fn run_once<S>(
    summary: &mut Option<S>,
    pass: &'static str,
    transform: impl FnOnce() -> Result<S, super::QuantError>,
) -> Result<bool, PassError> {
    if summary.is_some() {
        return Ok(false);
    }
    *summary = Some(transform().map_err(|source| PassError::Precision { pass, source })?);
    Ok(true)
}

/// Names of the precision passes, for validating `--stop-after`.
pub const PRECISION_PASS_NAMES: &[&str] = &[
    EqualizePass::NAME,
    Int8QdqPass::NAME,
    Int8QdqPass::FP8_NAME,
    Int8BodiesPass::NAME,
    Int4WeightsPass::NAME,
    Fp16Pass::NAME,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PassManager;
    use rtq_ir::{DType, Dim, Tensor};
    use std::collections::BTreeMap;

    /// x -> Conv(w) -> y
    fn conv_graph() -> (Graph, ValueId) {
        let mut g = Graph::new("g", 13);
        let shape = vec![Dim::Known(1), Dim::Known(1), Dim::Known(2), Dim::Known(2)];
        let x = g.add_input("x", DType::F32, shape.clone());
        let w = g.add_constant("w", Tensor::from_f32(vec![1, 1, 1, 1], vec![0.5]));
        let y = g.add_value("y", Some(DType::F32), Some(shape));
        g.add_node(
            "conv",
            "Conv",
            vec![Some(x), Some(w)],
            vec![y],
            BTreeMap::new(),
        );
        g.outputs.push(y);
        (g, x)
    }

    #[test]
    fn int8_pass_runs_once_under_the_manager_and_keeps_its_summary() {
        let (mut g, x) = conv_graph();
        let plan = super::super::plan_int8(&g, &Default::default()).unwrap();
        let ranges = HashMap::from([(x, 2.0)]);
        let mut pass = Int8QdqPass::new(&plan, &ranges);
        let mut manager = PassManager::new();
        manager.add(Box::new(&mut pass)).verify_each(true);
        let stats = manager.run(&mut g).unwrap();
        // Changed once, then a fixed point.
        assert_eq!((stats.entries[0].runs, stats.entries[0].changes), (2, 1));
        drop(manager);
        let summary = pass.summary().unwrap();
        assert_eq!((summary.activation_qdq, summary.weight_qdq), (1, 1));
    }

    #[test]
    fn precision_errors_name_the_pass_and_tensor() {
        let (mut g, _) = conv_graph();
        let plan = super::super::plan_int8(&g, &Default::default()).unwrap();
        let ranges = HashMap::new();
        let err = Int8QdqPass::new(&plan, &ranges).run(&mut g).unwrap_err();
        assert_eq!(
            err.to_string(),
            "pass `int8-qdq`: tensor `x` is quantized but has no calibration range"
        );
        let mut fp16 = Fp16Pass::new(Fp16Options::default());
        let (mut g, _) = conv_graph();
        assert!(fp16.run(&mut g).unwrap() && !fp16.run(&mut g).unwrap());
        assert!(fp16.summary().unwrap().fp16_nodes > 0);
    }
}
