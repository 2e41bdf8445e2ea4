#!/usr/bin/env python3
"""Labeled accuracy benchmark: PP-OCR v2 cls (text direction, 0 or 180 degrees) on
rendered text lines, half of them turned upside down.

Calibrates rtq on some lines and classifies others through onnxruntime: accuracy
against the known rotation for FP32, each rtq INT8 method, rtq's default (`auto`) and
onnxruntime's quantize_static, printed as one table. Lines are rendered as in
bench/ocr_rec.py.

usage: bench/ocr_cls.py [--rtq target/release/rtq] [--calib 48] [--eval 400] [--seed 1]
"""
import os

import numpy as np
from PIL import Image

import ocr_rec

H, W = 48, 192


def cls_model():
    import rapidocr_onnxruntime
    return os.path.join(os.path.dirname(rapidocr_onnxruntime.__file__), "models",
                        "ch_ppocr_mobile_v2.0_cls_infer.onnx")


def sample(rng, chars):
    """One rendered line resized to the classifier's 48x192 input, and its label
    (1: turned 180 degrees)."""
    line = ocr_rec.render(ocr_rec.random_text(rng, chars), rng)[0, 0]  # 48x320 in [-1, 1]
    used = int((np.abs(line - line[:, -1:]).max(axis=0) > 0).nonzero()[0].max(initial=0)) + 9
    img = Image.fromarray(((line[:, :used] * 0.5 + 0.5) * 255).astype(np.uint8))
    flipped = bool(rng.integers(2))
    if flipped:
        img = img.rotate(180)
    w = min(W, max(1, round(img.width * H / img.height)))
    img = img.resize((w, H), Image.BILINEAR)
    x = np.zeros((H, W), dtype=np.float32)
    x[:, :w] = (np.asarray(img, dtype=np.float32) / 255.0 - 0.5) / 0.5
    return np.repeat(x[None, None], 3, axis=1), int(flipped)


def accuracy(model, samples):
    sess, name = ocr_rec.session(model)
    hits = sum(int(sess.run(None, {name: x})[0].argmax()) == y for x, y in samples)
    return hits / len(samples)


def main():
    args = ocr_rec.bench_args(calib=48, eval_=400, seed=1)
    model = cls_model()
    chars = ocr_rec.font_chars(ocr_rec.dictionary(ocr_rec.rec_model()))
    rng = np.random.default_rng(args.seed)
    samples = [sample(rng, chars) for _ in range(args.calib + args.eval)]
    calib, held = samples[:args.calib], samples[args.calib:]
    rows = ocr_rec.build_from(args, model, [x for x, _ in calib])
    print(f"PP-OCR v2 cls, {args.calib} calibration lines, {len(held)} held-out lines "
          f"(half turned 180 degrees, seed {args.seed})")
    print("| build | direction accuracy |\n|---|---|")
    for label, path in rows:
        acc = accuracy(path, held)
        print(f"| {label} | {100 * acc:.2f}% ±{ocr_rec.interval(acc, len(held)):.1f} |", flush=True)


if __name__ == "__main__":
    main()
