"""Type stubs of rtq's native module (crates/rtq-python). Use the wrappers in
``rtq`` (rtq/__init__.py): they accept models, iterables and arrays; these take paths,
option dictionaries and byte views."""

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import numpy.typing as npt

__version__: str
BUILD_REVISION: str

class RtqError(Exception):
    """Base class of every error rtq raises; the message is the command line's."""

class OptionsError(RtqError):
    """An option, or a combination of options, that cannot work."""

class ModelError(RtqError):
    """The model cannot be read, or holds what rtq cannot compile."""

class DataError(RtqError):
    """Calibration or evaluation data that does not fit the model."""

class AccuracyError(RtqError):
    """strict_accuracy: the build missed its accuracy target (its outputs are written)."""

class EngineError(RtqError):
    """Loading or running a model with rtq.Engine failed."""

def compile(
    model: str,
    out_dir: str,
    calib_dir: Optional[str],
    options: Dict[str, Any],
    progress: Optional[Callable[[str, int, int], None]] = None,
    terminal: bool = False,
) -> str:
    """Compiles ``model`` into ``out_dir``; returns the report as JSON text."""

def inspect(model: str, baseline: Optional[str] = None) -> str:
    """A model's summary as JSON text."""

def eval(
    reference: str,
    candidate: str,
    data_dir: str,
    data_options: Dict[str, Any],
    samples: Optional[int] = None,
    per_layer: bool = False,
) -> str:
    """``candidate`` against ``reference`` on the files in ``data_dir``, as JSON text."""

_Spec = Tuple[str, str, Optional[List[Optional[int]]]]
_Packed = Tuple[str, str, List[int], npt.NDArray[np.uint8]]

class Engine:
    """A loaded model (see rtq.Engine)."""

    def __init__(self, path: str, backend: str = "auto") -> None: ...
    @property
    def inputs(self) -> List[_Spec]: ...
    @property
    def outputs(self) -> List[_Spec]: ...
    @property
    def description(self) -> str: ...
    def run(self, feeds: List[_Packed]) -> List[_Packed]: ...
