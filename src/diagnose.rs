//! Per-layer diagnosis: a quantized graph and its FP32 reference run side by side on
//! sample files, and every tensor both compute is compared — cumulatively (the
//! quantized graph's value, with every Q/DQ upstream of it) and, for tensors the
//! quantized graph quantizes, locally (the FP32 value through its own Q/DQ only). The
//! first tensor whose cumulative cosine drops below a threshold names the first
//! diverging layer; local SQNR ranks the tensors whose quantization hurts most, like
//! Polygraphy's layer-wise comparison and onnxruntime's `qdq_loss_debug`.

use anyhow::{Context, Result};
use rtq_calib::{CalibrationSet, InputSpec};
use rtq_emit::{LayerError, PerLayerReport};
use rtq_ir::{DType, Graph, QuantGrid, ValueId};
use std::collections::HashMap;
use std::sync::Arc;

/// Cumulative cosine below which a tensor counts as diverged.
pub const DIVERGED_COSINE: f64 = 0.99;

/// Signal and error sums of one tensor over the samples.
#[derive(Debug, Default, Clone)]
struct Sums {
    dot: f64,
    reference: f64,
    candidate: f64,
    error: f64,
    local_error: f64,
    samples: usize,
}

impl Sums {
    fn cosine(&self) -> f64 {
        match (self.reference > 0.0, self.candidate > 0.0) {
            (false, false) => 1.0,
            (true, true) => self.dot / (self.reference.sqrt() * self.candidate.sqrt()),
            _ => 0.0,
        }
    }
}

/// Signal-to-noise ratio in dB (infinite for no noise).
fn sqnr_db(signal: f64, noise: f64) -> f64 {
    if noise <= 0.0 {
        f64::INFINITY
    } else {
        10.0 * (signal / noise).log10()
    }
}

/// The INT8 scale of every tensor the candidate quantizes directly (`QuantizeLinear`
/// on the tensor with a constant scalar scale), by tensor name.
/// Each quantized tensor's scale and grid (INT8 or FP8, from the QuantizeLinear's
/// output type).
fn quantized_tensors(candidate: &Graph) -> HashMap<String, (f32, QuantGrid)> {
    candidate
        .nodes()
        .filter(|(_, n)| n.op_type == "QuantizeLinear")
        .filter_map(|(_, n)| {
            let x = n.input(0)?;
            let scale = candidate.constant(n.input(1)?)?;
            let scale = (scale.len() == 1).then(|| scale.to_f32_vec()[0])?;
            // The zero point's type says the grid (a loaded model's value types may be
            // unknown); INT8 where neither says.
            let dtype = n
                .input(2)
                .and_then(|z| candidate.constant(z))
                .map(|z| z.dtype())
                .or(candidate.value(n.outputs[0]).dtype);
            let grid = dtype.and_then(QuantGrid::of_dtype).unwrap_or_default();
            Some((candidate.value(x).name.clone(), (scale, grid)))
        })
        .collect()
}

/// Float values a run computes, by name.
fn float_values(
    plan: &rtq_exec::Plan,
    graph: &Graph,
    sample: &[(String, rtq_ir::Tensor)],
    what: &str,
) -> Result<HashMap<String, Arc<rtq_ir::Tensor>>> {
    let mut values = HashMap::new();
    let mut keep = |v: ValueId, t: &Arc<rtq_ir::Tensor>| {
        if t.dtype().is_float() {
            values.insert(graph.value(v).name.clone(), Arc::clone(t));
        }
    };
    plan.run_observed(sample, &mut keep)
        .with_context(|| format!("running the {what} graph"))?;
    Ok(values)
}

