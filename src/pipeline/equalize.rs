//! The equalization stage (INT8 builds with `--equalize`, and `--calib-method auto`):
//! activation channels that per-tensor quantization would crush are rescaled, with the
//! scales moved into their producers and readers (see
//! [`rtq_passes::quant::apply_equalization`]). The graph stays the FP32 function it was,
//! and is the reference the rest of the build is judged against. Channel ranges come
//! from one forward pass over the calibration files (not the held-out ones).

use super::passes::{run_passes, Iterations};
use super::{Build, Flow, Optimized};
use crate::calibrate::channel_ranges;
use anyhow::{Context, Result};
use rtq_passes::quant::{plan_equalization, plan_int8, EqualizeOptions, EqualizePass};
use rtq_passes::Pass;

impl Build<'_> {
    /// Rescales the channels of the activations INT8 will quantize, where their
    /// producers and readers can absorb it; nothing otherwise.
    pub fn equalize(&mut self, optimized: Optimized) -> Result<Flow<Optimized>> {
        if !self.opts.equalizes() {
            return Ok(Flow::Next(optimized));
        }
        let Optimized {
            mut graph,
            weight_bytes_fp32,
        } = optimized;
        let dir = self
            .opts
            .calib_dir
            .as_ref()
            .expect("checked: equalization has data");
        let (set, calib_files, _) = self.open_data(dir)?;
        if let Some(&first) = calib_files.first() {
            self.note_sample_shapes(&graph, &set, first);
        }
        let plan = plan_int8(&graph, &self.int8_options()).context("planning INT8 quantization")?;
        let sites = plan_equalization(&graph, &plan.activations);
        let targets: Vec<_> = sites
            .iter()
            .map(|s| (s.tensor, s.axis, s.channels))
            .collect();
        let ranges = channel_ranges(&graph, &set, &calib_files, &targets, &self.opts.progress)
            .context("observing channel ranges for equalization")?;
        let mut pass = EqualizePass::new(&sites, &ranges, EqualizeOptions::default());
        let passes: Vec<Box<dyn Pass + '_>> = vec![Box::new(&mut pass)];
        let stats = run_passes(&mut graph, passes, Iterations::Once, self.opts)
            .context("equalizing activation channels")?;
        let summary = pass.summary().cloned().unwrap_or_default();
        self.report.passes["equalize"] = serde_json::to_value(&summary)?;
        self.lap("equalize");
        if stats.stopped_after.is_some() {
            self.report.graph.nodes_out = graph.node_count();
            return self
                .stop(&graph, "_equalized", Vec::new())
                .map(|out| Flow::Stop(Box::new(out)));
        }
        Ok(Flow::Next(Optimized {
            graph,
            weight_bytes_fp32,
        }))
    }
}
