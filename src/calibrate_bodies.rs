//! Calibration inside control-flow bodies: the calibration samples run through the FP32
//! graph with the bodies observed (`rtq_exec::Plan::run_observed_nested`), every float
//! value a body computes or is fed going to a range collector of its own, keyed by the
//! body's path and the value's id in the body. A body that runs once per loop
//! iteration contributes every iteration. Every method's statistics are kept, so the
//! bodies follow whatever method the build settles on.

use anyhow::{Context, Result};
use rtq_calib::{
    AllMethodsCalibrator, CalibMethod, CalibOptions, CalibrationSet, Calibrator, InputSpec,
    RangeCollector,
};
use rtq_ir::{DType, Graph, ValueId};
use rtq_passes::quant::{body_at, body_label, BodyPath, BodyRanges};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Statistics of every float value inside the bodies, collected on calibration data.
pub struct BodyCalibration {
    collectors: HashMap<BodyPath, HashMap<ValueId, Box<dyn RangeCollector>>>,
    /// The value names of each body, for messages.
    names: HashMap<BodyPath, HashMap<ValueId, String>>,
    /// Ranges already chosen, by method (the fallback judges many builds).
    chosen: Mutex<BTreeMap<CalibMethod, Arc<BodyRanges>>>,
}

impl BodyCalibration {
    /// Runs the samples of `files` through `graph`, observing its bodies.
    pub fn observe(
        graph: &Graph,
        set: &CalibrationSet,
        files: &[usize],
        method: CalibMethod,
        options: &CalibOptions,
    ) -> Result<BodyCalibration> {
        let calibrator = AllMethodsCalibrator::new(method, options)?;
        let plan = rtq_exec::Plan::new(graph).context("preparing the FP32 graph")?;
        let specs = InputSpec::from_graph(graph)?;
        let mut collectors: HashMap<BodyPath, HashMap<ValueId, Box<dyn RangeCollector>>> =
            HashMap::new();
        let mut failed: Option<anyhow::Error> = None;
        for &file in files {
            for sample in set.load(file, &specs)? {
                plan.run_observed_nested(&sample, &mut |scopes, v, t| {
                    if scopes.is_empty() || t.dtype() != DType::F32 || failed.is_some() {
                        return;
                    }
                    let body = collectors.entry(scopes.to_vec()).or_default();
                    let collector = body.entry(v).or_insert_with(|| calibrator.collector());
                    if let Err(e) = collector.observe(&crate::calibrate::f32_values(t)) {
                        let name = body_at(graph, scopes)
                            .map_or(String::new(), |b| b.value(v).name.clone());
                        failed = Some(anyhow::anyhow!(
                            "body {}: tensor `{name}`: {e}",
                            body_label(scopes)
                        ));
                    }
                })
                .with_context(|| format!("running {}", set.files()[file].display()))?;
                if let Some(e) = failed.take() {
                    return Err(
                        e.context(format!("calibrating on {}", set.files()[file].display()))
                    );
                }
            }
        }
        let names = collectors
            .iter()
            .map(|(path, values)| {
                let body = body_at(graph, path);
                let names = values
                    .keys()
                    .map(|&v| (v, body.map_or(String::new(), |b| b.value(v).name.clone())))
                    .collect();
                (path.clone(), names)
            })
            .collect();
        Ok(BodyCalibration {
            collectors,
            names,
            chosen: Mutex::default(),
        })
    }

    /// Every observed body value's range as `method` picks it.
    pub fn ranges(&self, method: CalibMethod) -> Result<Arc<BodyRanges>> {
        if let Some(ranges) = self.chosen.lock().expect("not poisoned").get(&method) {
            return Ok(Arc::clone(ranges));
        }
        let mut out = BodyRanges::new();
        for (path, values) in &self.collectors {
            let mut ranges = HashMap::with_capacity(values.len());
            for (&v, collector) in values {
                let amax = collector
                    .amax_for(method)
                    .expect("every method's statistics are kept")
                    .with_context(|| {
                        format!(
                            "body {}: tensor `{}`",
                            body_label(path),
                            self.names[path][&v]
                        )
                    })?;
                ranges.insert(v, amax);
            }
            out.insert(path.clone(), ranges);
        }
        let out = Arc::new(out);
        let mut chosen = self.chosen.lock().expect("not poisoned");
        chosen.insert(method, Arc::clone(&out));
        Ok(out)
    }

    /// Whether any body ran on the calibration data.
    pub fn is_empty(&self) -> bool {
        self.collectors.is_empty()
    }
}
