//! Agreement metrics between a reduced-precision model's outputs and FP32's, and the
//! check that measures them on held-out samples.

use anyhow::{Context, Result};
use rtq_calib::CalibrationSet;
use rtq_emit::{AccuracyReport, OutputAccuracy};
use rtq_ir::Graph;

/// Runs `reference` and `candidate` on the held-out files and compares their outputs.
pub fn evaluate(
    reference: &Graph,
    candidate: &Graph,
    set: &CalibrationSet,
    files: &[usize],
    variant: &str,
) -> Result<AccuracyReport> {
    let outputs = ReferenceOutputs::compute(reference, set, files)?;
    outputs.compare(candidate, set, variant)
}

/// At most this many (FP32, candidate) pairs in an [`AccuracyReport`]'s scatter.
const SCATTER_POINTS: usize = 1500;

/// Up to [`SCATTER_POINTS`] pairs of `reference` and `candidate` values, taken evenly.
fn scatter_points(reference: &[f32], candidate: &[f32]) -> Vec<(f32, f32)> {
    let step = reference.len().div_ceil(SCATTER_POINTS).max(1);
    reference
        .iter()
        .zip(candidate)
        .step_by(step)
        .map(|(&a, &b)| (a, b))
        .collect()
}

/// The reference graph's outputs on some files, computed once to judge many
/// candidates against (the method search and the fallback judge several builds on
/// the same calibration files).
pub struct ReferenceOutputs {
    files: Vec<usize>,
    names: Vec<String>,
    /// Per sample, in file order: the reference's outputs.
    outputs: Vec<Vec<rtq_ir::Tensor>>,
}

impl ReferenceOutputs {
    /// Runs `reference` on every sample of `files`.
    pub fn compute(reference: &Graph, set: &CalibrationSet, files: &[usize]) -> Result<Self> {
        let plan =
            rtq_exec::Plan::new(reference).context("preparing the FP32 graph for evaluation")?;
        let specs = rtq_calib::InputSpec::from_graph(reference)?;
        let mut outputs = Vec::new();
        for &file in files {
            for sample in set.load(file, &specs)? {
                outputs.push(
                    plan.run(&sample)
                        .with_context(|| format!("FP32 run on {}", set.files()[file].display()))?,
                );
            }
        }
        Ok(ReferenceOutputs {
            files: files.to_vec(),
            names: plan.output_names(),
            outputs,
        })
    }

    /// The files the outputs were computed on.
    pub fn files(&self) -> &[usize] {
        &self.files
    }

    /// Runs `candidate` on the same samples and compares its outputs with these.
    pub fn compare(
        &self,
        candidate: &Graph,
        set: &CalibrationSet,
        variant: &str,
    ) -> Result<AccuracyReport> {
        let cand_plan = rtq_exec::Plan::new(candidate)
            .with_context(|| format!("preparing the {variant} graph for evaluation"))?;
        let specs = rtq_calib::InputSpec::from_graph(candidate)?;
        let mut agreements: Vec<OutputAgreement> =
            self.names.iter().map(|n| OutputAgreement::new(n)).collect();
        let mut reference = self.outputs.iter();
        let mut samples = 0;
        let mut scatter = None;
        for &file in &self.files {
            for sample in set.load(file, &specs)? {
                let r = reference
                    .next()
                    .context("the reference saw fewer samples")?;
                let c = cand_plan
                    .run(&sample)
                    .with_context(|| format!("{variant} run on {}", set.files()[file].display()))?;
                for (i, ((agg, rt), ct)) in agreements.iter_mut().zip(r).zip(&c).enumerate() {
                    let (rv, cv) = (rt.to_f32_vec(), ct.to_f32_vec());
                    if i == 0 && scatter.is_none() {
                        scatter = Some(rtq_emit::OutputScatter {
                            output: self.names[0].clone(),
                            file: set.files()[file].display().to_string(),
                            points: scatter_points(&rv, &cv),
                        });
                    }
                    agg.add(&rv, &cv, rt.shape());
                }
                samples += 1;
            }
        }
        Ok(AccuracyReport {
            variant: variant.to_string(),
            samples,
            outputs: agreements.iter().map(OutputAgreement::summary).collect(),
            scatter,
        })
    }
}

/// Running agreement statistics for one output tensor across samples.
#[derive(Debug, Clone)]
pub struct OutputAgreement {
    name: String,
    cosine_sum: f64,
    cosine_min: f64,
    max_abs: f64,
    abs_sum: f64,
    elements: usize,
    samples: usize,
    top1_rows: usize,
    top1_agree: usize,
    classifier: bool,
}

impl OutputAgreement {
    /// Empty statistics for output `name`.
    pub fn new(name: &str) -> OutputAgreement {
        OutputAgreement {
            name: name.to_string(),
            cosine_sum: 0.0,
            cosine_min: f64::INFINITY,
            max_abs: 0.0,
            abs_sum: 0.0,
            elements: 0,
            samples: 0,
            top1_rows: 0,
            top1_agree: 0,
            classifier: true,
        }
    }

