//! A graph prepared for repeated execution.

use crate::arena::{self, Arena};
use crate::feeds::InputDecl;
use crate::memo::Memo;
use crate::nested::{BodyScope, Nested, NestedObserver};
use crate::registry::{kernel_for, qualified_op, run_kernel, Kernel};
use crate::ExecError;
use rtq_ir::{Graph, Node, Tensor, ValueId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where a step reads a value from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// A constant held by the plan.
    Const(usize),
    /// A run-time slot (graph input or node output).
    Slot(usize),
}

/// One node to execute.
struct Step {
    node: Node,
    kernel: Kernel,
    inputs: Vec<Option<Source>>,
    outputs: Vec<usize>,
    /// Slots whose last reader is this step, freed right after it.
    free: Vec<usize>,
    /// Work the kernel derives from constant inputs, kept across runs; offered only
    /// when `memo_ok`.
    memo: Memo,
    /// Whether every input but the first is a plan constant (or omitted), or the node
    /// has bodies.
    memo_ok: bool,
}

/// A graph input of the plan.
struct PlanInput {
    decl: InputDecl,
    id: ValueId,
    slot: usize,
    /// The initializer an unfed input falls back to, if any.
    default: Option<Arc<Tensor>>,
}

/// A graph prepared for repeated runs: topological order, kernel lookup done once, and a
/// last-use table so intermediates are freed as soon as possible (memory never holds all
/// activations at once).
///
/// The plan owns copies of the nodes and shares the graph's constants, so it is
/// `Send + Sync + 'static` and can serve runs from several threads.
pub struct Plan {
    steps: Vec<Step>,
    inputs: Vec<PlanInput>,
    outputs: Vec<(String, Source)>,
    consts: Vec<Arc<Tensor>>,
    slot_values: Vec<ValueId>,
    /// Slots nobody reads and that are not graph outputs: dropped right after observation.
    dead_slots: Vec<bool>,
    /// The buffers runs freed, for the next runs' kernels.
    arena: Arena,
}

/// Receives every fed input and computed value of a run ([`Plan::run_observed`]).
pub type Observer<'a> = dyn FnMut(ValueId, &Arc<Tensor>) + 'a;

/// Where a run reports its values.
enum Sink<'r, 'o, 'f> {
    None,
    Flat(&'r mut Observer<'f>),
    Nested(&'r Nested<'o>),
}

impl<'o> Sink<'_, 'o, '_> {
    fn is_some(&self) -> bool {
        !matches!(self, Sink::None)
    }

    fn observe(&mut self, value: ValueId, tensor: &Arc<Tensor>) {
        match self {
            Sink::None => {}
            Sink::Flat(observe) => observe(value, tensor),
            Sink::Nested(nested) => nested.observe(value, tensor),
        }
    }

    /// The nested observation the kernels pass on to the bodies they run.
    fn nested(&self) -> Option<&Nested<'o>> {
        match self {
            Sink::Nested(nested) => Some(nested),
            _ => None,
        }
    }
}

/// A value held during a run: borrowed (feeds, constants) or computed (shared with
/// any observer that kept it).
enum Held<'a> {
    Ref(&'a Tensor),
    Owned(Arc<Tensor>),
}

impl Held<'_> {
    fn get(&self) -> &Tensor {
        match self {
            Held::Ref(t) => t,
            Held::Owned(t) => t,
        }
    }
}

