"""Shared fixtures of the `rtq` Python package's tests (run by scripts/test.sh after
`pip install .`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "tinyresnet.onnx"
CALIB = ROOT / "calibration"


def calibration_arrays():
    """The bundled calibration samples, as a generator of arrays (read one at a time)."""
    for path in sorted(CALIB.glob("*.npy")):
        yield np.load(path)


def rtq_cli() -> Path:
    """The command-line binary of this checkout (built by `cargo test` or `cargo build`)."""
    override = os.environ.get("RTQ_BIN")
    candidates = [Path(override)] if override else []
    candidates += [ROOT / "target" / "debug" / "rtq", ROOT / "target" / "release" / "rtq"]
    for path in candidates:
        if path.is_file():
            return path
    pytest.skip("no rtq binary: run `cargo build` first (or set RTQ_BIN)")


def cli_error(*args: str) -> str:
    """The message `rtq` prints after `error: ` for a failing command."""
    run = subprocess.run([str(rtq_cli()), *args], capture_output=True, text=True)
    assert run.returncode != 0, run.stdout
    first = run.stderr.index("error: ")
    return run.stderr[first + len("error: "):].rstrip("\n")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


@pytest.fixture(scope="session")
def fp32_session():
    import onnxruntime as ort

    return ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="session")
def int8_build(tmp_path_factory):
    """One INT8 build of the bundled model from a generator, shared by the tests that
    only read it."""
    import rtq

    out = tmp_path_factory.mktemp("int8")
    return rtq.compile(MODEL, calib=calibration_arrays(), int8=True, out_dir=out, progress=False)
