"""rtq.compile from Python objects: generators, in-memory models, options, progress."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import rtq
from conftest import CALIB, MODEL, calibration_arrays, cosine


def run_ort(path, x):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def test_int8_from_a_generator_matches_fp32_in_onnxruntime(int8_build, fp32_session):
    result = int8_build
    assert result.model_path.name == "tinyresnet_int8.onnx"
    assert result.model_path.is_file()
    names = {p.name for p in result.paths}
    assert {"tinyresnet_int8.onnx", "tinyresnet_calibration.cache", "report.html", "report.json"} <= names
    assert all(p.is_file() for p in result.paths)
    assert result.report["precision"] == "int8"
    assert result.report == json.loads((result.out_dir / "report.json").read_text())
    assert result.warnings == []
    onnx.checker.check_model(str(result.model_path), full_check=True)
    ops = {n.op_type for n in onnx.load(str(result.model_path)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    for x in list(calibration_arrays())[:8]:
        expected = fp32_session.run(None, {"input": x})[0]
        assert cosine(run_ort(result.model_path, x), expected) > 0.99


def test_generator_and_directory_give_the_same_model(int8_build, tmp_path):
    from_dir = rtq.compile(MODEL, calib=CALIB, int8=True, out_dir=tmp_path, progress=False)
    assert from_dir.model_path.read_bytes() == int8_build.model_path.read_bytes()


def test_in_memory_model_proto_and_dict_samples(tmp_path, fp32_session):
    proto = onnx.load(str(MODEL))
    samples = ({"input": x} for x in calibration_arrays())
    result = rtq.compile(
        proto, calib=samples, int8=True, fp16=True, name="tiny", out_dir=tmp_path,
        calib_method="entropy", progress=False,
    )
    assert result.model_path.name == "tiny_int8_fp16.onnx"
    assert result.report["precision"] == "int8+fp16"
    x = next(calibration_arrays())
    assert cosine(run_ort(result.model_path, x), fp32_session.run(None, {"input": x})[0]) > 0.99


def test_fp8_from_a_generator_runs_in_the_engine(tmp_path, fp32_session):
    result = rtq.compile(MODEL, calib=calibration_arrays(), fp8=True, fp16=True,
                         out_dir=tmp_path, progress=False)
    assert result.model_path.name == "tinyresnet_fp8_fp16.onnx"
    assert result.report["precision"] == "fp8+fp16"
    assert not any(p.suffix == ".cache" for p in result.paths)
    onnx.checker.check_model(str(result.model_path), full_check=True)
    engine = rtq.Engine(result.model_path)
    for x in list(calibration_arrays())[:4]:
        expected = fp32_session.run(None, {"input": x})[0]
        assert cosine(engine.run({"input": x})["probabilities"], expected) > 0.99
    with pytest.raises(rtq.OptionsError, match="--int8 and --fp8"):
        rtq.compile(MODEL, calib=CALIB, int8=True, fp8=True, out_dir=tmp_path / "x",
                    progress=False)


def test_bytes_model_fp16_without_data(tmp_path):
    result = rtq.compile(MODEL.read_bytes(), fp16=True, out_dir=tmp_path, progress=False)
    assert result.model_path.name == "model_fp16.onnx"
    summary = rtq.inspect(result.model_path, baseline=MODEL)
    assert summary["precision"] == "fp16"
    assert 0.45 < summary["weight_ratio_vs_baseline"] < 0.55


def test_options_reach_the_pipeline(tmp_path):
    result = rtq.compile(
        MODEL, calib=calibration_arrays(), int8=True, out_dir=tmp_path, progress=False,
        calib_method="max", per_tensor_weights=True, trt_version="8.6.1",
        exclude_nodes=["stem*"], holdout=2,
    )
    cache = (tmp_path / "tinyresnet_calibration.cache").read_text()
    assert cache.startswith("TRT-8601-")
    assert result.report["quantization"]["method"] == "max"
    model = onnx.load(str(result.model_path))
    dq_outputs = {n.output[0] for n in model.graph.node if n.op_type == "DequantizeLinear"}
    stem = [n for n in model.graph.node if n.name.startswith("stem") and n.op_type == "Conv"]
    assert stem and not any(i in dq_outputs for n in stem for i in n.input), "stem was excluded"
    others = [n for n in model.graph.node if n.op_type == "Conv" and n not in stem]
    assert any(i in dq_outputs for n in others for i in n.input), "the other convs are quantized"


def test_torch_style_batches_and_batched_arrays(tmp_path):
    """A DataLoader's batches: arrays with a batch of 4 (the model's batch is dynamic)."""
    arrays = list(calibration_arrays())
    batches = (np.concatenate(arrays[i:i + 4]) for i in range(0, len(arrays) - 3, 4))
    result = rtq.compile(MODEL, calib=batches, int8=True, calib_method="entropy",
                         out_dir=tmp_path, progress=False)
    assert result.report["quantization"]["samples"] > 0


def test_progress_callback_hears_calibration_and_stages(tmp_path):
    events = []
    rtq.compile(MODEL, calib=calibration_arrays(), int8=True, calib_method="entropy",
                out_dir=tmp_path, progress=lambda task, done, total: events.append((task, done, total)))
    tasks = {task for task, _, _ in events}
    assert "reading calibration samples" in tasks
    assert any(t.startswith("calibrating") for t in tasks), tasks
    assert {"stage:load", "stage:optimize"} <= tasks, tasks
    calib = [(d, t) for task, d, t in events if task.startswith("calibrating")]
    assert calib[-1][0] == calib[-1][1] and [d for d, _ in calib] == sorted(d for d, _ in calib)


def test_eval_from_a_generator(int8_build):
    report = rtq.eval(MODEL, int8_build.model_path, calibration_arrays(), per_layer=True)
    (output,) = report["outputs"]
    assert output["output"] == "probabilities" and output["cosine_mean"] > 0.99
    assert report["per_layer"]
