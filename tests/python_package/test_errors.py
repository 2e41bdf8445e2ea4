"""Failures raise rtq.RtqError subclasses carrying the command line's messages, and
write nothing."""

from __future__ import annotations

import numpy as np
import pytest

import rtq
from conftest import CALIB, MODEL, calibration_arrays, cli_error


def test_hierarchy():
    for cls in (rtq.OptionsError, rtq.ModelError, rtq.DataError, rtq.AccuracyError, rtq.EngineError):
        assert issubclass(cls, rtq.RtqError) and issubclass(cls, Exception)


def test_int8_without_data_is_an_options_error_with_the_cli_message(tmp_path):
    with pytest.raises(rtq.OptionsError) as err:
        rtq.compile(MODEL, int8=True, out_dir=tmp_path / "out", progress=False)
    assert str(err.value) == cli_error("compile", str(MODEL), "--int8", "-o", str(tmp_path / "cli"))
    assert not (tmp_path / "out").exists()


def test_unknown_option_and_bad_values(tmp_path):
    with pytest.raises(rtq.OptionsError, match="unknown option `calib_methd`"):
        rtq.compile(MODEL, out_dir=tmp_path, calib_methd="max")
    with pytest.raises(rtq.OptionsError, match="calib_method"):
        rtq.compile(MODEL, calib=CALIB, int8=True, calib_method="kl", out_dir=tmp_path)
    with pytest.raises(rtq.OptionsError, match="accuracy_target"):
        rtq.compile(MODEL, fp16=True, accuracy_target="cosine=lots", out_dir=tmp_path)
    with pytest.raises(rtq.OptionsError, match="holdout"):
        rtq.compile(MODEL, fp16=True, holdout="two", out_dir=tmp_path)


def test_a_broken_model_is_a_model_error_with_the_cli_message(tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x08\x07\x12\x03not an onnx model")
    with pytest.raises(rtq.ModelError) as err:
        rtq.compile(bad, fp16=True, out_dir=tmp_path / "out", progress=False)
    assert str(err.value) == cli_error("compile", str(bad), "--fp16", "-o", str(tmp_path / "cli"))
    assert "broken.onnx" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_samples_that_do_not_fit_are_a_data_error(tmp_path):
    wrong = (np.zeros((1, 3, 16, 16), np.float32) for _ in range(4))
    with pytest.raises(rtq.DataError, match="input `input`") as err:
        rtq.compile(MODEL, calib=wrong, int8=True, out_dir=tmp_path / "out", progress=False)
    # Named as the iterable's sample, not as the temporary pack holding it.
    assert "caused by: calibration sample 0: shape [1,3,16,16]" in str(err.value), err.value
    assert not (tmp_path / "out").exists()
    with pytest.raises(rtq.DataError, match="yielded no sample"):
        rtq.compile(MODEL, calib=iter(()), int8=True, out_dir=tmp_path / "out")
    with pytest.raises(TypeError, match="calibration sample 1"):
        rtq.compile(MODEL, calib=[np.zeros((1, 3, 32, 32), np.float32), "text?"], int8=True,
                    out_dir=tmp_path / "out")


def test_missed_strict_target_writes_outputs_then_raises(tmp_path):
    with pytest.raises(rtq.AccuracyError, match="strict_accuracy") as err:
        rtq.compile(MODEL, calib=calibration_arrays(), int8=True, calib_method="max",
                    accuracy_target="cosine=1.0,top1=1.0", strict_accuracy=True,
                    out_dir=tmp_path, progress=False)
    assert str(tmp_path) in str(err.value)
    assert (tmp_path / "tinyresnet_int8.onnx").is_file() and (tmp_path / "report.json").is_file()


def test_a_raising_progress_callback_cancels_and_its_exception_propagates(tmp_path):
    class Stop(Exception):
        pass

    def stop(task, done, total):
        if task.startswith("calibrating"):
            raise Stop(task)

    with pytest.raises(Stop):
        rtq.compile(MODEL, calib=calibration_arrays(), int8=True, out_dir=tmp_path / "out", progress=stop)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
