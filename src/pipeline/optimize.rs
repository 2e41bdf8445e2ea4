//! The first two stages: loading the ONNX model into the IR, and the optimisation passes.

use super::output::count_weight_bytes;
use super::passes::{run_passes, Iterations};
use super::{Build, Flow, Stage};
use anyhow::{Context, Result};
use rtq_ir::Graph;

/// The model as decoded.
pub struct Loaded {
    /// The graph.
    pub graph: Graph,
}

/// The optimised FP32 model: the reference every precision transform is judged against.
pub struct Optimized {
    /// The graph.
    pub graph: Graph,
    /// Bytes of its float weights.
    pub weight_bytes_fp32: usize,
}

impl Build<'_> {
    /// Decodes the model.
    pub fn load(&mut self) -> Result<Flow<Loaded>> {
        let model = &self.opts.model;
        let graph = rtq_frontend::load_model(model)
            .with_context(|| format!("loading {}", model.display()))?;
        self.report.source_opset = graph.opset;
        self.report.output_opset = graph.opset.max(13);
        self.report.graph.nodes_in = graph.node_count();
        if self.opts.calib_cache.is_some() {
            self.source_names = graph.values().map(|(_, v)| v.name.clone()).collect();
        }
        self.lap("load");
        if self.opts.stops_after(Stage::Load) {
            return self
                .stop(&graph, "_load", Vec::new())
                .map(|out| Flow::Stop(Box::new(out)));
        }
        Ok(Flow::Next(Loaded { graph }))
    }

    /// Runs the optimisation passes to a fixed point.
    pub fn optimize(&mut self, loaded: Loaded) -> Result<Flow<Optimized>> {
        let mut graph = loaded.graph;
        let passes = rtq_passes::optimization_passes(&self.opts.optimize);
        let stats = run_passes(&mut graph, passes, Iterations::FixedPoint, self.opts)
            .context("optimising")?;
        self.report.passes = serde_json::to_value(&stats)?;
        self.lap("optimize");
        if self.opts.stops_after(Stage::Optimize) || stats.stopped_after.is_some() {
            self.report.graph.nodes_out = graph.node_count();
            return self
                .stop(&graph, "_optimized", Vec::new())
                .map(|out| Flow::Stop(Box::new(out)));
        }
        Ok(Flow::Next(Optimized {
            weight_bytes_fp32: count_weight_bytes(&graph, true),
            graph,
        }))
    }
}
