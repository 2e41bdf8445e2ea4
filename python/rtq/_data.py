"""Calibration and evaluation data from Python objects.

rtq's pipeline reads its data several times (equalization, calibration, the accuracy
check, the choice of calibration method), while a generator or a DataLoader iterator
can be read once. So an iterable is consumed once, sample by sample, into ``.npy`` /
``.npz`` files in a temporary directory, which the pipeline then streams from like the
command line's ``--calib DIR``: memory holds one sample at a time whatever the number
of samples.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
import threading
from queue import Queue
from typing import Any, Callable, List, Optional, Tuple

import numpy as np


def as_array(value: Any, where: str) -> np.ndarray:
    """A NumPy array from an array, a CPU torch tensor or anything with ``__array__``."""
    if hasattr(value, "detach") and hasattr(value, "cpu") and hasattr(value, "numpy"):
        value = value.detach().cpu().numpy()  # a torch.Tensor, without importing torch
    try:
        array = np.asarray(value)
    except Exception as err:  # noqa: BLE001 - any conversion failure is the same mistake
        raise TypeError(f"{where}: cannot be read as an array ({err})") from err
    if array.dtype.kind not in "biuf":
        raise TypeError(
            f"{where}: a {type(value).__name__} of {array.dtype} is not a numeric array; "
            "yield NumPy arrays, or dicts of input name -> array"
        )
    return array


def spool(
    samples: Iterable[Any],
    directory: Path,
    progress: Optional[Callable[[str, int, int], None]] = None,
) -> int:
    """Writes every sample of ``samples`` into ``directory``; returns how many.

    A sample is an array (for a single-input model; a leading batch dim is kept: the
    loader splits or matches it as for ``.npy`` files) or a mapping of input name ->
    array (written as one ``.npz``). File names keep the iteration order. Files are
    written by a second thread while the iterable produces the next samples (at most
    ``_QUEUE_DEPTH`` samples wait in memory).
    """
    total = len(samples) if hasattr(samples, "__len__") else 0  # type: ignore[arg-type]
    queue: "Queue[Optional[Tuple[Path, Any]]]" = Queue(maxsize=_QUEUE_DEPTH)
    failure: List[BaseException] = []

    def writer() -> None:
        while True:
            item = queue.get()
            if item is None:
                return
            if not failure:
                try:
                    _write(*item)
                except BaseException as err:  # noqa: BLE001 - raised again by the producer
                    failure.append(err)

    thread = threading.Thread(target=writer, name="rtq-spool", daemon=True)
    thread.start()
    count = 0
    try:
        for count, sample in enumerate(samples, start=1):
            if failure:
                break
            where = f"calibration sample {count - 1}"
            stem = directory / f"{count - 1:09d}"
            if isinstance(sample, Mapping):
                arrays = {}
                for name, value in sample.items():
                    if not isinstance(name, str):
                        raise TypeError(f"{where}: input names must be strings, not {name!r}")
                    arrays[name] = as_array(value, f"{where}, input `{name}`")
                queue.put((stem.with_suffix(".npz"), arrays))
            else:
                queue.put((stem.with_suffix(".npy"), as_array(sample, where)))
            if progress is not None:
                progress("reading calibration samples", count, max(total, count))
    finally:
        queue.put(None)
        thread.join()
    if failure:
        raise failure[0]
    return count


# Samples produced but not yet written: the spool's memory bound.
_QUEUE_DEPTH = 4


def _write(path: Path, data: Any) -> None:
    """One sample file: an ``.npz`` of a dict of arrays, or an ``.npy``."""
    with open(path, "wb") as f:
        if isinstance(data, dict):
            np.savez(f, **data)
        else:
            np.save(f, data, allow_pickle=False)


def is_path(value: Any) -> bool:
    """Whether ``value`` names a file or directory."""
    return isinstance(value, (str, os.PathLike))
