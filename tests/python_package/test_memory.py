"""A long calibration generator is streamed: peak memory stays flat."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import MODEL

SCRIPT = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    import rtq

    def samples(n):
        rng = np.random.default_rng(0)
        for _ in range(n):
            # 64 images of 3x32x32: 768 KiB a sample.
            yield rng.standard_normal((64, 3, 32, 32), dtype=np.float32)

    n = int(sys.argv[3])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rtq.compile(sys.argv[1], calib=samples(n), int8=True, calib_method="entropy",
                out_dir=sys.argv[2], progress=False)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print((after - before) / 1024)
    """
)


def peak_growth_mib(tmp_path, n):
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(MODEL), str(tmp_path / f"out{n}"), str(n)],
        capture_output=True, text=True, timeout=900,
    )
    assert run.returncode == 0, run.stderr
    return float(run.stdout.strip())


def test_peak_memory_does_not_grow_with_the_number_of_samples(tmp_path):
    small = peak_growth_mib(tmp_path, 20)    # 15 MiB of samples
    large = peak_growth_mib(tmp_path, 400)   # 300 MiB of samples
    assert large < small + 48, f"peak grew {small:.0f} MiB for 20 samples, {large:.0f} MiB for 400"
    assert large < 150, f"peak grew {large:.0f} MiB for 300 MiB of samples"
