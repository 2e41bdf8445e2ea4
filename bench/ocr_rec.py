#!/usr/bin/env python3
"""Labeled accuracy benchmark: PP-OCRv4 rec on rendered text lines.

Renders text lines (DejaVu fonts, random words of Latin letters and digits from the
model's own dictionary, leaving out glyphs that look alike such as I/l/1 and O/0), calibrates rtq on some,
and reads the others back with CTC greedy decoding through onnxruntime: line accuracy
(exact match) and character error rate for FP32, each rtq INT8 method, rtq's default
(`auto`) and onnxruntime's quantize_static, printed as one table.

usage: bench/ocr_rec.py [--rtq target/release/rtq] [--calib 48] [--eval 200] [--seed 0]
"""
import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from PIL import Image, ImageDraw, ImageFont

H, W = 48, 320
FONTS = ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
         "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
         "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"]


def rec_model():
    import rapidocr_onnxruntime
    return os.path.join(os.path.dirname(rapidocr_onnxruntime.__file__), "models",
                        "ch_PP-OCRv4_rec_infer.onnx")


def dictionary(model):
    meta = {p.key: p.value for p in onnx.load(model, load_external_data=False).metadata_props}
    # Index 0 is the CTC blank; the last class is a space.
    return ["<blank>"] + meta["character"].split("\n") + [" "]


def random_text(rng, chars):
    # Without glyphs a font draws alike (I/l/1, O/0/o), which no reader can tell apart.
    latin = "abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
    words = []
    for _ in range(rng.integers(1, 4)):
        words.append("".join(rng.choice([c for c in latin if c in chars], rng.integers(2, 8))))
    return " ".join(words)


def render(text, rng):
    font = ImageFont.truetype(FONTS[rng.integers(len(FONTS))], int(rng.integers(26, 34)))
    left, top, right, bottom = font.getbbox(text)
    img = Image.new("L", (right - left + 16, H), color=int(rng.integers(200, 256)))
    ImageDraw.Draw(img).text((8 - left, (H - (bottom - top)) // 2 - top), text,
                             fill=int(rng.integers(0, 60)), font=font)
    w = min(W, max(1, round(img.width * H / img.height)))
    img = img.resize((w, H), Image.BILINEAR)
    x = np.full((H, W), 0.0, dtype=np.float32)
    x[:, :w] = (np.asarray(img, dtype=np.float32) / 255.0 - 0.5) / 0.5
    return np.repeat(x[None, None], 3, axis=1)


def decode(probs, chars):
    ids = probs.argmax(-1)[0]
    out, prev = [], 0
    for i in ids:
        if i != prev and i != 0:
            out.append(chars[i] if i < len(chars) else "")
        prev = i
    return "".join(out).strip()


def cer(ref, hyp):
    d = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, d[0] = d[0], i
        for j, h in enumerate(hyp, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r != h))
    return d[len(hyp)] / max(1, len(ref))


def interval(p, n):
    """Half-width, in points, of the normal-approximation 95% interval of a share `p`
    measured on `n` samples (how far apart two builds must be to tell them apart)."""
    return 196 * (max(p * (1 - p), 1 / n) / n) ** 0.5


def session(model):
    """An onnxruntime CPU session that runs the graph as written (no graph rewrites),
    and the name of its input."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    return sess, sess.get_inputs()[0].name


def score(model, samples, chars):
    sess, name = session(model)
    exact, errors = 0, 0.0
    for x, text in samples:
        hyp = decode(sess.run(None, {name: x})[0], chars)
        exact += hyp == text
        errors += cer(text, hyp)
    return exact / len(samples), errors / len(samples)


METHODS = ["auto", "entropy", "max", "percentile", "mse"]


def describe_choice(report_path):
    """Prints (stderr) the ranges and fallback `auto` chose, and the remedies' cost."""
    import json
    with open(report_path) as f:
        report = json.load(f)
    check = report.get("accuracy_check") or {}
    reverted = len(check.get("fallback", []))
    planned = (report.get("quantization") or {}).get("quantized_nodes", 0) + reverted
    int4 = report.get("passes", {}).get("int4_weights")
    if int4 is not None:
        planned = len(int4.get("layers", [])) + reverted
    trials = ", ".join(f"{t['method']} {t['margin']:+.4f}" for t in check.get("method_search", []))
    seconds = sum(t for _, t in report.get("timings", []))
    print(f"auto: ranges {check.get('method')}, {reverted} of {planned} quantized node(s) "
          f"reverted; search [{trials}]; {seconds:.1f} s", file=sys.stderr)


