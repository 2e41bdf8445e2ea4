//! The [`Pass`] trait every graph transform implements.

use crate::PassError;
use rtq_ir::Graph;

/// A graph transform. [`Pass::run`] returns whether it changed anything, which the
/// [`crate::PassManager`] uses to iterate a pipeline to a fixed point: a pass must
/// return `false` when run again on a graph it has already processed.
pub trait Pass {
    /// Stable kebab-case name (`constant-folding`), used in statistics, errors,
    /// `--stop-after` and [`crate::OptimizeOptions::disabled`].
    fn name(&self) -> &'static str;

    /// Applies the transform; returns whether the graph changed.
    fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError>;
}

/// A borrowed pass runs as itself, so a caller can hand the [`crate::PassManager`] a
/// `&mut` to a pass and read what it recorded (e.g. a transform's summary) afterwards.
impl<P: Pass + ?Sized> Pass for &mut P {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
        (**self).run(graph)
    }
}
