//! Per-tensor range choice: each quantized activation's range picked among the
//! calibrators' candidates (entropy, max, percentile, MSE, from the same histograms)
//! by the error it causes where it is used — in the outputs of the nodes that read it
//! through Q/DQ — rather than by a property of its own distribution (KL, MSE of the
//! tensor itself). A Conv weights the rounding and clipping of every input channel by
//! its filters; a range that looks best for the tensor need not be best for the Conv.
//!
//! For every quantized node and every quantized activation input, the node runs on
//! FP32 inputs with that one input fake-quantized at each candidate range; the error
//! is the squared difference to its FP32 output relative to that output's energy,
//! summed over the calibration samples and over the tensor's consumers. Each tensor
//! takes its candidate of least error (ties: the first candidate in `order`).

use anyhow::{Context, Result};
use rtq_calib::{CalibMethod, CalibrationSet, InputSpec};
use rtq_ir::{Graph, NodeId, QuantGrid, QuantParams, ScaleFormat, Tensor, ValueId};
use rtq_passes::quant::Int8Plan;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The ranges chosen per tensor, and how many tensors took each method's range.
#[derive(Debug, Clone, Default)]
pub struct PerTensorChoice {
    /// The chosen range of every quantized activation.
    pub ranges: HashMap<ValueId, f32>,
    /// How many quantized activations took each method's candidate.
    pub picks: BTreeMap<CalibMethod, usize>,
    /// Samples the errors were measured on.
    pub samples: usize,
}

/// Squared-error sums of one quantized input of one consumer node, per candidate.
struct EdgeError {
    /// The quantized activation.
    value: ValueId,
    /// Input slot of the consumer.
    slot: usize,
    /// Per candidate (in `order`): sum of squared output differences.
    error: Vec<f64>,
}

/// What is measured at one consumer node.
struct Consumer {
    node: NodeId,
    edges: Vec<EdgeError>,
    /// Sum of squares of the FP32 output.
    energy: f64,
}

/// Picks every activation of `plan` its range among `candidates` (one map per method,
/// tried in `order`) by the relative output error of its consumers on the samples of
/// `files`. Activations with one candidate value keep it without measuring.
pub fn choose_per_tensor(
    reference: &Graph,
    plan: &Int8Plan,
    candidates: &BTreeMap<CalibMethod, HashMap<ValueId, f32>>,
    order: &[CalibMethod],
    set: &CalibrationSet,
    files: &[usize],
    format: ScaleFormat,
) -> Result<PerTensorChoice> {
    let mut consumers = consumers_of(reference, plan, order.len());
    let slot_of: HashMap<NodeId, usize> = consumers
        .iter()
        .enumerate()
        .map(|(i, c)| (c.node, i))
        .collect();
    // Which node's first output ends each consumer, and how often each value is read.
    let mut finishing: HashMap<ValueId, usize> = HashMap::new();
    let mut uses: HashMap<ValueId, usize> = HashMap::new();
    for c in &consumers {
        let node = reference.node(c.node);
        finishing.insert(node.outputs[0], slot_of[&c.node]);
        for v in node.inputs.iter().flatten() {
            if reference.value(*v).constant.is_none() {
                *uses.entry(*v).or_default() += 1;
            }
        }
    }
    let amax_of = |v: ValueId| -> Vec<f32> { order.iter().map(|m| candidates[m][&v]).collect() };
    let plan_fp32 = rtq_exec::Plan::new(reference).context("preparing the FP32 graph")?;
    let specs = InputSpec::from_graph(reference)?;
    let mut samples = 0;
    for &file in files {
        for sample in set.load(file, &specs)? {
            let mut held: HashMap<ValueId, Arc<Tensor>> = HashMap::new();
            let mut remaining = uses.clone();
            let mut failure: Option<anyhow::Error> = None;
            plan_fp32
                .run_observed(&sample, &mut |v, t| {
                    if failure.is_some() {
                        return;
                    }
                    if uses.contains_key(&v) {
                        held.insert(v, Arc::clone(t));
                    }
                    let Some(&i) = finishing.get(&v) else {
                        return;
                    };
                    let c = &mut consumers[i];
                    if let Err(e) = measure(reference, c, t, &held, &amax_of, (plan.grid, format)) {
                        failure = Some(e);
                        return;
                    }
                    for input in reference.node(c.node).inputs.iter().flatten() {
                        if let Some(n) = remaining.get_mut(input) {
                            *n -= 1;
                            if *n == 0 {
                                held.remove(input);
                            }
                        }
                    }
                })
                .with_context(|| format!("FP32 run on {}", set.files()[file].display()))?;
            if let Some(e) = failure {
                return Err(e.context(format!(
                    "measuring ranges on {}",
                    set.files()[file].display()
                )));
            }
            samples += 1;
        }
    }
    Ok(pick(&consumers, candidates, order, plan, samples))
}

