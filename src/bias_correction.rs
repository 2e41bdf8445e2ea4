//! Empirical bias correction (as AIMET and NNCF's BiasCorrection do it): quantization
//! shifts the mean of a weighted op's output channels (clipping is one-sided, rounding
//! of skewed weights is not zero-mean); the shift, measured on calibration samples, is
//! subtracted from the op's bias.
//!
//! Sequential: the quantized graph runs node by node over all samples at once, and
//! each corrected op's outputs are corrected before the nodes after it see them, so a
//! correction accounts for the corrections upstream (a one-shot correction from a
//! single run of the uncorrected graph over-corrects downstream). The FP32 means come
//! from one run of the reference graph.

use crate::calibrate::for_each_channel_run;
use anyhow::{bail, Context, Result};
use rtq_calib::{CalibrationSet, InputSpec};
use rtq_ir::{Graph, NodeId, Tensor, ValueId};
use rtq_passes::quant::{bias_site, BiasSite};
use std::collections::HashMap;

/// The per-channel shift of each corrected op: (node name, output mean of the
/// quantized graph minus that of FP32, per output channel).
#[derive(Debug, Clone, Default)]
pub struct BiasShifts {
    /// Per corrected node.
    pub shifts: Vec<(String, Vec<f32>)>,
    /// Samples the means were taken on.
    pub samples: usize,
}

/// A corrected op of the quantized graph and the value its FP32 twin computes.
struct Target {
    node: NodeId,
    site: BiasSite,
    /// Sum of the FP32 output per channel over the samples, and the count per channel.
    fp32_sum: Vec<f64>,
    count: f64,
}

/// Measures the shift of every weighted op of `quantized` that reads Q/DQ and has a
/// place for a bias, against `reference` (the FP32 graph it was built from: outputs
/// keep their names), on the samples of `files`.
pub fn measure_shifts(
    reference: &Graph,
    quantized: &Graph,
    set: &CalibrationSet,
    files: &[usize],
) -> Result<BiasShifts> {
    let mut targets: Vec<Target> = quantized
        .nodes()
        .filter_map(|(id, _)| {
            let site = bias_site(quantized, id)?;
            Some(Target {
                node: id,
                fp32_sum: vec![0.0; site.channels],
                site,
                count: 0.0,
            })
        })
        .collect();
    if targets.is_empty() {
        return Ok(BiasShifts::default());
    }
    let samples = load_samples(reference, set, files)?;
    fp32_means(reference, quantized, &samples, &mut targets)?;
    let shifts = sequential_shifts(quantized, &samples, &targets)?;
    Ok(BiasShifts {
        shifts,
        samples: samples.len(),
    })
}

/// Every sample of `files`, as feeds.
fn load_samples(
    graph: &Graph,
    set: &CalibrationSet,
    files: &[usize],
) -> Result<Vec<Vec<(String, Tensor)>>> {
    let specs = InputSpec::from_graph(graph)?;
    let mut samples = Vec::new();
    for &file in files {
        samples.extend(set.load(file, &specs)?);
    }
    if samples.is_empty() {
        bail!("no samples to measure the bias shifts on");
    }
    Ok(samples)
}

/// Adds each target's FP32 output, summed per channel, from runs of `reference`.
fn fp32_means(
    reference: &Graph,
    quantized: &Graph,
    samples: &[Vec<(String, Tensor)>],
    targets: &mut [Target],
) -> Result<()> {
    let by_value: HashMap<ValueId, usize> = targets
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let name = &quantized.value(t.site.output).name;
            Some((reference.value_by_name(name)?, i))
        })
        .collect();
    if by_value.len() != targets.len() {
        bail!("the quantized graph's weighted ops have no FP32 twin of the same name");
    }
    let plan = rtq_exec::Plan::new(reference).context("preparing the FP32 graph")?;
    for sample in samples {
        plan.run_observed(sample, &mut |v, t| {
            if let Some(&i) = by_value.get(&v) {
                let target = &mut targets[i];
                target.count += channel_sums(t, target.site.axis, &mut target.fp32_sum);
            }
        })
        .context("FP32 run for bias correction")?;
    }
    Ok(())
}

/// Adds `t`'s values per channel (along `axis`) into `sums`; returns how many values
/// each channel received.
fn channel_sums(t: &Tensor, axis: usize, sums: &mut [f64]) -> f64 {
    for_each_channel_run(t, axis, |c, run| {
        sums[c] += run.iter().map(|&x| f64::from(x)).sum::<f64>();
    });
    (t.len() / sums.len().max(1)) as f64
}

