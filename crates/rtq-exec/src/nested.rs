//! Observing the values computed inside control-flow bodies ([`Plan::run_observed_nested`]):
//! each If/Loop/Scan body a run enters is named by a [`BodyScope`], and the observer
//! receives every value with the scopes it was computed in, outermost first.
//!
//! [`Plan::run_observed_nested`]: crate::Plan::run_observed_nested

use rtq_ir::{Tensor, ValueId};
use std::sync::Arc;

/// One level of body nesting: the control-flow node (by name, unique in its graph) and
/// the attribute holding the body (`then_branch`, `else_branch`, `body`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BodyScope {
    /// The If/Loop/Scan node's name.
    pub node: String,
    /// The body's attribute name.
    pub attr: String,
}

/// Receives every fed input and computed value of a run and of the bodies it runs: the
/// scopes (empty for the top graph's values), the value's id in the graph of the
/// innermost scope, and the tensor.
pub type NestedObserver<'a> = dyn FnMut(&[BodyScope], ValueId, &Arc<Tensor>) + 'a;

/// [`NestedObserver`] behind a shared reference (the run hands it to every body).
pub(crate) type SharedObserver<'a> = dyn Fn(&[BodyScope], ValueId, &Arc<Tensor>) + 'a;

/// A nested observation in progress: the scopes of the graph being run, and the
/// observer shared by every level (a body runs while its node's kernel holds no borrow
/// of it).
pub(crate) struct Nested<'o> {
    pub scopes: Vec<BodyScope>,
    pub observer: &'o SharedObserver<'o>,
}

impl<'o> Nested<'o> {
    /// Reports `value` of the graph being run.
    pub fn observe(&self, value: ValueId, tensor: &Arc<Tensor>) {
        (self.observer)(&self.scopes, value, tensor);
    }

    /// The observation of the body `attr` of node `node`.
    pub fn enter(&self, node: &str, attr: &str) -> Nested<'o> {
        let mut scopes = self.scopes.clone();
        scopes.push(BodyScope {
            node: node.to_string(),
            attr: attr.to_string(),
        });
        Nested {
            scopes,
            observer: self.observer,
        }
    }
}
