#!/usr/bin/env bash
# Runs rtq's whole test suite on a fresh machine: installs the Python reference tools
# the tests compare against, checks formatting and lints, then runs every test (Rust,
# then the Python package's).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
# silero-vad's wheel ships voice-activity ONNX models with If and LSTM nodes; the tests
# need only its files (installing it would pull in torch), so it is downloaded, not installed.
python3 -m pip download --quiet --disable-pip-version-check --no-deps silero-vad==6.2.3 \
  -d target/test-wheels
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
# The TensorRT backend's Rust code type-checks without TensorRT (nothing is linked).
RTQ_TRT_CHECK_ONLY=1 cargo check -p rtq-runtime --features tensorrt,bench --all-targets --locked
# The Python package: built and installed as a user would (pip runs maturin), then its
# pytest suite (it also reads target/debug/rtq, built above, to compare error messages).
python3 -m pip install --quiet --disable-pip-version-check .
python3 -m pytest tests/python_package -q -p no:cacheprovider
# The committed TensorRT shim bindings still match their header (bindgen needs libclang,
# which the default build does not: see scripts/gen-trt-bindings.sh).
libclang=$(ldconfig -p 2>/dev/null | grep -o '/[^ ]*/libclang[-.0-9]*\.so[.0-9]*$' | head -n 1 || true)
if [ -n "$libclang" ] && [ -e "$libclang" ]; then
  cargo test -p rtq-tensorrt-sys --features regenerate-bindings --test bindings_fresh --locked
else
  echo "bindings_fresh: skipped (no libclang; apt-get install libclang-dev to run it)"
fi
