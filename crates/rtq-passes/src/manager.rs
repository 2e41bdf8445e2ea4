//! The [`PassManager`]: runs a pipeline of passes to a fixed point.

use crate::{HookError, Pass, PassError, PassStat, PassStats};
use rtq_ir::Graph;
use std::ops::ControlFlow;
use std::time::Instant;

/// What the pass manager tells its hook after each pass run.
#[derive(Debug, Clone, Copy)]
pub struct PassEvent<'a> {
    /// The pass that just ran.
    pub pass: &'a str,
    /// Position of the pass in the pipeline (0-based).
    pub index: usize,
    /// Pipeline iteration (0-based).
    pub iteration: usize,
    /// Whether this run changed the graph.
    pub changed: bool,
    /// The graph as the pass left it.
    pub graph: &'a Graph,
}

/// What a hook may return: `()` (continue), a [`ControlFlow`] (`Break` stops the
/// pipeline, for `--stop-after`), or a `Result` of either (an error aborts the pipeline
/// with [`PassError::Hook`]).
pub trait HookOutcome {
    /// The outcome as a flow decision or an error.
    fn into_flow(self) -> Result<ControlFlow<()>, HookError>;
}

impl HookOutcome for () {
    fn into_flow(self) -> Result<ControlFlow<()>, HookError> {
        Ok(ControlFlow::Continue(()))
    }
}

impl HookOutcome for ControlFlow<()> {
    fn into_flow(self) -> Result<ControlFlow<()>, HookError> {
        Ok(self)
    }
}

impl<E: Into<HookError>> HookOutcome for Result<(), E> {
    fn into_flow(self) -> Result<ControlFlow<()>, HookError> {
        self.map(|()| ControlFlow::Continue(())).map_err(Into::into)
    }
}

impl<E: Into<HookError>> HookOutcome for Result<ControlFlow<()>, E> {
    fn into_flow(self) -> Result<ControlFlow<()>, HookError> {
        self.map_err(Into::into)
    }
}

/// The stored form of a hook registered with [`PassManager::on_pass`].
pub type PassHook = dyn FnMut(&PassEvent<'_>) -> Result<ControlFlow<()>, HookError>;

/// Default cap on pipeline iterations.
pub const DEFAULT_MAX_ITERATIONS: usize = 10;

/// Runs passes in order, repeating the whole sequence until an iteration changes
/// nothing (or an iteration cap is hit), optionally verifying the graph after every
/// pass, and recording per-pass statistics.
///
/// Passes may borrow from the caller (`'a`): see the `Pass` impl for `&mut P`.
pub struct PassManager<'a> {
    passes: Vec<Box<dyn Pass + 'a>>,
    verify_each: bool,
    max_iterations: usize,
    hook: Option<Box<PassHook>>,
}

impl Default for PassManager<'_> {
    fn default() -> Self {
        PassManager::new()
    }
}

impl std::fmt::Debug for PassManager<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassManager")
            .field("passes", &self.pass_names())
            .field("verify_each", &self.verify_each)
            .field("max_iterations", &self.max_iterations)
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

