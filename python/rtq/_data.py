"""Calibration and evaluation data from Python objects.

rtq's pipeline reads its data several times (equalization, calibration, the accuracy
check, the choice of calibration method), while a generator or a DataLoader iterator
can be read once. So an iterable is consumed once, sample by sample, into a sample pack
(``.rtqpack``: the samples' ``.npy``/``.npz`` bytes back to back, then an index; the
layout is documented in rtq-calib's ``dataset/pack.rs``) in a temporary directory,
which the pipeline then streams from like the command line's ``--calib DIR``: memory
holds one sample at a time whatever the number of samples. One file appended to, not a
file per sample: creating a file costs more than calibrating on a small sample.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Callable, List, Optional, Tuple

import numpy as np

# The pack's trailer magic and the kinds of its index entries (see pack.rs).
PACK_MAGIC = b"RTQPACK1"
_NPY, _NPZ = 0, 1


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
    path: Path,
    progress: Optional[Callable[[str, int, int], None]] = None,
) -> int:
    """Writes every sample of ``samples`` into the sample pack ``path``; returns how many.

    A sample is an array (for a single-input model; a leading batch dim is kept: the
    loader splits or matches it as for ``.npy`` files) or a mapping of input name ->
    array (an ``.npz`` in the pack). Samples keep the iteration order. Each is written
    as soon as it is produced, in the producing thread (a writer thread only traded
    the GIL back and forth with the producer: measured slower).
    """
    total = len(samples) if hasattr(samples, "__len__") else 0  # type: ignore[arg-type]
    index: List[Tuple[int, int, int]] = []
    with open(path, "wb") as f:
        for count, sample in enumerate(samples, start=1):
            where = f"calibration sample {count - 1}"
            start = f.tell()
            if isinstance(sample, Mapping):
                arrays = {}
                for name, value in sample.items():
                    if not isinstance(name, str):
                        raise TypeError(f"{where}: input names must be strings, not {name!r}")
                    arrays[name] = as_array(value, f"{where}, input `{name}`")
                archive = io.BytesIO()
                np.savez(archive, **arrays)
                f.write(archive.getbuffer())
                kind = _NPZ
            else:
                write_npy(f, as_array(sample, where))
                kind = _NPY
            index.append((start, f.tell() - start, kind))
            if progress is not None:
                progress("reading calibration samples", count, max(total, count))
        for entry in index:
            f.write(struct.pack("<QQB", *entry))
        f.write(struct.pack("<Q", len(index)) + PACK_MAGIC)
    return len(index)


def write_npy(f: BinaryIO, array: np.ndarray) -> None:
    """``array`` as ``.npy`` bytes (format 1.0, C order) written to ``f``: the header,
    then the array's own buffer, without the copies ``np.save`` makes."""
    if not array.flags.c_contiguous:
        array = array.copy(order="C")
    header = "{'descr': %r, 'fortran_order': False, 'shape': %r, }" % (
        np.lib.format.dtype_to_descr(array.dtype),
        array.shape,
    )
    # Magic (6) + version (2) + length (2) + header + newline, padded to 64 bytes.
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1"))
    if array.size:
        f.write(array.data)


def is_path(value: Any) -> bool:
    """Whether ``value`` names a file or directory."""
    return isinstance(value, (str, os.PathLike))
