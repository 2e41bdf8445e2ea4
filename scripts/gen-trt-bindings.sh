#!/usr/bin/env bash
# Regenerates crates/rtq-tensorrt-sys/src/bindings.rs from shim/rtq_trt.h with bindgen
# (needs libclang: Debian/Ubuntu `apt-get install libclang-dev`). Commit the result;
# the test `bindings_fresh` fails while the committed file is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
RTQ_REGENERATE_BINDINGS=1 cargo test -p rtq-tensorrt-sys --features regenerate-bindings \
  --test bindings_fresh --locked
cargo test -p rtq-tensorrt-sys --locked