impl Plan {
    /// Prepares `graph`: orders its nodes, resolves every kernel and computes when each
    /// intermediate can be freed. Fails listing every unsupported node at once, or on a
    /// cycle or an undefined value.
    pub fn new(graph: &Graph) -> Result<Plan, ExecError> {
        let order = graph.topo_order().map_err(|e| match e {
            rtq_ir::IrError::Cycle(node) => ExecError::Cycle { node },
            other => ExecError::InvalidGraph(other.to_string()),
        })?;

        let mut unsupported = Vec::new();
        let mut kernels = Vec::with_capacity(order.len());
        for &id in &order {
            let node = graph.node(id);
            match kernel_for(node) {
                Some(k) => kernels.push(k),
                None => unsupported.push((node.name.clone(), qualified_op(node))),
            }
        }
        if !unsupported.is_empty() {
            return Err(ExecError::UnsupportedMany(unsupported));
        }

        let mut slot_of: HashMap<ValueId, usize> = HashMap::new();
        let mut slot_values = Vec::new();
        fn new_slot(
            v: ValueId,
            slot_of: &mut HashMap<ValueId, usize>,
            slot_values: &mut Vec<ValueId>,
        ) -> usize {
            *slot_of.entry(v).or_insert_with(|| {
                slot_values.push(v);
                slot_values.len() - 1
            })
        }

        let mut inputs = Vec::with_capacity(graph.inputs.len());
        for &id in &graph.inputs {
            let value = graph.value(id);
            inputs.push(PlanInput {
                decl: InputDecl {
                    name: value.name.clone(),
                    dtype: value.dtype,
                    shape: value.shape.clone(),
                },
                id,
                slot: new_slot(id, &mut slot_of, &mut slot_values),
                default: value.constant.clone(),
            });
        }
        let input_ids: std::collections::HashSet<ValueId> = graph.inputs.iter().copied().collect();

        let mut consts: Vec<Arc<Tensor>> = Vec::new();
        let mut const_of: HashMap<ValueId, usize> = HashMap::new();
        let mut steps = Vec::with_capacity(order.len());
        for (&id, kernel) in order.iter().zip(kernels) {
            let node = graph.node(id);
            let mut srcs = Vec::with_capacity(node.inputs.len());
            for input in &node.inputs {
                let Some(v) = *input else {
                    srcs.push(None);
                    continue;
                };
                let value = graph.value(v);
                let src = if let Some(&slot) = slot_of.get(&v) {
                    Source::Slot(slot)
                } else if let (Some(c), false) = (&value.constant, input_ids.contains(&v)) {
                    let idx = *const_of.entry(v).or_insert_with(|| {
                        consts.push(c.clone());
                        consts.len() - 1
                    });
                    Source::Const(idx)
                } else {
                    return Err(ExecError::Undefined {
                        node: node.name.clone(),
                        op: qualified_op(node),
                        value: value.name.clone(),
                    });
                };
                srcs.push(Some(src));
            }
            let outputs = node
                .outputs
                .iter()
                .map(|&o| new_slot(o, &mut slot_of, &mut slot_values))
                .collect();
            // Control flow keeps its bodies' plans there, which depend on the bodies
            // alone.
            let memo_ok = node.subgraphs().next().is_some()
                || srcs
                    .iter()
                    .take(memo_inputs(node))
                    .skip(1)
                    .all(|s| matches!(s, None | Some(Source::Const(_))));
            steps.push(Step {
                node: node.clone(),
                kernel,
                inputs: srcs,
                outputs,
                free: Vec::new(),
                memo: Memo::new(),
                memo_ok,
            });
        }

        let mut outputs = Vec::with_capacity(graph.outputs.len());
        let mut output_slots = vec![false; slot_values.len()];
        for &o in &graph.outputs {
            let value = graph.value(o);
            let src = if let Some(&slot) = slot_of.get(&o) {
                output_slots[slot] = true;
                Source::Slot(slot)
            } else if let Some(c) = &value.constant {
                consts.push(c.clone());
                Source::Const(consts.len() - 1)
            } else {
                return Err(ExecError::UndefinedOutput {
                    output: value.name.clone(),
                });
            };
            outputs.push((value.name.clone(), src));
        }

        // Last use of every slot; graph outputs are never freed.
        let mut last_use: Vec<Option<usize>> = vec![None; slot_values.len()];
        for (i, step) in steps.iter().enumerate() {
            for src in step.inputs.iter().flatten() {
                if let Source::Slot(s) = *src {
                    last_use[s] = Some(i);
                }
            }
        }
        let mut dead_slots = vec![false; slot_values.len()];
        for (slot, last) in last_use.iter().enumerate() {
            if output_slots[slot] {
                continue;
            }
            match last {
                Some(i) => steps[*i].free.push(slot),
                None => dead_slots[slot] = true,
            }
        }

        Ok(Plan {
            steps,
            inputs,
            outputs,
            consts,
            slot_values,
            dead_slots,
            arena: Arena::default(),
        })
    }