/// One entry per quantized node, with its quantized activation inputs.
fn consumers_of(reference: &Graph, plan: &Int8Plan, candidates: usize) -> Vec<Consumer> {
    let mut by_node: BTreeMap<NodeId, Vec<EdgeError>> = BTreeMap::new();
    for &(node, slot) in &plan.edges {
        let Some(value) = reference.node(node).inputs.get(slot).copied().flatten() else {
            continue;
        };
        by_node.entry(node).or_default().push(EdgeError {
            value,
            slot,
            error: vec![0.0; candidates],
        });
    }
    by_node
        .into_iter()
        .map(|(node, edges)| Consumer {
            node,
            edges,
            energy: 0.0,
        })
        .collect()
}

/// Adds one sample's errors at consumer `c`, whose FP32 output is `output`.
fn measure(
    reference: &Graph,
    c: &mut Consumer,
    output: &Tensor,
    held: &HashMap<ValueId, Arc<Tensor>>,
    amax_of: &dyn Fn(ValueId) -> Vec<f32>,
    (grid, format): (QuantGrid, ScaleFormat),
) -> Result<()> {
    let node = reference.node(c.node);
    let exact = output.to_f32_vec();
    c.energy += exact.iter().map(|&y| (y as f64) * (y as f64)).sum::<f64>();
    let inputs: Vec<Option<Arc<Tensor>>> = node
        .inputs
        .iter()
        .map(|v| {
            v.and_then(|v| {
                reference
                    .value(v)
                    .constant
                    .clone()
                    .or_else(|| held.get(&v).cloned())
            })
        })
        .collect();
    for edge in &mut c.edges {
        let Some(original) = inputs[edge.slot].as_ref() else {
            continue;
        };
        let values = original.to_f32_vec();
        let amaxes = amax_of(edge.value);
        for (k, &amax) in amaxes.iter().enumerate() {
            if let Some(same) = amaxes[..k].iter().position(|&a| a == amax) {
                edge.error[k] = edge.error[same];
                continue;
            }
            let scale = QuantParams::new(grid, amax).stored_scale(format);
            let quantized = Tensor::from_f32(
                original.shape().to_vec(),
                values
                    .iter()
                    .map(|&x| grid.fake_quantize(x, scale))
                    .collect(),
            );
            let mut refs: Vec<Option<&Tensor>> = inputs.iter().map(|t| t.as_deref()).collect();
            refs[edge.slot] = Some(&quantized);
            let out = rtq_exec::eval_node(node, &refs)
                .with_context(|| format!("node `{}` with Q/DQ on its input", node.name))?;
            let got = out[0].to_f32_vec();
            edge.error[k] += exact
                .iter()
                .zip(&got)
                .map(|(&a, &b)| ((a - b) as f64).powi(2))
                .sum::<f64>();
        }
    }
    Ok(())
}