/// Compares every tensor `reference` and `candidate` both compute on `files` of `set`.
pub fn per_layer(
    reference: &Graph,
    candidate: &Graph,
    set: &CalibrationSet,
    files: &[usize],
) -> Result<PerLayerReport> {
    let ref_plan = rtq_exec::Plan::new(reference).context("preparing the FP32 graph")?;
    let cand_plan = rtq_exec::Plan::new(candidate).context("preparing the quantized graph")?;
    let specs = InputSpec::from_graph(reference)?;
    let scales = quantized_tensors(candidate);
    let mut sums: HashMap<String, Sums> = HashMap::new();
    for &file in files {
        for sample in set.load(file, &specs)? {
            let r = float_values(&ref_plan, reference, &sample, "FP32")?;
            let c = float_values(&cand_plan, candidate, &sample, "quantized")?;
            for (name, rt) in &r {
                let Some(ct) = c.get(name).filter(|ct| ct.len() == rt.len()) else {
                    continue;
                };
                let (rv, cv) = (rt.to_f32_vec(), ct.to_f32_vec());
                let s = sums.entry(name.clone()).or_default();
                let scale = scales.get(name).copied();
                for (&a, &b) in rv.iter().zip(&cv) {
                    let (a64, b64) = (a as f64, b as f64);
                    s.dot += a64 * b64;
                    s.reference += a64 * a64;
                    s.candidate += b64 * b64;
                    s.error += (a64 - b64) * (a64 - b64);
                    if let Some((scale, grid)) = scale {
                        let d = a64 - grid.fake_quantize(a, scale) as f64;
                        s.local_error += d * d;
                    }
                }
                s.samples += 1;
            }
        }
    }
    Ok(report(candidate, &scales, &sums))
}

/// The tensors in the candidate's topological order, with the first diverging one.
fn report(
    candidate: &Graph,
    scales: &HashMap<String, (f32, QuantGrid)>,
    sums: &HashMap<String, Sums>,
) -> PerLayerReport {
    let rank: HashMap<rtq_ir::NodeId, usize> = candidate
        .topo_order()
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, id)| (id, i))
        .collect();
    let producer_id = |name: &str| {
        let v = candidate.value_by_name(name)?;
        Some(candidate.value(v).producer?.0)
    };
    let producer = |name: &str| producer_id(name).map(|id| candidate.node(id));
    let mut names: Vec<&String> = sums.keys().collect();
    // Graph inputs first, then by producing node's position in the graph order.
    let position = |name: &str| producer_id(name).and_then(|id| rank.get(&id).copied());
    names.sort_by_key(|n| (position(n).map_or(0, |p| p + 1), (*n).clone()));
    let layers: Vec<LayerError> = names
        .into_iter()
        .filter(|n| {
            candidate
                .value_by_name(n)
                .is_some_and(|v| candidate.value(v).dtype != Some(DType::I8))
        })
        .map(|name| {
            let s = &sums[name];
            let node = producer(name);
            LayerError {
                tensor: name.clone(),
                node: node.map_or("input".into(), |n| n.name.clone()),
                op: node.map_or("input".into(), |n| n.op_type.clone()),
                cosine: s.cosine(),
                sqnr_db: sqnr_db(s.reference, s.error),
                local_sqnr_db: scales
                    .contains_key(name)
                    .then(|| sqnr_db(s.reference, s.local_error)),
                samples: s.samples,
            }
        })
        .collect();
    let first_diverging = layers
        .iter()
        .find(|l| l.cosine < DIVERGED_COSINE)
        .map(|l| l.tensor.clone());
    let mut most_sensitive: Vec<&LayerError> = layers
        .iter()
        .filter(|l| l.local_sqnr_db.is_some())
        .collect();
    most_sensitive.sort_by(|a, b| {
        a.local_sqnr_db
            .partial_cmp(&b.local_sqnr_db)
            .expect("no NaN")
    });
    PerLayerReport {
        diverged_cosine: DIVERGED_COSINE,
        first_diverging,
        most_sensitive: most_sensitive
            .iter()
            .take(10)
            .map(|l| l.tensor.clone())
            .collect(),
        layers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_quantization_rounds_half_to_even_and_saturates() {
        let int8 = QuantGrid::Int8;
        assert_eq!(int8.fake_quantize(0.25, 0.5), 0.0);
        assert_eq!(int8.fake_quantize(0.75, 0.5), 1.0);
        assert_eq!(int8.fake_quantize(1000.0, 1.0), 127.0);
        assert_eq!(int8.fake_quantize(-1000.0, 1.0), -128.0);
        assert_eq!(sqnr_db(100.0, 1.0), 20.0);
        assert_eq!(sqnr_db(1.0, 0.0), f64::INFINITY);
    }
}
