#!/usr/bin/env bash
# Runs rtq's whole test suite on a fresh machine: installs the Python reference tools
# the tests compare against, checks formatting and lints, then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
