//! Records build facts for `rtq --version` and reports, and checks the `tensorrt`
//! feature's prerequisites early with a message that says what to set.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TENSORRT_ROOT");
    let revision = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=RTQ_GIT_REVISION={revision}");
    // Rebuild the revision string when HEAD moves (a commit, a checkout).
    for path in git_head_files() {
        println!("cargo:rerun-if-changed={path}");
    }

    let features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| {
            k.strip_prefix("CARGO_FEATURE_")
                .map(|f| f.to_lowercase().replace('_', "-"))
        })
        .collect();
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(",")
    };
    println!("cargo:rustc-env=RTQ_FEATURES={features}");

    if std::env::var_os("CARGO_FEATURE_TENSORRT").is_some() {
        match std::env::var_os("TENSORRT_ROOT") {
            Some(root) if std::path::Path::new(&root).join("include/NvInfer.h").exists() => {}
            Some(root) => panic!(
                "feature `tensorrt`: TENSORRT_ROOT={} has no include/NvInfer.h; point it at a TensorRT 10 or 11 install",
                std::path::Path::new(&root).display()
            ),
            None => panic!(
                "feature `tensorrt` needs TensorRT: set TENSORRT_ROOT to a directory with include/NvInfer.h and lib/libnvinfer.so (and CUDA_HOME for the CUDA headers)"
            ),
        }
    }
}

/// The files whose change means HEAD names another commit: `HEAD` itself, the branch
/// it points to, and `packed-refs` (those that exist).
fn git_head_files() -> Vec<String> {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_string())
    };
    let mut refs = vec!["HEAD".to_string(), "packed-refs".to_string()];
    refs.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    refs.iter()
        .filter_map(|r| git(&["rev-parse", "--git-path", r]))
        .filter(|p| std::path::Path::new(p).exists())
        .collect()
}