    /// Adds one sample: the reference (FP32) and candidate outputs, with the output's shape.
    pub fn add(&mut self, reference: &[f32], candidate: &[f32], shape: &[usize]) {
        let n = reference.len().min(candidate.len());
        let (mut dot, mut nr, mut nc) = (0f64, 0f64, 0f64);
        for i in 0..n {
            let (r, c) = (reference[i] as f64, candidate[i] as f64);
            dot += r * c;
            nr += r * r;
            nc += c * c;
            let d = (r - c).abs();
            self.abs_sum += d;
            if d > self.max_abs || d.is_nan() {
                self.max_abs = d;
            }
        }
        let cosine = if nr == 0.0 && nc == 0.0 {
            1.0
        } else if nr == 0.0 || nc == 0.0 {
            0.0
        } else {
            dot / (nr.sqrt() * nc.sqrt())
        };
        self.cosine_sum += cosine;
        self.cosine_min = self.cosine_min.min(cosine);
        self.elements += n;
        self.samples += 1;
        // Outputs with a class axis: classifiers ([N, C] or [N, C, 1, 1] holding
        // probabilities or unbounded scores; rows within [-1, 1] that are no distribution
        // are embeddings, as a Tanh pooler or an L2-normalized head emit) and sequences
        // ([N, T, C] whose positions are probability distributions, as OCR/ASR heads
        // emit), one arg-max per row or position.
        let scores = |c: usize| {
            is_distribution_per_row(reference, c) || reference.iter().any(|v| v.abs() > 1.0)
        };
        let classes = match shape {
            [_, c] | [_, c, 1, 1] if scores(*c) => *c,
            [_, _, c] if is_distribution_per_row(reference, *c) => *c,
            _ => 0,
        };
        if classes > 1 && n % classes == 0 {
            for (r, c) in reference.chunks(classes).zip(candidate.chunks(classes)) {
                self.top1_rows += 1;
                if argmax(r) == argmax(c) {
                    self.top1_agree += 1;
                }
            }
        } else {
            self.classifier = false;
        }
    }

    /// The summary for the report.
    pub fn summary(&self) -> OutputAccuracy {
        OutputAccuracy {
            output: self.name.clone(),
            cosine_mean: if self.samples > 0 {
                self.cosine_sum / self.samples as f64
            } else {
                0.0
            },
            cosine_min: if self.samples > 0 {
                self.cosine_min
            } else {
                0.0
            },
            max_abs_error: self.max_abs,
            mean_abs_error: if self.elements > 0 {
                self.abs_sum / self.elements as f64
            } else {
                0.0
            },
            top1_agreement: (self.classifier && self.top1_rows > 0)
                .then(|| self.top1_agree as f64 / self.top1_rows as f64),
        }
    }
}

/// Whether every row of `classes` values is a probability distribution (non-negative,
/// summing to 1): what tells a sequence of class scores from other rank-3 outputs.
fn is_distribution_per_row(values: &[f32], classes: usize) -> bool {
    classes > 1
        && values.len() % classes == 0
        && values.chunks(classes).all(|row| {
            let sum: f64 = row.iter().map(|&v| v as f64).sum();
            row.iter().all(|&v| v >= 0.0) && (sum - 1.0).abs() < 1e-3
        })
}

fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_outputs_agree_perfectly() {
        let mut a = OutputAgreement::new("prob");
        a.add(&[0.1, 0.7, 0.2], &[0.1, 0.7, 0.2], &[1, 3]);
        let s = a.summary();
        assert!((s.cosine_mean - 1.0).abs() < 1e-12);
        assert_eq!(s.max_abs_error, 0.0);
        assert_eq!(s.top1_agreement, Some(1.0));
    }

    #[test]
    fn disagreement_is_measured() {
        let mut a = OutputAgreement::new("prob");
        a.add(&[1.0, 0.0], &[0.0, 1.0], &[1, 2]);
        a.add(&[1.0, 0.0], &[1.0, 0.5], &[1, 2]);
        let s = a.summary();
        assert_eq!(s.cosine_min, 0.0);
        assert_eq!(s.max_abs_error, 1.0);
        assert_eq!(s.top1_agreement, Some(0.5));
        // Sequences agree position by position: [1, 3 positions, 2 classes].
        let mut q = OutputAgreement::new("seq");
        q.add(
            &[1.0, 0.0, 0.0, 1.0, 1.0, 0.0],
            &[1.0, 0.0, 1.0, 0.0, 1.0, 0.0],
            &[1, 3, 2],
        );
        assert_eq!(q.summary().top1_agreement, Some(2.0 / 3.0));
        // Rank-3 outputs that are not distributions (e.g. box regressions) are not.
        let mut r = OutputAgreement::new("boxes");
        r.add(&[3.0, -1.0, 2.0, 0.5], &[3.0, -1.0, 2.0, 0.5], &[1, 2, 2]);
        assert_eq!(r.summary().top1_agreement, None);
        // Feature maps are not classifiers.
        let mut f = OutputAgreement::new("map");
        f.add(&[1.0; 8], &[1.0; 8], &[1, 2, 2, 2]);
        assert_eq!(f.summary().top1_agreement, None);
        // Nor are embeddings ([N, C] within [-1, 1], no distribution: a Tanh pooler) ...
        let mut e = OutputAgreement::new("pooled");
        e.add(&[0.5, -0.9, 0.2], &[0.49, -0.9, 0.21], &[1, 3]);
        assert_eq!(e.summary().top1_agreement, None);
        // ... while unbounded scores are.
        let mut l = OutputAgreement::new("logits");
        l.add(&[2.5, -0.9, 0.2], &[2.4, -0.9, 0.21], &[1, 3]);
        assert_eq!(l.summary().top1_agreement, Some(1.0));
    }
}
