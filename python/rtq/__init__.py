"""rtq from Python: compile ONNX models to FP16 / INT8 (Q/DQ) ONNX and run them.

    import numpy as np, rtq

    samples = (np.random.rand(1, 3, 32, 32).astype(np.float32) for _ in range(64))
    result = rtq.compile("model.onnx", calib=samples, int8=True, out_dir="out")
    print(result.model_path, result.report["accuracy"])

    engine = rtq.Engine(result.model_path)
    outputs = engine.run({"input": np.zeros((1, 3, 32, 32), np.float32)})

A torch DataLoader feeds calibration with a one-line adapter (batches of (x, label)):

    rtq.compile("model.onnx", calib=({"input": x.numpy()} for x, _ in loader), int8=True)

Everything the command line does is here, with the same option names (``--calib-method``
is ``calib_method=``) and the same error messages, raised as :class:`RtqError` subclasses.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Tuple,
    Union,
)

import numpy as np

from . import _data, _rtq
from ._rtq import (
    AccuracyError,
    DataError,
    EngineError,
    ModelError,
    OptionsError,
    RtqError,
)

__version__: str = _rtq.__version__

__all__ = [
    "AccuracyError",
    "CompileResult",
    "DataError",
    "Engine",
    "EngineError",
    "ModelError",
    "OptionsError",
    "RtqError",
    "TensorSpec",
    "compile",
    "eval",
    "inspect",
]

ModelLike = Union[str, "os.PathLike[str]", bytes, Any]
"""A model: a path, serialized ONNX bytes, or an ``onnx.ModelProto``."""

Progress = Callable[[str, int, int], None]
"""A progress callback: ``(task, done, total)``. Raising from it cancels the work."""


@dataclass
class CompileResult:
    """What :func:`compile` wrote."""

    out_dir: Path
    """The output directory."""
    model_path: Path
    """The built model (``<name>_int8.onnx``, ``<name>_fp16.onnx``, ...)."""
    paths: List[Path]
    """Every file written (model, calibration cache, report.html, report.json, ...)."""
    report: Dict[str, Any]
    """The report (``report.json``) as a dict."""
    warnings: List[str] = field(default_factory=list)
    """The report's warnings (e.g. a missed accuracy target)."""


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output: name, NumPy dtype name, shape (None for unknown dims)."""

    name: str
    dtype: str
    shape: Optional[Tuple[Optional[int], ...]]


def _model_file(model: ModelLike, directory: Path, name: str) -> Path:
    """``model`` as a file: its path, or the bytes written into ``directory``."""
    if _data.is_path(model):
        return Path(model)
    if hasattr(model, "SerializeToString"):
        model = model.SerializeToString()
    if isinstance(model, (bytes, bytearray, memoryview)):
        path = directory / f"{name}.onnx"
        path.write_bytes(bytes(model))
        return path
    raise TypeError(
        f"model: expected a path, ONNX bytes or an onnx.ModelProto, not {type(model).__name__}"
    )


def _data_dir(
    data: Any, directory: Path, what: str, progress: Optional[Progress]
) -> Optional[Path]:
    """``data`` as something ``--calib`` reads: its path, or the iterable spooled into a
    sample pack in ``directory``."""
    if data is None:
        return None
    if _data.is_path(data):
        return Path(data)
    if isinstance(data, (np.ndarray, Mapping)):
        data = [data]
    if not isinstance(data, Iterable):
        raise TypeError(
            f"{what}: expected a directory, or an iterable of arrays or dicts of input "
            f"name -> array, not {type(data).__name__}"
        )
    pack = directory / f"{what}.rtqpack"
    if _data.spool(data, pack, progress) == 0:
        raise DataError(f"{what}: the iterable yielded no sample")
    return pack


@contextlib.contextmanager
def _samples_named(pack: Optional[Path], scratch: Path) -> Iterator[None]:
    """Errors about a sample of a pack spooled in ``scratch`` name the sample as the
    iterable produced it (``calibration sample 3: ...``), not by the temporary file."""
    try:
        yield
    except RtqError as err:
        prefix = f"{pack}{os.sep}"
        if pack is None or pack.parent != scratch or prefix not in str(err):
            raise
        raise type(err)(str(err).replace(prefix, "")) from None


def compile(  # noqa: A001 - the command's name
    model: ModelLike,
    calib: Any = None,
    *,
    int8: bool = False,
    fp8: bool = False,
    fp16: bool = False,
    calib_method: str = "auto",
    out_dir: Union[str, "os.PathLike[str]"] = "out",
    name: str = "model",
    progress: Union[Progress, bool, None] = None,
    spool_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    **options: Any,
) -> CompileResult:
    """Compiles ``model`` as ``rtq compile`` does and writes the outputs to ``out_dir``.

    Args:
        model: a path, ONNX bytes or an ``onnx.ModelProto`` (written as ``<name>.onnx``).
        calib: calibration data: a directory (as ``--calib``), or any iterable yielding
            arrays (single-input models) or dicts of input name -> array. It is read
            once, appended to one temporary sample pack (in ``spool_dir``, default the
            system's temporary directory), read from there and deleted afterwards.
        int8: quantize to INT8 with Q/DQ nodes (needs ``calib``, ``stats`` or ``calib_cache``).
        fp8: quantize to FP8 E4M3 with Q/DQ nodes instead (needs ``calib`` or ``stats``).
        fp16: convert to FP16 (with ``int8`` or ``fp8``: FP16 wherever they are not);
            ``high_precision="bf16"`` converts to BF16 instead.
        calib_method: ``auto``, ``entropy``, ``max``, ``percentile``, ``mse`` or ``per-tensor``.
        out_dir: output directory (created if missing).
        name: file stem of an in-memory model.
        progress: a callable ``(task, done, total)``; None shows bars when stderr is a
            terminal; False shows nothing. An exception it raises cancels the compile.
        **options: every other ``rtq compile`` option by its flag name with ``_``:
            ``accuracy_target="cosine=0.99"``, ``strict_accuracy=True``,
            ``exclude_nodes=[...]``, ``per_tensor_weights=True``, ``residual_add=False``,
            ``equalize=False``, ``bias_correction=False``, ``calib_samples=N``,
            ``holdout=N``, ``save_stats=path``, ``stats=[paths]``, ``calib_cache=path``,
            ``trt_version="10.1.0"``, ``input_shape=[1, 3, 224, 224]``, ``mean=[...]``,
            ``std=[...]``, ``layout="nhwc"``, ``bgr=True``, ``input_scale=1/255``,
            ``int4_weights=True``, ``int4_block_size=128``,
            ``int4_method="gptq"`` (the default; or ``"awq"``, ``"rtn"``), ...

    Returns:
        A :class:`CompileResult` with the written paths and the report.

    Raises:
        OptionsError, ModelError, DataError, RtqError: as the command line fails;
        AccuracyError: ``strict_accuracy`` and the target was missed (outputs written);
        KeyboardInterrupt: Ctrl-C (the compile stops at its next file; nothing written).
    """
    callback = progress if callable(progress) else None
    terminal = progress is None and sys.stderr is not None and sys.stderr.isatty()
    with tempfile.TemporaryDirectory(prefix="rtq-", dir=spool_dir) as scratch:
        scratch_dir = Path(scratch)
        model_path = _model_file(model, scratch_dir, name)
        calib_dir = _data_dir(calib, scratch_dir, "calib", callback)
        with _samples_named(calib_dir, scratch_dir):
            report_json = _rtq.compile(
                str(model_path),
                str(out_dir),
                None if calib_dir is None else str(calib_dir),
                dict(options, int8=int8, fp8=fp8, calib_method=calib_method, **({"fp16": True} if fp16 else {})),
                callback,
                terminal,
            )
    report = json.loads(report_json)
    paths = [Path(p) for p in report.get("outputs", [])]
    onnx_paths = [p for p in paths if p.suffix == ".onnx"]
    return CompileResult(
        out_dir=Path(out_dir),
        model_path=onnx_paths[0] if onnx_paths else paths[0],
        paths=paths,
        report=report,
        warnings=list(report.get("warnings", [])),
    )


def inspect(model: ModelLike, baseline: Optional[ModelLike] = None) -> Dict[str, Any]:
    """A model's summary (``rtq inspect --json``): interface, op counts, weight bytes
    by element type, and the precision an rtq build recorded; with ``baseline``, the
    weight bytes as a share of the baseline's."""
    with tempfile.TemporaryDirectory(prefix="rtq-") as scratch:
        path = _model_file(model, Path(scratch), "model")
        base = None if baseline is None else _model_file(baseline, Path(scratch), "baseline")
        return json.loads(_rtq.inspect(str(path), None if base is None else str(base)))


def eval(  # noqa: A001 - the command's name
    reference: ModelLike,
    candidate: ModelLike,
    data: Any,
    *,
    samples: Optional[int] = None,
    per_layer: bool = False,
    **data_options: Any,
) -> Dict[str, Any]:
    """Compares ``candidate`` against ``reference`` on ``data`` (``rtq eval --json``):
    cosine, top-1 agreement and errors per output; with ``per_layer``, every tensor both
    models compute. ``data`` is a directory or an iterable as for :func:`compile`;
    ``data_options`` are the loader's (``input_shape``, ``mean``, ``std``, ``layout``,
    ``bgr``, ``input_scale``)."""
    with tempfile.TemporaryDirectory(prefix="rtq-") as scratch:
        scratch_dir = Path(scratch)
        ref = _model_file(reference, scratch_dir, "reference")
        cand = _model_file(candidate, scratch_dir, "candidate")
        data_dir = _data_dir(data, scratch_dir, "data", None)
        if data_dir is None:
            raise DataError("data: rtq.eval needs sample data")
        with _samples_named(data_dir, scratch_dir):
            report = _rtq.eval(
                str(ref), str(cand), str(data_dir), data_options, samples, per_layer
            )
    return json.loads(report)


# Element types NumPy has no dtype for come back as their raw bits.
_RAW_BITS = {"bfloat16": np.uint16, "fp8e4m3": np.uint8, "e8m0": np.uint8, "int4": np.int8}


class Engine:
    """A model loaded for inference with rtq's runtime (``rtq-runtime``).

    ``Engine(path)`` loads an ``.onnx`` file on the CPU (``backend="cpu"``/``"auto"``)
    or, in builds with TensorRT, a ``.plan``. ``run`` releases the GIL; one engine can
    be shared by threads, whose calls run in parallel on the CPU backend.
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"], backend: str = "auto") -> None:
        self._engine = _rtq.Engine(os.fspath(path), backend)
        self.inputs: List[TensorSpec] = [_spec(s) for s in self._engine.inputs]
        """The inputs, in the model's order."""
        self.outputs: List[TensorSpec] = [_spec(s) for s in self._engine.outputs]
        """The outputs, in the model's order."""

    @property
    def description(self) -> str:
        """The backend in one line."""
        return self._engine.description

    def run(self, feeds: Union[Mapping[str, Any], np.ndarray]) -> Dict[str, np.ndarray]:
        """Runs one inference: ``feeds`` maps every input name to an array (or is the
        array of a single-input model); returns every output by name. Arrays must have
        the input's dtype (as onnxruntime asks); C-contiguous arrays are read without a
        conversion, outputs are handed over without a copy."""
        if not isinstance(feeds, Mapping):
            if len(self.inputs) != 1:
                names = ", ".join(s.name for s in self.inputs)
                raise EngineError(f"the model has {len(self.inputs)} inputs ({names}): pass a dict")
            feeds = {self.inputs[0].name: feeds}
        expected = {s.name: s for s in self.inputs}
        unknown = sorted(set(feeds) - set(expected))
        if unknown:
            raise EngineError(
                f"unknown input(s) {', '.join(unknown)}; the model's inputs: "
                + ", ".join(expected)
            )
        packed = []
        for name, value in feeds.items():
            array = _data.as_array(value, f"input `{name}`")
            want = expected[name].dtype
            if array.dtype.name != want and not (want in _RAW_BITS and array.dtype == _RAW_BITS[want]):
                raise EngineError(
                    f"input `{name}`: the model takes {want}, got {array.dtype.name} "
                    f"(convert with .astype(np.{want}))"
                )
            array = np.ascontiguousarray(array)
            packed.append((name, want, list(array.shape), array.reshape(-1).view(np.uint8)))
        results = {}
        for name, dtype, shape, raw in self._engine.run(packed):
            np_dtype = _RAW_BITS.get(dtype, dtype)
            results[name] = raw.view(np_dtype).reshape(shape)
        return results

    def __repr__(self) -> str:
        return f"rtq.Engine({self.description})"


def _spec(raw: Tuple[str, str, Optional[List[Optional[int]]]]) -> TensorSpec:
    name, dtype, shape = raw
    return TensorSpec(name, dtype, None if shape is None else tuple(shape))