/// Every activation's candidate of least relative consumer error.
fn pick(
    consumers: &[Consumer],
    candidates: &BTreeMap<CalibMethod, HashMap<ValueId, f32>>,
    order: &[CalibMethod],
    plan: &Int8Plan,
    samples: usize,
) -> PerTensorChoice {
    let mut score: HashMap<ValueId, Vec<f64>> = HashMap::new();
    for c in consumers {
        let energy = c.energy.max(f64::MIN_POSITIVE);
        for e in &c.edges {
            let s = score
                .entry(e.value)
                .or_insert_with(|| vec![0.0; order.len()]);
            for (total, err) in s.iter_mut().zip(&e.error) {
                *total += err / energy;
            }
        }
    }
    let mut choice = PerTensorChoice {
        samples,
        ..Default::default()
    };
    for &v in &plan.activations {
        let best = score.get(&v).map_or(0, |s| {
            (0..s.len()).fold(0, |best, k| if s[k] < s[best] { k } else { best })
        });
        let method = order[best];
        choice.ranges.insert(v, candidates[&method][&v]);
        *choice.picks.entry(method).or_default() += 1;
    }
    // Tensors the plan does not quantize keep the first method's range (the cache
    // lists every observed tensor).
    for (&v, &amax) in &candidates[&order[0]] {
        choice.ranges.entry(v).or_insert(amax);
    }
    choice
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_calib::DataOptions;
    use rtq_ir::{DType, Dim};
    use rtq_test_support::{write_npy_f32, Rng};

    const C: usize = 2;
    const P: usize = 64;

    /// x[1, 2, 8, 8] -> Conv(w, 1x1, no bias) -> y.
    fn conv_graph(w: &[f32]) -> (Graph, ValueId) {
        let mut g = Graph::new("g", 13);
        let dims = vec![Dim::Known(1), Dim::Known(C), Dim::Known(8), Dim::Known(8)];
        let x = g.add_input("x", DType::F32, dims.clone());
        let w = g.add_constant("w", Tensor::from_f32(vec![2, C, 1, 1], w.to_vec()));
        let y = g.add_value("y", Some(DType::F32), Some(dims));
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

    /// The relative output error of the 1x1 conv `w` when `x` is fake-quantized at
    /// `amax`, written out directly: sum over samples of |y_q - y|^2 over sum of |y|^2.
    fn reference_error(w: &[f32], samples: &[Vec<f32>], amax: f32) -> f64 {
        let scale = amax / 127.0;
        let (mut err, mut energy) = (0.0f64, 0.0f64);
        for x in samples {
            for o in 0..2 {
                for p in 0..P {
                    let (mut y, mut yq) = (0.0f32, 0.0f32);
                    for c in 0..C {
                        let v = x[c * P + p];
                        y += w[o * C + c] * v;
                        yq += w[o * C + c]
                            * (v / scale).round_ties_even().clamp(-128.0, 127.0)
                            * scale;
                    }
                    err += ((yq - y) as f64).powi(2);
                    energy += (y as f64).powi(2);
                }
            }
        }
        err / energy
    }

    #[test]
    fn each_tensor_takes_the_candidate_of_least_consumer_error() {
        // Channel 0 small and dense, channel 1 mostly small with rare large values:
        // a range that clips channel 1 is cheap for the tensor's own error but not
        // for a Conv that weights channel 1 heavily.
        let mut rng = Rng::new(11);
        let samples: Vec<Vec<f32>> = (0..3)
            .map(|_| {
                (0..C * P)
                    .map(|i| {
                        let v = rng.normal() as f32 * 0.3;
                        if i >= P && rng.below(16) == 0 {
                            v * 12.0
                        } else {
                            v
                        }
                    })
                    .collect()
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        for (i, x) in samples.iter().enumerate() {
            write_npy_f32(&dir.path().join(format!("s{i}.npy")), &[1, C, 8, 8], x);
        }
        let set = CalibrationSet::open(dir.path(), &DataOptions::default()).unwrap();
        let absmax = samples.iter().flatten().fold(0f32, |m, v| m.max(v.abs()));
        let amaxes = [absmax * 0.1, absmax, absmax * 0.4, absmax * 0.7];
        let mut bests = Vec::new();
        for w in [
            [1.0f32, 0.0, 0.0, 1.0],
            [0.2, 3.0, -0.1, 2.5],
            [4.0, 0.01, 3.0, -0.02],
        ] {
            let (graph, x) = conv_graph(&w);
            let plan = rtq_passes::quant::plan_int8(&graph, &Default::default()).unwrap();
            let order = CalibMethod::ALL;
            let candidates: BTreeMap<CalibMethod, HashMap<ValueId, f32>> = order
                .iter()
                .zip(amaxes)
                .map(|(&m, a)| (m, HashMap::from([(x, a)])))
                .collect();
            let choice = choose_per_tensor(
                &graph,
                &plan,
                &candidates,
                &order,
                &set,
                &[0, 1, 2],
                ScaleFormat::F32,
            )
            .unwrap();
            let errors: Vec<f64> = amaxes
                .iter()
                .map(|&a| reference_error(&w, &samples, a))
                .collect();
            let best = (0..4).fold(0, |b, k| if errors[k] < errors[b] { k } else { b });
            assert_eq!(
                choice.ranges[&x], amaxes[best],
                "w {w:?}: errors {errors:?}"
            );
            assert_eq!(choice.picks[&order[best]], 1);
            assert_eq!(choice.samples, 3);
            bests.push(best);
        }
        // The weights decide: the same tensor takes other ranges under other filters.
        bests.dedup();
        assert!(bests.len() > 1, "{bests:?}");
    }
}
