#!/usr/bin/env python3
"""Labeled accuracy benchmark: PP-OCRv4 det on rendered pages with known text boxes.

Each 320x320 page holds 3 to 6 lines of random words (DejaVu fonts, random sizes and
positions, no overlaps); their boxes are the ground truth. The detector's probability
map is thresholded (0.3), its connected components become boxes, grown back by the
DB "unclip" offset (area * ratio / perimeter, the ratio fitted once to the FP32 model's
boxes on the calibration pages: the rendered boxes are tight around the glyphs, so
DB's default 1.5 would leave most boxes near IoU 0.5, where any change flips a match),
and matched one-to-one to the true boxes at IoU >= 0.5: recall and precision for FP32,
each rtq INT8 method, rtq's default (`auto`) and onnxruntime's quantize_static, and
the share of the FP32 model's boxes each build keeps (matched at IoU >= 0.5), printed
as one table.

usage: bench/ocr_det.py [--rtq target/release/rtq] [--calib 32] [--eval 100] [--seed 2]
"""
import os

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from scipy import ndimage

import ocr_rec

S = 320
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def det_model():
    import rapidocr_onnxruntime
    return os.path.join(os.path.dirname(rapidocr_onnxruntime.__file__), "models",
                        "ch_PP-OCRv4_det_infer.onnx")


def page(rng, chars):
    """A rendered page (1x3xSxS, normalised) and its text boxes (x0, y0, x1, y1)."""
    img = Image.new("RGB", (S, S), tuple(int(v) for v in rng.integers(215, 256, 3)))
    draw = ImageDraw.Draw(img)
    boxes = []
    for _ in range(50):
        if len(boxes) >= rng.integers(3, 7):
            break
        font = ImageFont.truetype(ocr_rec.FONTS[rng.integers(len(ocr_rec.FONTS))],
                                  int(rng.integers(16, 30)))
        text = ocr_rec.random_text(rng, chars)
        left, top, right, bottom = font.getbbox(text)
        w, h = right - left, bottom - top
        if w >= S - 20:
            continue
        x, y = int(rng.integers(8, S - w - 8)), int(rng.integers(8, S - h - 8))
        box = (x, y, x + w, y + h)
        if any(not (box[2] + 6 < b[0] or b[2] + 6 < box[0] or box[3] + 6 < b[1]
                    or b[3] + 6 < box[1]) for b in boxes):
            continue
        draw.text((x - left, y - top), text, fill=tuple(int(v) for v in rng.integers(0, 70, 3)),
                  font=font)
        boxes.append(box)
    x = (np.asarray(img, dtype=np.float32) / 255.0 - MEAN) / STD
    return x.transpose(2, 0, 1)[None].copy(), boxes


RATIOS = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5]


def detect(prob, ratio):
    """Boxes from a DB probability map, grown by `ratio` * area / perimeter."""
    labels, n = ndimage.label(prob > 0.3)
    boxes = []
    for sl in ndimage.find_objects(labels):
        y0, y1, x0, x1 = sl[0].start, sl[0].stop, sl[1].start, sl[1].stop
        w, h = x1 - x0, y1 - y0
        if w * h < 10:
            continue
        d = w * h * ratio / (2 * (w + h))
        boxes.append((x0 - d, y0 - d, x1 + d, y1 + d))
    return boxes


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def probability_maps(model, pages):
    sess, name = ocr_rec.session(model)
    return [sess.run(None, {name: x})[0][0, 0] for x, _ in pages]


def matches(truth, pred):
    """How many `truth` boxes match a `pred` box one-to-one at IoU >= 0.5."""
    used, found = set(), 0
    for b in truth:
        best = max(((iou(b, p), i) for i, p in enumerate(pred) if i not in used),
                   default=(0.0, -1))
        if best[0] >= 0.5:
            used.add(best[1])
            found += 1
    return found


def fit_ratio(maps, pages):
    """The unclip ratio whose boxes overlap the true ones most (mean best IoU)."""
    def fit(ratio):
        ious = [max([iou(b, p) for p in detect(m, ratio)], default=0.0)
                for m, (_, boxes) in zip(maps, pages) for b in boxes]
        return sum(ious) / max(1, len(ious))
    return max(RATIOS, key=fit)


def score(maps, pages, ratio, reference=None):
    """Recall and precision against the true boxes, and the share of `reference`'s
    boxes (FP32's) found again."""
    found = truth = predicted = kept = ref_total = 0
    for i, (m, (_, boxes)) in enumerate(zip(maps, pages)):
        pred = detect(m, ratio)
        found += matches(boxes, pred)
        truth += len(boxes)
        predicted += len(pred)
        if reference is not None:
            ref = detect(reference[i], ratio)
            kept += matches(ref, pred)
            ref_total += len(ref)
    return found / truth, found / max(1, predicted), kept / max(1, ref_total)


def main():
    args = ocr_rec.bench_args(calib=32, eval_=100, seed=2)
    model = det_model()
    chars = ocr_rec.font_chars(ocr_rec.dictionary(ocr_rec.rec_model()))
    rng = np.random.default_rng(args.seed)
    pages = [page(rng, chars) for _ in range(args.calib + args.eval)]
    calib, held = pages[:args.calib], pages[args.calib:]
    rows = ocr_rec.build_from(args, model, [x for x, _ in calib])
    ratio = fit_ratio(probability_maps(model, calib), calib)
    boxes = sum(len(b) for _, b in held)
    print(f"PP-OCRv4 det, {args.calib} calibration pages, {len(held)} held-out pages "
          f"({boxes} text boxes, seed {args.seed}; unclip ratio {ratio} fitted on the "
          f"calibration pages)")
    print("| build | recall at IoU 0.5 | precision | FP32 boxes kept |\n|---|---|---|---|")
    reference = None
    for label, path in rows:
        maps = probability_maps(path, held)
        reference = maps if reference is None else reference
        recall, precision, kept = score(maps, held, ratio, reference)
        print(f"| {label} | {100 * recall:.1f}% ±{ocr_rec.interval(recall, boxes):.1f} | "
              f"{100 * precision:.1f}% | {100 * kept:.1f}% |", flush=True)


if __name__ == "__main__":
    main()