def build_all(rtq, model, calib, input_name, no_ort, methods=METHODS):
    """Compiles `model` with each of rtq's INT8 `methods` (and onnxruntime's quantizer
    unless `no_ort`) on the `calib` arrays; returns (label, model path) rows, FP32
    first. Says on stderr what `auto` chose."""
    work = tempfile.mkdtemp(prefix="rtq-ocr-")
    # The built models are only needed while this process runs.
    atexit.register(shutil.rmtree, work, True)
    calib_dir = os.path.join(work, "calib")
    os.makedirs(calib_dir)
    for i, x in enumerate(calib):
        np.save(os.path.join(calib_dir, f"line_{i:03d}.npy"), x)
    stem = os.path.splitext(os.path.basename(model))[0]
    rows = [("FP32", model)]
    for method in methods:
        out = os.path.join(work, method.replace("+", "_").replace(":", "_"))
        # `fp8` / `fp8+fp16` (`:METHOD` names a calibrator): FP8 E4M3 builds, by default
        # with `auto`; others: INT8.
        if method.startswith("fp8"):
            precision, _, calibrator = method.partition(":")
            flags = ["--fp8"] + (["--fp16"] if precision.endswith("+fp16") else [])
            flags += ["--calib-method", calibrator] if calibrator else []
            label = "rtq FP8 " + (calibrator or "default (auto)")
            label += ", FP16 elsewhere" if "fp16" in precision else ""
            suffix = "_fp8_fp16" if "fp16" in precision else "_fp8"
        elif method.startswith("int4w"):
            precision, _, int4_method = method.partition(":")
            flags = ["--int4-weights"] + (["--fp16"] if precision.endswith("+fp16") else [])
            flags += ["--int4-method", int4_method] if int4_method else []
            label = f"rtq INT4 weight-only ({(int4_method or 'default').upper()})"
            label += ", FP16 elsewhere" if "fp16" in precision else ""
            suffix = "_int4w_fp16" if "fp16" in precision else "_int4w"
        else:
            flags = ["--int8", "--calib-method", method]
            label = "rtq INT8 default (auto)" if method == "auto" else f"rtq INT8 {method}"
            suffix = "_int8"
        run = subprocess.run([rtq, "compile", model, *flags, "--calib", calib_dir,
                              "-o", out, "--quiet"],
                             capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"rtq ({method}) failed:\n{run.stderr}")
        if method in ("auto", "fp8") or method.startswith("int4w"):
            describe_choice(os.path.join(out, "report.json"))
        rows.append((label, os.path.join(out, f"{stem}{suffix}.onnx")))
    if not no_ort:
        from onnxruntime.quantization import (CalibrationDataReader, QuantFormat,
                                              QuantType, quantize_static)

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.it = iter([{input_name: x} for x in calib])

            def get_next(self):
                return next(self.it, None)

        ort_out = os.path.join(work, "ort_int8.onnx")
        quantize_static(model, ort_out, Reader(), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QInt8,
                        weight_type=QuantType.QInt8,
                        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})
        rows.append(("onnxruntime quantize_static (QDQ, symmetric, per-channel)", ort_out))
    return rows


def bench_args(calib, eval_, seed):
    """The command line the labeled benchmarks share, with their own defaults."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rtq", default="target/release/rtq")
    ap.add_argument("--calib", type=int, default=calib)
    ap.add_argument("--eval", type=int, default=eval_)
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--no-ort", action="store_true", help="skip onnxruntime's quantizer")
    ap.add_argument("--methods", default=",".join(METHODS),
                    help="rtq INT8 methods to build, comma separated; `fp8` and `fp8+fp16` "
                         "add FP8 E4M3 builds (`fp8:METHOD` names the calibrator), `int4w` "
                         "and `int4w+fp16` INT4 weight-only builds (`int4w+fp16:gptq` names "
                         "the INT4 method)")
    return ap.parse_args()


def font_chars(chars):
    """The single ASCII letters and digits of a dictionary, which DejaVu draws."""
    return [c for c in chars[1:-1] if len(c) == 1 and c.isascii() and c.isalnum()]


def build_from(args, model, calib):
    """`build_all` for the parsed benchmark arguments and calibration arrays."""
    return build_all(args.rtq, model, calib, "x", args.no_ort, args.methods.split(","))


def main():
    args = bench_args(calib=48, eval_=200, seed=0)
    model = rec_model()
    chars = dictionary(model)
    rng = np.random.default_rng(args.seed)
    lines = [random_text(rng, font_chars(chars)) for _ in range(args.calib + args.eval)]
    samples = [(render(t, rng), t) for t in lines]
    calib, held = samples[:args.calib], samples[args.calib:]
    rows = build_from(args, model, [x for x, _ in calib])
    print(f"PP-OCRv4 rec, {args.calib} calibration lines, {len(held)} held-out lines (seed {args.seed})")
    print(f"| build | lines read exactly | character error rate |\n|---|---|---|")
    for label, path in rows:
        acc, err = score(path, held, chars)
        print(f"| {label} | {100 * acc:.1f}% ±{interval(acc, len(held)):.1f} | {100 * err:.2f}% |",
              flush=True)


if __name__ == "__main__":
    main()
