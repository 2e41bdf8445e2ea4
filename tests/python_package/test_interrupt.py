"""Ctrl-C cancels a long calibration: KeyboardInterrupt, promptly, nothing written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from conftest import MODEL, ROOT

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    import numpy as np
    import rtq

    # Ctrl-C raises KeyboardInterrupt even when the runner started this process with
    # SIGINT ignored (as a shell does for background jobs).
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def samples():
        rng = np.random.default_rng(0)
        for _ in range(4000):
            yield rng.standard_normal((16, 3, 32, 32), dtype=np.float32)

    sent = []
    def interrupt_once(task, done, total):
        if task.startswith("calibrating") and not sent:
            sent.append(time.perf_counter())
            os.kill(os.getpid(), signal.SIGINT)

    try:
        rtq.compile(sys.argv[1], calib=samples(), int8=True, calib_method="entropy",
                    out_dir=sys.argv[2], progress=interrupt_once)
    except KeyboardInterrupt:
        print(f"interrupted after {time.perf_counter() - sent[0]:.3f} s")
        sys.exit(3)
    print("finished")
    """
)


def test_ctrl_c_cancels_the_compile(tmp_path):
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(MODEL), str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert run.returncode == 3, run.stdout + run.stderr
    seconds = float(run.stdout.split()[2])
    assert seconds < 5.0, run.stdout
    assert not out.exists() or not any(out.iterdir())
