#!/usr/bin/env python3
"""Calibrating from a Python generator (``rtq.compile``) against the command line on
the same data: wall time and peak RSS, ratios printed in one run.

For each model, ``--samples`` samples (default 512) are written once as ``.npy`` files.
Then, alternating, in fresh child processes each metered like ``compare_ort.py``'s
(peak RSS from ``getrusage`` of that child alone):

* ``cli``: ``rtq compile MODEL --int8 --calib DIR --calib-method M --quiet``;
* ``python``: ``rtq.compile(MODEL, calib=<generator np.load-ing the same files one by
  one>, int8=True, calib_method=M, progress=False)`` -- interpreter start-up, the
  ``numpy`` and ``rtq`` imports and the spooling of the generator included. The time
  spent inside the generator (the user's own data loading) is also reported apart.

Both run in turn, ``--repeat`` rounds (default 5), and the fastest time and largest peak
of each are kept. The Python child also times its ``rtq.compile`` call itself (the
generator, the spooling and the compile, not the interpreter's start-up and imports).
The Python interpreter's own footprint (``import numpy, rtq`` and nothing else) is
measured too, so the peak can be read both as a whole and as growth over the idle
interpreter. Needs the package installed (``pip install .``) and ``target/release/rtq``.

    python3 bench/python_vs_cli.py --models tinyresnet,ppocr_cls --samples 512
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_ort  # noqa: E402  (the models, sample writers and meter)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PYTHON_CHILD = """
import glob, json, sys, time
import numpy as np
import rtq
model, data, out, method = sys.argv[1:5]
in_generator = 0.0
def samples():
    # The user's data pipeline; the time spent in it is kept apart.
    global in_generator
    for p in sorted(glob.glob(data + "/*.npy")):
        t = time.perf_counter()
        x = np.load(p)
        in_generator += time.perf_counter() - t
        yield x
start = time.perf_counter()
rtq.compile(model, calib=samples(), int8=True, calib_method=method, out_dir=out, progress=False)
print(json.dumps({"call_s": time.perf_counter() - start, "generator_s": in_generator}))
"""

IDLE_CHILD = "import numpy, rtq"


def best_of(runs: list[dict]) -> dict:
    """The fastest time and the largest peak of `runs` (and, for the Python child, the
    fastest `rtq.compile` call as it timed itself)."""
    failed = [r for r in runs if r["rc"] != 0]
    if failed:
        raise SystemExit(f"a run failed:\n{failed[0].get('stderr', '')[-2000:]}")
    best = {
        "wall_s": min(r["wall_s"] for r in runs),
        "maxrss_mib": max(r["maxrss_kib"] for r in runs) / 1024,
    }
    calls = [json.loads(r["stdout"].strip().splitlines()[-1])
             for r in runs if r["stdout"].strip().startswith("{")]
    if calls:
        fastest = min(calls, key=lambda c: c["call_s"])
        best["call_s"] = fastest["call_s"]
        best["generator_s"] = fastest["generator_s"]
    return best


def interleaved(commands: list[list[str]], repeat: int, timeout: float) -> list[dict]:
    """Runs the commands in turn, `repeat` rounds, so that a slow spell of a shared
    machine falls on all of them alike; the best of each (see `best_of`)."""
    runs: list[list[dict]] = [[] for _ in commands]
    for _ in range(repeat):
        for i, cmd in enumerate(commands):
            runs[i].append(compare_ort.metered(cmd, timeout))
    return [best_of(r) for r in runs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tinyresnet,ppocr_cls")
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--method", default="entropy", help="--calib-method for both")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--rtq", default=os.path.join(ROOT, "target", "release", "rtq"))
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    specs = compare_ort.model_specs(320)
    (idle,) = interleaved([[sys.executable, "-c", IDLE_CHILD]], args.repeat, args.timeout)
    print(f"idle interpreter (import numpy, rtq): peak RSS {idle['maxrss_mib']:.0f} MiB, "
          f"{idle['wall_s']:.2f} s")
    results = {"idle_python": idle, "samples": args.samples, "method": args.method, "models": {}}
    header = f"{'model':<12} {'tool':<7} {'wall s':>8} {'peak MiB':>9} {'growth MiB':>11}"
    with tempfile.TemporaryDirectory(prefix="rtq-py-bench-") as work:
        for name in args.models.split(","):
            spec = specs[name]
            if spec.path is None:
                print(f"{name}: model not found (pip install -r requirements-test.txt)")
                continue
            data = os.path.join(work, name, "data")
            compare_ort.write_samples(spec, data, args.samples, seed=1, bundled=True)
            cli, py = interleaved([
                [args.rtq, "compile", spec.path, "--int8", "--calib", data, "--calib-method",
                 args.method, "--quiet", "-o", os.path.join(work, name, "cli")],
                [sys.executable, "-c", PYTHON_CHILD, spec.path, data,
                 os.path.join(work, name, "py"), args.method],
            ], args.repeat, args.timeout)
            print(header)
            print(f"{name:<12} {'cli':<7} {cli['wall_s']:>8.2f} {cli['maxrss_mib']:>9.0f} {'':>11}")
            growth = py["maxrss_mib"] - idle["maxrss_mib"]
            print(f"{name:<12} {'python':<7} {py['wall_s']:>8.2f} {py['maxrss_mib']:>9.0f} {growth:>11.0f}")
            rtq_s = py["call_s"] - py["generator_s"]
            print(f"  python/cli: process x{py['wall_s'] / cli['wall_s']:.3f}, rtq.compile call "
                  f"({py['call_s']:.2f} s: generator, spooling, compile) "
                  f"x{py['call_s'] / cli['wall_s']:.3f}, the call less the time inside the "
                  f"generator's np.load ({py['generator_s']:.2f} s) x{rtq_s / cli['wall_s']:.3f}; "
                  f"peak RSS x{py['maxrss_mib'] / cli['maxrss_mib']:.3f}, "
                  f"growth over the idle interpreter x{growth / cli['maxrss_mib']:.3f}")
            results["models"][name] = {"cli": cli, "python": py}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