    /// Runs the graph with `feeds` (by graph-input name) and returns the graph outputs
    /// in order.
    ///
    /// The whole run happens on one of rayon's threads (directly, when called from
    /// one): the kernels' parallel loops then start as local work rather than each
    /// being injected into the pool and waited for from outside, which costs two
    /// thread switches per loop.
    pub fn run(&self, feeds: &[(String, Tensor)]) -> Result<Vec<Tensor>, ExecError> {
        rayon::scope(|_| self.execute(feeds, Sink::None, None))
    }

    /// Same as [`Plan::run`], also timing every node: `times[i]` is the wall time of
    /// the `i`-th node of [`Plan::nodes`] (its kernel alone, not the bookkeeping
    /// around it).
    pub fn run_profiled(
        &self,
        feeds: &[(String, Tensor)],
    ) -> Result<(Vec<Tensor>, Vec<Duration>), ExecError> {
        let mut times = vec![Duration::ZERO; self.steps.len()];
        let outputs = rayon::scope(|_| self.execute(feeds, Sink::None, Some(&mut times)))?;
        Ok((outputs, times))
    }

    /// The nodes the plan executes, in execution order.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.steps.iter().map(|s| &s.node)
    }

    /// Same as [`Plan::run`], calling `observe(value_id, &tensor)` for every fed input
    /// and every value a node computes, before it may be freed. The observer may keep
    /// a computed tensor (clone the `Arc`) without copying it; fed inputs are copied
    /// once into an `Arc` for the call.
    ///
    /// Unlike [`Plan::run`] this runs on the calling thread, so that an observer may
    /// block (e.g. on a queue) without holding one of rayon's threads; callers that
    /// never block can move it onto the pool themselves (`rayon::scope`).
    pub fn run_observed(
        &self,
        feeds: &[(String, Tensor)],
        observe: &mut Observer<'_>,
    ) -> Result<Vec<Tensor>, ExecError> {
        self.execute(feeds, Sink::Flat(observe), None)
    }

    /// Same as [`Plan::run_observed`], and also reports the values computed inside
    /// the control-flow bodies the run enters (at any depth), each with the scopes it
    /// was computed in ([`BodyScope`]: empty for this graph's own values). A body run
    /// once per loop iteration reports its values once per iteration.
    pub fn run_observed_nested(
        &self,
        feeds: &[(String, Tensor)],
        observe: &mut NestedObserver<'_>,
    ) -> Result<Vec<Tensor>, ExecError> {
        let cell = RefCell::new(observe);
        let observer = |scopes: &[BodyScope], value: ValueId, tensor: &Arc<Tensor>| {
            (cell.borrow_mut())(scopes, value, tensor)
        };
        let nested = Nested {
            scopes: Vec::new(),
            observer: &observer,
        };
        self.execute(feeds, Sink::Nested(&nested), None)
    }

    /// Runs a control-flow body of the graph `nested` observes, observed as that body.
    pub(crate) fn run_nested(
        &self,
        feeds: &[(String, Tensor)],
        nested: &Nested<'_>,
    ) -> Result<Vec<Tensor>, ExecError> {
        self.execute(feeds, Sink::Nested(nested), None)
    }

    fn execute(
        &self,
        feeds: &[(String, Tensor)],
        mut observe: Sink<'_, '_, '_>,
        mut times: Option<&mut [Duration]>,
    ) -> Result<Vec<Tensor>, ExecError> {
        let _pool = self.arena.enter();
        let mut slots: Vec<Option<Held<'_>>> = Vec::with_capacity(self.slot_values.len());
        slots.resize_with(self.slot_values.len(), || None);

        self.bind_feeds(feeds, &mut slots, &mut observe)?;

        for (index, step) in self.steps.iter().enumerate() {
            let started = times.is_some().then(Instant::now);
            let outs = {
                let mut ins: Vec<Option<&Tensor>> = Vec::with_capacity(step.inputs.len());
                for src in &step.inputs {
                    ins.push(match src {
                        None => None,
                        Some(Source::Const(c)) => Some(&*self.consts[*c]),
                        Some(Source::Slot(s)) => Some(
                            slots[*s]
                                .as_ref()
                                .map(Held::get)
                                .ok_or_else(|| self.freed(step, *s))?,
                        ),
                    });
                }
                let memo = step.memo_ok.then_some(&step.memo);
                run_kernel(step.kernel, &step.node, &ins, memo, observe.nested())?
            };
            if let (Some(times), Some(started)) = (times.as_deref_mut(), started) {
                times[index] += started.elapsed();
            }
            for (&slot, t) in step.outputs.iter().zip(outs) {
                let t = Arc::new(t);
                observe.observe(self.slot_values[slot], &t);
                if self.dead_slots[slot] {
                    arena::recycle(t);
                } else {
                    slots[slot] = Some(Held::Owned(t));
                }
            }
            for &slot in &step.free {
                if let Some(Held::Owned(t)) = slots[slot].take() {
                    arena::recycle(t);
                }
            }
        }

        let mut results = Vec::with_capacity(self.outputs.len());
        for (i, (name, src)) in self.outputs.iter().enumerate() {
            let t = match *src {
                Source::Const(c) => (*self.consts[c]).clone(),
                Source::Slot(s) => {
                    let used_again = self.outputs[i + 1..].iter().any(|(_, o)| *o == *src);
                    match slots[s].take() {
                        Some(Held::Owned(t)) if !used_again => {
                            Arc::try_unwrap(t).unwrap_or_else(|shared| (*shared).clone())
                        }
                        Some(held) => {
                            let t = held.get().clone();
                            slots[s] = Some(held);
                            t
                        }
                        None => {
                            return Err(ExecError::UndefinedOutput {
                                output: name.clone(),
                            })
                        }
                    }
                }
            };
            results.push(t);
        }
        Ok(results)
    }

    fn bind_feeds<'a>(
        &'a self,
        feeds: &'a [(String, Tensor)],
        slots: &mut [Option<Held<'a>>],
        observe: &mut Sink<'_, '_, '_>,
    ) -> Result<(), ExecError> {
        let mut fed: Vec<Option<&Tensor>> = vec![None; self.inputs.len()];
        for (name, t) in feeds {
            let Some(i) = self.inputs.iter().position(|p| p.decl.name == *name) else {
                return Err(ExecError::UnknownFeed {
                    input: name.clone(),
                    known: self.input_names().join(", "),
                });
            };
            if fed[i].is_some() {
                return Err(ExecError::DuplicateFeed {
                    input: name.clone(),
                });
            }
            fed[i] = Some(t);
        }
        for (input, t) in self.inputs.iter().zip(fed) {
            let t = match (t, &input.default) {
                (Some(t), _) => {
                    input.decl.check(t)?;
                    if observe.is_some() {
                        observe.observe(input.id, &Arc::new(t.clone()));
                    }
                    t
                }
                (None, Some(d)) => &**d,
                (None, None) => {
                    return Err(ExecError::MissingFeed {
                        input: input.decl.name.clone(),
                    })
                }
            };
            slots[input.slot] = Some(Held::Ref(t));
        }
        Ok(())
    }

    fn freed(&self, step: &Step, slot: usize) -> ExecError {
        // Cannot happen for a plan built by `new` (a slot is freed only after its last
        // reader); reported rather than panicking.
        ExecError::BadInput {
            node: step.node.name.clone(),
            op: step.node.op_type.clone(),
            message: format!("input slot {slot} was released before this node ran"),
        }
    }

    /// Names of the graph inputs, in order.
    pub fn input_names(&self) -> Vec<String> {
        self.inputs.iter().map(|p| p.decl.name.clone()).collect()
    }

    /// Names of the graph outputs, in order.
    pub fn output_names(&self) -> Vec<String> {
        self.outputs.iter().map(|(n, _)| n.clone()).collect()
    }

    /// Ids of the values a run reports to its observer: the graph inputs that are fed,
    /// then every node output in execution order.
    pub fn observed_values(&self) -> Vec<ValueId> {
        self.inputs
            .iter()
            .map(|p| p.id)
            .chain(
                self.steps
                    .iter()
                    .flat_map(|s| s.outputs.iter().map(|&slot| self.slot_values[slot])),
            )
            .collect()
    }

    /// Number of nodes the plan executes.
    pub fn node_count(&self) -> usize {
        self.steps.len()
    }

    /// Runs `f` on one of rayon's threads (directly, when called from one) with one
    /// of the plan's buffer pools current, so that what the caller does around its
    /// runs shares the pool: inputs converted with [`crate::tensor_from_le_bytes`]
    /// take kept blocks, outputs handed to [`crate::into_le_bytes`] or
    /// [`crate::recycle_tensor`] give theirs back, and the runs `f` makes use the same
    /// pool (a run outside it takes a pool of its own).
    pub fn with_buffers<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        rayon::scope(|_| {
            let _pool = self.arena.enter();
            f()
        })
    }
}