impl<'a> PassManager<'a> {
    /// An empty pipeline: no verification, [`DEFAULT_MAX_ITERATIONS`] iterations, no hook.
    pub fn new() -> PassManager<'a> {
        PassManager {
            passes: Vec::new(),
            verify_each: false,
            max_iterations: DEFAULT_MAX_ITERATIONS,
            hook: None,
        }
    }

    /// Appends a pass to the pipeline.
    pub fn add(&mut self, pass: Box<dyn Pass + 'a>) -> &mut Self {
        self.passes.push(pass);
        self
    }

    /// Appends several passes in order.
    pub fn extend(&mut self, passes: impl IntoIterator<Item = Box<dyn Pass + 'a>>) -> &mut Self {
        self.passes.extend(passes);
        self
    }

    /// Whether to run [`rtq_ir::verify`] on the input graph and after every pass.
    pub fn verify_each(&mut self, on: bool) -> &mut Self {
        self.verify_each = on;
        self
    }

    /// Caps the number of pipeline iterations (at least one always runs).
    pub fn max_iterations(&mut self, n: usize) -> &mut Self {
        self.max_iterations = n.max(1);
        self
    }

    /// Registers the hook called after every pass run (replacing any earlier one), e.g.
    /// to dump the IR (`--dump-ir`) or stop after a named pass (`--stop-after`, by
    /// returning `ControlFlow::Break(())`).
    pub fn on_pass<F, R>(&mut self, mut hook: F) -> &mut Self
    where
        F: FnMut(&PassEvent<'_>) -> R + 'static,
        R: HookOutcome,
    {
        self.hook = Some(Box::new(move |event| hook(event).into_flow()));
        self
    }

    /// Names of the passes in pipeline order.
    pub fn pass_names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.name()).collect()
    }

    /// Runs the pipeline on `graph` until a fixed point, the iteration cap, or a hook
    /// asking to stop.
    pub fn run(&mut self, graph: &mut Graph) -> Result<PassStats, PassError> {
        if self.verify_each {
            rtq_ir::verify(graph).map_err(|source| PassError::InvalidInput { source })?;
        }
        let mut stats = PassStats {
            entries: self
                .passes
                .iter()
                .map(|p| PassStat {
                    name: p.name().to_string(),
                    runs: 0,
                    changes: 0,
                    nodes_before: 0,
                    nodes_after: 0,
                    wall_ms: 0.0,
                })
                .collect(),
            ..PassStats::default()
        };
        for iteration in 0..self.max_iterations {
            stats.iterations = iteration + 1;
            let mut any_change = false;
            for (index, pass) in self.passes.iter_mut().enumerate() {
                let name = pass.name();
                let before = graph.node_count();
                let start = Instant::now();
                let changed = pass.run(graph)?;
                let elapsed = start.elapsed().as_secs_f64() * 1e3;
                let entry = &mut stats.entries[index];
                if entry.runs == 0 {
                    entry.nodes_before = before;
                }
                entry.runs += 1;
                entry.changes += usize::from(changed);
                entry.nodes_after = graph.node_count();
                entry.wall_ms += elapsed;
                any_change |= changed;
                if self.verify_each {
                    rtq_ir::verify(graph).map_err(|source| PassError::Verify {
                        pass: name.to_string(),
                        source,
                    })?;
                }
                if let Some(hook) = self.hook.as_mut() {
                    let event = PassEvent {
                        pass: name,
                        index,
                        iteration,
                        changed,
                        graph,
                    };
                    let flow = hook(&event).map_err(|source| PassError::Hook {
                        pass: name.to_string(),
                        source,
                    })?;
                    if flow.is_break() {
                        stats.stopped_after = Some(name.to_string());
                        return Ok(stats);
                    }
                }
            }
            if !any_change {
                stats.converged = true;
                break;
            }
        }
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::{DType, Dim};
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::rc::Rc;

    /// Removes one Relu node per run while any remain.
    struct DropOneRelu;

    impl Pass for DropOneRelu {
        fn name(&self) -> &'static str {
            "drop-one-relu"
        }
        fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
            let Some(id) = graph
                .nodes()
                .find(|(_, n)| n.op_type == "Relu")
                .map(|(id, _)| id)
            else {
                return Ok(false);
            };
            let node = graph.node(id).clone();
            let (Some(input), Some(&output)) = (node.input(0), node.outputs.first()) else {
                return Ok(false);
            };
            if !graph.bypass(output, input) {
                return Ok(false);
            }
            graph.remove_node(id);
            Ok(true)
        }
    }

    /// Breaks the graph: removes the first node without rewiring its readers.
    struct Vandal;

    impl Pass for Vandal {
        fn name(&self) -> &'static str {
            "vandal"
        }
        fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
            let first = graph.node_ids()[0];
            graph.remove_node(first);
            Ok(true)
        }
    }

    /// Never converges: always claims a change.
    struct Restless;

    impl Pass for Restless {
        fn name(&self) -> &'static str {
            "restless"
        }
        fn run(&mut self, _graph: &mut Graph) -> Result<bool, PassError> {
            Ok(true)
        }
    }

    fn relu_chain(n: usize) -> Graph {
        let mut g = Graph::new("chain", 13);
        let mut cur = g.add_input("x", DType::F32, vec![Dim::Known(4)]);
        for i in 0..n {
            let out = g.add_value(&format!("r{i}"), Some(DType::F32), None);
            g.add_node(
                &format!("relu{i}"),
                "Relu",
                vec![Some(cur)],
                vec![out],
                BTreeMap::new(),
            );
            cur = out;
        }
        let y = g.add_value("y", Some(DType::F32), None);
        g.add_node("last", "Sigmoid", vec![Some(cur)], vec![y], BTreeMap::new());
        g.outputs.push(y);
        g
    }

    #[test]
    fn iterates_to_a_fixed_point_and_records_stats() {
        let mut g = relu_chain(3);
        let mut pm = PassManager::new();
        pm.add(Box::new(DropOneRelu)).verify_each(true);
        let stats = pm.run(&mut g).unwrap();
        assert_eq!(g.node_count(), 1);
        assert!(stats.converged);
        // Three changing iterations and a final one that changes nothing.
        assert_eq!(stats.iterations, 4);
        let e = &stats.entries[0];
        assert_eq!((e.runs, e.changes), (4, 3));
        assert_eq!((e.nodes_before, e.nodes_after), (4, 1));
    }

    #[test]
    fn iteration_cap_stops_a_restless_pipeline() {
        let mut g = relu_chain(1);
        let mut pm = PassManager::new();
        pm.add(Box::new(Restless)).max_iterations(3);
        let stats = pm.run(&mut g).unwrap();
        assert_eq!(stats.iterations, 3);
        assert!(!stats.converged);
        assert_eq!(stats.entries[0].runs, 3);
    }

    #[test]
    fn verify_each_names_the_breaking_pass() {
        let mut g = relu_chain(2);
        let mut pm = PassManager::new();
        pm.add(Box::new(Vandal)).verify_each(true);
        let err = pm.run(&mut g).unwrap_err();
        assert!(
            matches!(&err, PassError::Verify { pass, .. } if pass == "vandal"),
            "{err}"
        );
        // Without verification the broken graph goes through silently.
        let mut g = relu_chain(2);
        let mut pm = PassManager::new();
        pm.add(Box::new(Vandal)).max_iterations(1);
        assert!(pm.run(&mut g).is_ok());
    }

    #[test]
    fn invalid_input_is_reported_before_any_pass() {
        let mut g = relu_chain(1);
        let first = g.node_ids()[0];
        g.remove_node(first);
        let mut pm = PassManager::new();
        pm.add(Box::new(DropOneRelu)).verify_each(true);
        assert!(matches!(
            pm.run(&mut g),
            Err(PassError::InvalidInput { .. })
        ));
    }

    #[test]
    fn hook_sees_every_run_and_can_stop_the_pipeline() {
        /// (pass, iteration, changed, node count) per hook call.
        type Log = Rc<RefCell<Vec<(String, usize, bool, usize)>>>;
        let seen: Log = Rc::default();
        let log = Rc::clone(&seen);
        let mut g = relu_chain(3);
        let mut pm = PassManager::new();
        pm.add(Box::new(DropOneRelu)).on_pass(move |ev| {
            let nodes = ev.graph.node_count();
            log.borrow_mut()
                .push((ev.pass.to_string(), ev.iteration, ev.changed, nodes));
            if nodes == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        let stats = pm.run(&mut g).unwrap();
        assert_eq!(stats.stopped_after.as_deref(), Some("drop-one-relu"));
        assert!(!stats.converged);
        assert_eq!(g.node_count(), 2);
        assert_eq!(
            *seen.borrow(),
            vec![
                ("drop-one-relu".to_string(), 0, true, 3),
                ("drop-one-relu".to_string(), 1, true, 2)
            ]
        );
    }

    #[test]
    fn unit_hooks_observe_without_stopping() {
        let calls = Rc::new(RefCell::new(0usize));
        let counter = Rc::clone(&calls);
        let mut g = relu_chain(2);
        let mut pm = PassManager::new();
        pm.add(Box::new(DropOneRelu)).on_pass(move |event| {
            assert!(rtq_ir::verify(event.graph).is_ok());
            *counter.borrow_mut() += 1;
        });
        let stats = pm.run(&mut g).unwrap();
        assert!(stats.converged);
        assert_eq!(*calls.borrow(), 3);
    }

    #[test]
    fn hook_errors_abort_with_the_pass_name() {
        let mut g = relu_chain(1);
        let mut pm = PassManager::new();
        pm.add(Box::new(DropOneRelu))
            .on_pass(|_| Err::<(), HookError>("disk full".into()));
        let err = pm.run(&mut g).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("drop-one-relu") && msg.contains("disk full"),
            "{msg}"
        );
    }
}
