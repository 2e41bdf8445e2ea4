//! The concrete shapes a calibration sample gives the graph's values: INT8 placement
//! reads symbolic dims from them (a MatMul whose rows are a batch of one is a GEMV), as
//! ModelOpt reads them from its calibration inference. A symbolic first (batch) axis
//! counts as 1 whatever the file holds, so the decision does not depend on how the
//! samples are packed into files; the other dims (sequence lengths, image sizes) are
//! the sample's.

use super::Build;
use rtq_calib::{CalibrationSet, InputSpec};
use rtq_ir::{known_shape, Dim, Graph};
use std::collections::HashMap;
use std::sync::Arc;

impl Build<'_> {
    /// Records the shapes of `graph`'s values when fed calibration file `file` (once per
    /// build; nothing when the file cannot be read or the shapes not inferred: the
    /// calibration itself reports such files).
    pub(super) fn note_sample_shapes(&self, graph: &Graph, set: &CalibrationSet, file: usize) {
        if self.sample_shapes.get().is_some() {
            return;
        }
        let shapes = sample_shapes(graph, set, file).unwrap_or_default();
        let _ = self.sample_shapes.set(Arc::new(shapes));
    }
}

/// Every value's shape, by name, when `graph` is fed the first sample of `file`.
fn sample_shapes(
    graph: &Graph,
    set: &CalibrationSet,
    file: usize,
) -> Option<HashMap<String, Vec<usize>>> {
    let specs = InputSpec::from_graph(graph).ok()?;
    let sample = set.load(file, &specs).ok()?.into_iter().next()?;
    let mut g = graph.clone();
    // Computed values forget their (symbolic) shapes, so the sample's dims flow in.
    let computed: Vec<_> = g
        .values()
        .filter(|(_, v)| v.producer.is_some())
        .map(|(id, _)| id)
        .collect();
    for id in computed {
        g.value_mut(id).shape = None;
    }
    for (name, tensor) in &sample {
        let id = g.value_by_name(name)?;
        let declared = g.value(id).shape.clone().unwrap_or_default();
        let shape = tensor
            .shape()
            .iter()
            .enumerate()
            .map(|(axis, &d)| match declared.get(axis) {
                Some(Dim::Sym(_)) if axis == 0 => Dim::Known(1),
                _ => Dim::Known(d),
            })
            .collect();
        g.value_mut(id).shape = Some(shape);
    }
    rtq_passes::infer_shapes(&mut g).ok()?;
    Some(
        g.values()
            .filter_map(|(_, v)| Some((v.name.clone(), known_shape(v.shape.as_deref()?)?)))
            .collect(),
    )
}
