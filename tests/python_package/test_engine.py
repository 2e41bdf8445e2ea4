"""rtq.Engine against onnxruntime, its interface and its errors."""

from __future__ import annotations

import threading

import numpy as np
import onnxruntime as ort
import pytest

import rtq
from conftest import MODEL, calibration_arrays


def test_interface():
    engine = rtq.Engine(MODEL)
    assert engine.inputs == [rtq.TensorSpec("input", "float32", (None, 3, 32, 32))]
    assert engine.outputs == [rtq.TensorSpec("probabilities", "float32", (None, 10))]
    assert "CPU" in engine.description


@pytest.mark.parametrize("which", ["fp32", "int8"])
def test_round_trip_matches_onnxruntime(which, int8_build):
    path = MODEL if which == "fp32" else int8_build.model_path
    engine = rtq.Engine(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for x in list(calibration_arrays())[:6]:
        (got,) = engine.run({"input": x}).values()
        expected = session.run(None, {"input": x})[0]
        assert got.dtype == np.float32 and got.shape == expected.shape
        if which == "fp32":
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
        else:
            # Float emulation of Q/DQ: a value on a rounding boundary may land one
            # quantization step away from onnxruntime's integer kernels.
            np.testing.assert_allclose(got, expected, atol=2e-3)


def test_batches_and_non_contiguous_inputs():
    engine = rtq.Engine(MODEL)
    batch = np.concatenate(list(calibration_arrays())[:4])
    whole = engine.run(batch)["probabilities"]
    assert whole.shape == (4, 10)
    # A strided view (every other sample) is made contiguous on the way in.
    strided = engine.run(batch[::2])["probabilities"]
    np.testing.assert_allclose(strided, whole[::2], rtol=1e-5, atol=1e-6)


def test_outputs_are_handed_over_without_a_copy():
    out = rtq.Engine(MODEL).run(next(calibration_arrays()))["probabilities"]
    # A view of the buffer the runtime produced, not a copy of it.
    assert not out.flags.owndata and out.base is not None
    out[0, 0] = 1.0  # writable


def test_threads_share_one_engine():
    engine = rtq.Engine(MODEL)
    xs = list(calibration_arrays())[:8]
    expected = [engine.run(x)["probabilities"] for x in xs]
    results = {}

    def worker(i):
        results[i] = [engine.run(x)["probabilities"] for x in xs]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got in results.values():
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b)


def test_errors_name_the_input():
    engine = rtq.Engine(MODEL)
    x = next(calibration_arrays())
    with pytest.raises(rtq.EngineError, match="input `input`: the model takes float32, got float64"):
        engine.run(x.astype(np.float64))
    with pytest.raises(rtq.EngineError, match="unknown input"):
        engine.run({"input": x, "extra": x})
    with pytest.raises(rtq.EngineError, match="input"):
        engine.run(np.zeros((1, 3, 16, 16), np.float32))
    with pytest.raises(rtq.EngineError):
        engine.run({})


def test_missing_file_and_unknown_backend(tmp_path):
    with pytest.raises(rtq.EngineError, match="missing.onnx"):
        rtq.Engine(tmp_path / "missing.onnx")
    with pytest.raises(rtq.EngineError):
        rtq.Engine(MODEL, backend="quantum")
    assert issubclass(rtq.EngineError, rtq.RtqError)
