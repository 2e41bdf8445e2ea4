#!/usr/bin/env python3
"""Latency of rtq's CPU runtime against onnxruntime's CPU provider, in one run.

For each model: the FP32 model and the INT8 Q/DQ model rtq builds from it (entropy,
calibrated on seeded random inputs: the timing, not the accuracy, is measured here),
each timed with `rtq bench` and with an onnxruntime session on the same input, the
same number of threads (RAYON_NUM_THREADS / intra_op_num_threads), a warm-up, then
median and p99 over at least `--duration` seconds, each in its own process. The timings
are taken in `--rounds` rounds, each timing every column once in turn, so that a
disturbance of the machine (a shared VM's neighbours) lands on one round rather than on
one side of a ratio; a cell is the median over the rounds of each round's median (and
p99). Prints one table per thread count with the ratios (> 1: rtq is slower; after a
ratio, its range over the rounds when there are several), then each process's peak
resident memory (rtq: `rtq bench`'s own report; onnxruntime: its Python process, whose
interpreter, numpy and onnxruntime imports are given apart as its baseline). rtq's INT8 model runs on its integer kernels
(the default); the last column times it with `--float-qdq` (Q/DQ emulated in float)
for comparison.

usage: bench/latency_ort.py [--rtq target/release/rtq] [--threads 1,2] [--duration 2]
                            [--rounds 3]
"""
import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

ort.set_default_logger_severity(3)

sys.path.insert(0, os.path.dirname(__file__))
import ocr_cls  # noqa: E402
import ocr_det  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def models():
    """(label, model path, input name, input shape) of every model that is installed."""
    out = [("bundled tinyresnet", os.path.join(ROOT, "models", "tinyresnet.onnx"), "input",
            [1, 3, 32, 32]),
           ("PP-OCR cls 48x192", ocr_cls.cls_model(), "x", [1, 3, 48, 192]),
           ("PP-OCRv4 det 320x320", ocr_det.det_model(), "x", [1, 3, 320, 320])]
    import onnx
    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                         "light_resnet50.onnx")
    if os.path.exists(light):
        out.append(("light ResNet-50 224x224", light, "gpu_0/data_0", [1, 3, 224, 224]))
    return [m for m in out if os.path.exists(m[1])]