/// How many of `node`'s first inputs its kernel may derive work from for its memo (the
/// first is never one): all of them, except a fused convolution's residual (input 3),
/// which its kernel only adds to the output, so it may change between runs.
fn memo_inputs(node: &Node) -> usize {
    if node.op_type == "FusedConv" && node.domain == crate::ops::integer::INTEGER_DOMAIN {
        3
    } else {
        usize::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::{DType, Dim};
    use std::collections::BTreeMap;

    fn assert_send_sync_static<T: Send + Sync + 'static>() {}

    #[test]
    fn a_fused_convolution_keeps_derived_filters_whatever_its_residual() {
        use crate::fuse::tests::{conv_residual, Join};
        let mut g = conv_residual(3, 1, Join::AddAfter, true, 8, false);
        assert_eq!(crate::fuse_activations(&mut g), 1);
        let plan = Plan::new(&g).unwrap();
        let fused = |plan: &Plan| {
            let step = plan.steps.iter().find(|s| s.node.op_type == "FusedConv");
            step.map(|s| (s.memo_ok, s.memo.get().is_some())).unwrap()
        };
        assert!(fused(&plan).0, "the residual is a per-run input");
        let x = Tensor::from_f32(vec![2, 4, 5, 6], vec![0.5; 240]);
        plan.run(&[("x".into(), x)]).unwrap();
        if crate::simd::Simd::has_avx512() {
            assert!(
                fused(&plan).1,
                "the direct kernel's packed filters are kept"
            );
        }
    }

    #[test]
    fn plan_is_send_sync_static() {
        assert_send_sync_static::<Plan>();
    }

    /// x -> Relu -> a -> Neg -> b (output); a is also an output; c = Abs(x) unused.
    fn graph() -> Graph {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![Dim::Sym("N".into())]);
        let a = g.add_value("a", None, None);
        let b = g.add_value("b", None, None);
        let c = g.add_value("c", None, None);
        g.add_node("relu", "Relu", vec![Some(x)], vec![a], BTreeMap::new());
        g.add_node("neg", "Neg", vec![Some(a)], vec![b], BTreeMap::new());
        g.add_node("abs", "Abs", vec![Some(x)], vec![c], BTreeMap::new());
        g.outputs.push(b);
        g.outputs.push(a);
        g.outputs.push(a);
        g
    }

    #[test]
    fn runs_and_observes_every_value() {
        let plan = Plan::new(&graph()).unwrap();
        let x = Tensor::from_f32(vec![3], vec![-1.0, 2.0, -3.0]);
        let mut seen = Vec::new();
        let out = plan
            .run_observed(&[("x".into(), x)], &mut |id, t| {
                seen.push((id, (**t).clone()))
            })
            .unwrap();
        assert_eq!(out[0].as_f32().unwrap(), &[0.0, -2.0, 0.0]);
        assert_eq!(out[1].as_f32().unwrap(), &[0.0, 2.0, 0.0]);
        assert_eq!(out[1], out[2]);
        assert_eq!(seen.len(), 4);
        assert_eq!(
            seen.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            plan.observed_values()
        );
        assert_eq!(seen[3].1.as_f32().unwrap(), &[1.0, 2.0, 3.0]);
        assert_eq!(plan.output_names(), vec!["b", "a", "a"]);
        assert_eq!(plan.input_names(), vec!["x"]);
    }

    #[test]
    fn intermediates_are_freed_after_their_last_reader() {
        let plan = Plan::new(&graph()).unwrap();
        // `x`'s last reader is `abs` (step 2); `c` is never read and not an output.
        let abs_step = plan
            .steps
            .iter()
            .position(|s| s.node.name == "abs")
            .unwrap();
        let x_slot = plan.inputs[0].slot;
        assert!(plan.steps[abs_step].free.contains(&x_slot));
        let c_slot = plan.steps[abs_step].outputs[0];
        assert!(plan.dead_slots[c_slot]);
        // `a` is a graph output: never freed.
        let a_slot = plan.steps[0].outputs[0];
        assert!(plan.steps.iter().all(|s| !s.free.contains(&a_slot)));
    }

    #[test]
    fn feed_errors_are_reported() {
        let plan = Plan::new(&graph()).unwrap();
        let x = Tensor::from_f32(vec![1], vec![1.0]);
        assert!(matches!(plan.run(&[]), Err(ExecError::MissingFeed { .. })));
        assert!(matches!(
            plan.run(&[("y".into(), x.clone())]),
            Err(ExecError::UnknownFeed { .. })
        ));
        assert!(matches!(
            plan.run(&[("x".into(), x.clone()), ("x".into(), x.clone())]),
            Err(ExecError::DuplicateFeed { .. })
        ));
        let wrong = Tensor::from_i64(vec![1], vec![1]);
        let err = plan.run(&[("x".into(), wrong)]).unwrap_err().to_string();
        assert!(err.contains("expected float[N], got int64[1]"), "{err}");
    }

    #[test]
    fn undefined_values_and_cycles_are_rejected() {
        let mut g = Graph::new("g", 13);
        let ghost = g.add_value("ghost", None, None);
        let y = g.add_value("y", None, None);
        g.add_node("relu", "Relu", vec![Some(ghost)], vec![y], BTreeMap::new());
        g.outputs.push(y);
        let err = Plan::new(&g).err().unwrap().to_string();
        assert!(err.contains("relu") && err.contains("ghost"), "{err}");

        let mut g = Graph::new("g", 13);
        let a = g.add_value("a", None, None);
        let b = g.add_value("b", None, None);
        g.add_node("n1", "Relu", vec![Some(a)], vec![b], BTreeMap::new());
        g.add_node("n2", "Relu", vec![Some(b)], vec![a], BTreeMap::new());
        assert!(matches!(Plan::new(&g), Err(ExecError::Cycle { .. })));
    }

    #[test]
    fn constants_and_overridable_initializers() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![Dim::Known(2)]);
        // An input with a default value (initializer listed as graph input).
        let w = g.add_input("w", DType::F32, vec![Dim::Known(2)]);
        g.value_mut(w).constant = Some(Arc::new(Tensor::from_f32(vec![2], vec![10.0, 20.0])));
        let k = g.add_constant("k", Tensor::from_f32(vec![2], vec![1.0, 1.0]));
        let s = g.add_value("s", None, None);
        let y = g.add_value("y", None, None);
        g.add_node(
            "add1",
            "Add",
            vec![Some(x), Some(w)],
            vec![s],
            BTreeMap::new(),
        );
        g.add_node(
            "add2",
            "Add",
            vec![Some(s), Some(k)],
            vec![y],
            BTreeMap::new(),
        );
        g.outputs.push(y);
        g.outputs.push(k);
        let plan = Plan::new(&g).unwrap();
        let x = Tensor::from_f32(vec![2], vec![1.0, 2.0]);
        let out = plan.run(&[("x".into(), x.clone())]).unwrap();
        assert_eq!(out[0].as_f32().unwrap(), &[12.0, 23.0]);
        assert_eq!(out[1].as_f32().unwrap(), &[1.0, 1.0]);
        let w2 = Tensor::from_f32(vec![2], vec![0.0, 0.0]);
        let out = plan.run(&[("x".into(), x), ("w".into(), w2)]).unwrap();
        assert_eq!(out[0].as_f32().unwrap(), &[2.0, 3.0]);
    }
}