/// Runs `quantized` node by node over every sample, correcting each target's outputs
/// as it goes; returns the shifts.
fn sequential_shifts(
    quantized: &Graph,
    samples: &[Vec<(String, Tensor)>],
    targets: &[Target],
) -> Result<Vec<(String, Vec<f32>)>> {
    let order = quantized.topo_order()?;
    let target_of: HashMap<NodeId, &Target> = targets.iter().map(|t| (t.node, t)).collect();
    let mut remaining: HashMap<ValueId, usize> = HashMap::new();
    for &id in &order {
        for v in quantized.node(id).inputs.iter().flatten() {
            *remaining.entry(*v).or_default() += 1;
        }
    }
    let mut values: HashMap<ValueId, Vec<Tensor>> = HashMap::new();
    for &input in &quantized.inputs {
        let name = &quantized.value(input).name;
        let per_sample = samples
            .iter()
            .map(|s| {
                s.iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, t)| t.clone())
                    .with_context(|| format!("no sample value for input `{name}`"))
            })
            .collect::<Result<Vec<Tensor>>>()?;
        values.insert(input, per_sample);
    }
    // Values computed from constants alone (the weights' DequantizeLinear), once.
    let mut shared: HashMap<ValueId, Tensor> = HashMap::new();
    let mut shifts = Vec::new();
    for &id in &order {
        let node = quantized.node(id);
        let constant_only = node
            .inputs
            .iter()
            .flatten()
            .all(|v| quantized.constant(*v).is_some() || shared.contains_key(v));
        let lookup = |v: ValueId, s: usize| {
            quantized
                .constant(v)
                .map(|c| c.as_ref())
                .or_else(|| shared.get(&v))
                .or_else(|| values.get(&v).map(|all| &all[s]))
        };
        if constant_only {
            let inputs: Vec<Option<&Tensor>> = node
                .inputs
                .iter()
                .map(|v| v.and_then(|v| lookup(v, 0)))
                .collect();
            let out = rtq_exec::eval_node(node, &inputs)
                .with_context(|| format!("node `{}` for bias correction", node.name))?;
            shared.extend(node.outputs.iter().copied().zip(out));
            continue;
        }
        let mut outputs: Vec<Vec<Tensor>> =
            vec![Vec::with_capacity(samples.len()); node.outputs.len()];
        for s in 0..samples.len() {
            let inputs: Vec<Option<&Tensor>> = node
                .inputs
                .iter()
                .map(|v| v.and_then(|v| lookup(v, s)))
                .collect();
            let out = rtq_exec::eval_node(node, &inputs)
                .with_context(|| format!("node `{}` for bias correction", node.name))?;
            for (slot, t) in out.into_iter().enumerate() {
                outputs[slot].push(t);
            }
        }
        if let Some(target) = target_of.get(&id) {
            let shift = correct(target, &mut outputs[0]);
            shifts.push((node.name.clone(), shift));
        }
        for v in node.inputs.iter().flatten() {
            if let Some(n) = remaining.get_mut(v) {
                *n -= 1;
                if *n == 0 {
                    values.remove(v);
                }
            }
        }
        for (&v, out) in node.outputs.iter().zip(outputs) {
            if remaining.get(&v).is_some_and(|&n| n > 0) {
                values.insert(v, out);
            }
        }
    }
    Ok(shifts)
}

/// The shift of `target`'s outputs from the FP32 means, subtracted from them in place.
fn correct(target: &Target, outputs: &mut [Tensor]) -> Vec<f32> {
    let channels = target.site.channels;
    let mut sums = vec![0.0f64; channels];
    let mut count = 0.0;
    for t in outputs.iter() {
        count += channel_sums(t, target.site.axis, &mut sums);
    }
    let shift: Vec<f32> = sums
        .iter()
        .zip(&target.fp32_sum)
        .map(|(q, f)| (q / count.max(1.0) - f / target.count.max(1.0)) as f32)
        .collect();
    for t in outputs.iter_mut() {
        let inner: usize = t.shape()[target.site.axis + 1..].iter().product();
        if let Ok(values) = t.as_f32_mut() {
            for (i, run) in values.chunks_mut(inner.max(1)).enumerate() {
                let s = shift[i % channels];
                run.iter_mut().for_each(|x| *x -= s);
            }
        }
    }
    shift
}