def build_int8(rtq, model, name, shape, work):
    calib = os.path.join(work, "calib")
    os.makedirs(calib, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(8):
        np.save(os.path.join(calib, f"s{i}.npy"), rng.standard_normal(shape).astype(np.float32))
    out = os.path.join(work, "int8")
    run = subprocess.run([rtq, "compile", model, "--int8", "--calib", calib, "--calib-method",
                          "entropy", "--holdout", "0", "-o", out, "--quiet"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"rtq compile {model} failed:\n{run.stderr}")
    stem = os.path.splitext(os.path.basename(model))[0]
    return os.path.join(out, f"{stem}_int8.onnx")


def time_rtq(rtq, model, name, shape, threads, duration, extra=()):
    """(median ms, p99 ms, peak RSS MiB) of `rtq bench`."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    run = subprocess.run([rtq, "bench", model, "--backend", "cpu", "--duration", str(duration),
                          "--shapes", f"{name}:{'x'.join(map(str, shape))}", "--json", *extra],
                         capture_output=True, text=True, env=env)
    if run.returncode != 0:
        sys.exit(f"rtq bench {model} failed:\n{run.stderr}")
    report = json.loads(run.stdout)
    lat = report["latency_ms"]
    rss = (report.get("host_memory") or {}).get("peak_rss_mib", float("nan"))
    return lat["median"], lat["p99"], rss


def resident_mib():
    """(current, peak) resident memory of this process in MiB (Linux), else NaNs."""
    try:
        with open("/proc/self/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        kib = lambda k: float(fields[k].split()[0]) / 1024.0  # noqa: E731
        return kib("VmRSS"), kib("VmHWM")
    except (OSError, KeyError, ValueError):
        return float("nan"), float("nan")


def time_ort(model, name, shape, threads, duration):
    """(median ms, p99 ms, peak RSS MiB, baseline RSS MiB) of an onnxruntime session, timed
    in a child process of its own so that its memory is its own."""
    run = subprocess.run([sys.executable, os.path.abspath(__file__), "_ort", model, name,
                          ",".join(map(str, shape)), str(threads), str(duration)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"onnxruntime on {model} failed:\n{run.stderr}")
    r = json.loads(run.stdout)
    return r["median"], r["p99"], r["peak_rss_mib"], r["baseline_rss_mib"]


def ort_child(model, name, shape, threads, duration):
    baseline, _ = resident_mib()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    x = {name: np.random.default_rng(1).standard_normal(shape).astype(np.float32)}
    end = time.perf_counter() + 0.2
    while time.perf_counter() < end:
        sess.run(None, x)
    times = []
    end = time.perf_counter() + duration
    while time.perf_counter() < end or len(times) < 10:
        t = time.perf_counter()
        sess.run(None, x)
        times.append(1e3 * (time.perf_counter() - t))
    _, peak = resident_mib()
    print(json.dumps({"median": float(np.median(times)), "p99": float(np.percentile(times, 99)),
                      "peak_rss_mib": peak, "baseline_rss_mib": baseline}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rtq", default=os.path.join(ROOT, "target", "release", "rtq"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.rounds < 1:
        sys.exit("--rounds must be at least 1")
    work = tempfile.mkdtemp(prefix="rtq-latency-")
    # The built models are only needed while this process runs.
    atexit.register(shutil.rmtree, work, True)
    built = []
    for label, model, name, shape in models():
        int8 = build_int8(args.rtq, model, name, shape, os.path.join(work, str(len(built))))
        built.append((label, model, int8, name, shape))
    for threads in [int(t) for t in args.threads.split(",")]:
        print(f"\n{threads} thread(s), median (p99) ms; ratio = rtq / onnxruntime")
        print("| model | rtq FP32 | onnxruntime FP32 | ratio | rtq INT8 | onnxruntime INT8 | ratio "
              "| rtq INT8 / rtq FP32 | rtq INT8 float-emulated (--float-qdq) |\n"
              "|---|---|---|---|---|---|---|---|---|")
        memory = []
        for label, fp32, int8, name, shape in built:
            rounds = []
            for _ in range(args.rounds):
                rounds.append((
                    time_rtq(args.rtq, fp32, name, shape, threads, args.duration),
                    time_ort(fp32, name, shape, threads, args.duration),
                    time_rtq(args.rtq, int8, name, shape, threads, args.duration),
                    time_ort(int8, name, shape, threads, args.duration),
                    time_rtq(args.rtq, int8, name, shape, threads, args.duration,
                             ["--float-qdq"]),
                ))
            # Each column's median and p99 over the rounds, and its highest peak memory.
            columns = [
                (float(np.median([r[i][0] for r in rounds])),
                 float(np.median([r[i][1] for r in rounds])),
                 max(r[i][2] for r in rounds))
                for i in range(5)]
            r32, o32, r8, o8, e8 = columns
            # onnxruntime's Python baseline (its 4th figure), the lowest seen.
            baseline = min(r[i][3] for r in rounds for i in (1, 3))

            def ratio(a, b):
                """Median ratio of columns a / b, with its range over the rounds."""
                text = f"{columns[a][0] / columns[b][0]:.2f}"
                if len(rounds) > 1:
                    each = [r[a][0] / r[b][0] for r in rounds]
                    text += f" ({min(each):.2f}-{max(each):.2f})"
                return text
            cell = lambda t: f"{t[0]:.3g} ({t[1]:.3g})"  # noqa: E731
            print(f"| {label} | {cell(r32)} | {cell(o32)} | {ratio(0, 1)} | {cell(r8)} | "
                  f"{cell(o8)} | {ratio(2, 3)} | {ratio(2, 0)} | {cell(e8)} |",
                  flush=True)
            memory.append((label, r32[2], o32[2], r8[2], o8[2], baseline))
        print(f"\n{threads} thread(s), peak resident memory of each timing process, MiB "
              "(onnxruntime's includes its Python baseline, given apart)")
        print("| model | rtq FP32 | onnxruntime FP32 | rtq INT8 | onnxruntime INT8 "
              "| onnxruntime baseline (Python, numpy, onnxruntime) |\n|---|---|---|---|---|---|")
        for label, *mib in memory:
            print(f"| {label} | " + " | ".join(f"{v:.0f}" for v in mib) + " |", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_ort":
        _, _, m, n, shp, t, d = sys.argv
        ort_child(m, n, [int(v) for v in shp.split(",")], int(t), float(d))
    else:
        main()
