//! Running a pipeline of passes the way every stage of a compile does: verification
//! between passes when asked, `--dump-ir` after each pass, and `--stop-after <pass>`.

use super::{CompileOptions, StopAfter};
use rtq_ir::Graph;
use rtq_passes::{Pass, PassError, PassManager, PassStats};
use std::ops::ControlFlow;

/// How many times a stage's pipeline may repeat.
#[derive(Debug, Clone, Copy)]
pub enum Iterations {
    /// To a fixed point (the optimisation passes).
    FixedPoint,
    /// Once (transforms that apply a decision made beforehand).
    Once,
}

/// Runs `passes` on `graph`; the statistics say (`stopped_after`) whether
/// `--stop-after` stopped the pipeline.
pub fn run_passes<'a>(
    graph: &mut Graph,
    passes: Vec<Box<dyn Pass + 'a>>,
    iterations: Iterations,
    opts: &CompileOptions,
) -> Result<PassStats, PassError> {
    let mut manager = PassManager::new();
    manager
        .extend(passes)
        .verify_each(opts.optimize.verify_each);
    if let Iterations::Once = iterations {
        manager.max_iterations(1);
    }
    let dump = opts.dump_ir;
    let stop_pass = match opts.stop_after {
        Some(StopAfter::Pass(pass)) => Some(pass),
        _ => None,
    };
    manager.on_pass(move |event| {
        if dump {
            eprintln!(
                "=== after {} ===\n{}",
                event.pass,
                rtq_ir::dump(event.graph)
            );
        }
        if stop_pass == Some(event.pass) {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    manager.run(graph)
}
