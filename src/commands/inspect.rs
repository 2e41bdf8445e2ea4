//! `rtq inspect`.

use anyhow::Result;
use clap::Args;
use rtq::inspect::inspect;
use std::path::PathBuf;

/// Arguments of `rtq inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The ONNX model.
    pub model: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also print the IR.
    #[arg(long)]
    pub dump_ir: bool,
    /// Compare weight bytes against this FP32 model (e.g. the source of an FP16/INT8 build).
    #[arg(long, value_name = "MODEL")]
    pub baseline: Option<PathBuf>,
}

/// Runs `rtq inspect`.
pub fn run(args: InspectArgs) -> Result<()> {
    let report = inspect(&args.model, args.baseline.as_deref())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{}  (opset {}, producer {:?})",
            report.model, report.opset, report.producer
        );
        if let Some(p) = &report.precision {
            println!("  built by rtq, precision {p}");
        }
        for (name, ty) in &report.inputs {
            println!("  input  {name}: {ty}");
        }
        for (name, ty) in &report.outputs {
            println!("  output {name}: {ty}");
        }
        println!("  {} nodes", report.nodes);
        for (op, n) in &report.ops {
            println!("    {op:<24} {n}");
        }
        println!("  weights: {} bytes", report.weight_bytes_total);
        for (dtype, n) in &report.weight_bytes {
            println!("    {dtype:<12} {n} bytes");
        }
        if let Some(r) = report.weight_ratio_vs_baseline {
            println!("  weights are {:.1}% of the baseline's", 100.0 * r);
        }
    }
    if args.dump_ir {
        let graph = rtq_frontend::load_model(&args.model)?;
        print!("{}", rtq_ir::dump(&graph));
    }
    Ok(())
}
