"""The spool's sample pack against NumPy's reader and the layout rtq-calib reads."""

import io
import struct

import numpy as np
import pytest

from rtq import _data


@pytest.mark.parametrize(
    "array",
    [
        np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        np.arange(24, dtype=np.float64).reshape(4, 6).T,  # not C-contiguous
        np.array(3.5, dtype=np.float32),  # 0-d
        np.arange(5, dtype=np.int64),
        np.array([True, False]),
        np.zeros((1, 0, 3), dtype=np.uint8),
        np.arange(7, dtype=np.float16).reshape(7, 1),
    ],
)
def test_write_npy_reads_back(tmp_path, array):
    path = tmp_path / "a.npy"
    with open(path, "wb") as f:
        _data.write_npy(f, array)
    back = np.load(path)
    assert back.dtype == array.dtype and back.shape == array.shape
    np.testing.assert_array_equal(back, array)
    # The header is padded as numpy's own writer pads it.
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        np.lib.format.read_array_header_1_0(f) if version == (1, 0) else None
        assert f.tell() % 64 == 0


def read_pack(path):
    """The samples of a pack, parsed from its documented layout."""
    data = path.read_bytes()
    assert data[-8:] == _data.PACK_MAGIC
    (count,) = struct.unpack("<Q", data[-16:-8])
    index_at = len(data) - 16 - 17 * count
    samples = []
    for i in range(count):
        offset, length, kind = struct.unpack("<QQB", data[index_at + 17 * i:index_at + 17 * (i + 1)])
        blob = io.BytesIO(data[offset:offset + length])
        samples.append(np.load(blob) if kind == 0 else dict(np.load(blob)))
    return samples


def test_spool_writes_every_sample_in_order(tmp_path):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((1, 3, 4, 4)).astype(np.float32) for _ in range(5)]
    dicts = [{"a": a, "b": np.arange(3)} for a in arrays[:2]]
    path = tmp_path / "s.rtqpack"
    assert _data.spool(iter(arrays + dicts), path) == 7
    back = read_pack(path)
    for a, b in zip(arrays, back[:5]):
        np.testing.assert_array_equal(a, b)
    for d, b in zip(dicts, back[5:]):
        assert set(b) == {"a", "b"}
        np.testing.assert_array_equal(d["a"], b["a"])

