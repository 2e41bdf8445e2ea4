#!/usr/bin/env python3
"""Independent numpy/scipy reference of TensorRT EntropyCalibration2 threshold search.

Usage: entropy_reference.py HIST.json

HIST.json: {"hist": [counts...], "bin_width": float}
Prints JSON: {"bins": i, "amax": i * bin_width, "divergences": [KL for i = 128..len(hist)]}

Algorithm (the definition rtq-calib documents, written here directly on
explicit per-bin arrays):
  for every candidate bin count i in 128..=len(hist):
    P = hist[:i], with sum(hist[i:]) (the outliers) added to P[i-1]
    split range(i) into 128 groups: m = i // 128, group g < 127 is
    [g*m, (g+1)*m), the last group is [127*m, i)
    Q[j] = sum(hist[group]) / #{k in group : P[k] > 0}  where P[j] > 0, else 0
    normalise P and Q to sum 1
    where P > 0 and Q == 0, Q := 1e-4 (no renormalisation)
    KL = sum rel_entr(P, Q)
  choose the first i of minimal KL; amax = i * bin_width (upper edge of bin i-1).
"""
import json
import sys

import numpy as np
from scipy.special import rel_entr

LEVELS = 128
EPS = 1e-4


def divergence(hist, i):
    p = hist[:i].astype(np.float64)
    p[i - 1] += hist[i:].sum()
    m = i // LEVELS
    starts = np.arange(LEVELS) * m
    lengths = np.full(LEVELS, m)
    lengths[-1] = i - starts[-1]
    group_total = np.add.reduceat(hist[:i].astype(np.float64), starts)
    support = p > 0
    group_support = np.add.reduceat(support.astype(np.int64), starts)
    per_bin = np.divide(group_total, group_support,
                        out=np.zeros(LEVELS), where=group_support > 0)
    q = np.repeat(per_bin, lengths) * support
    p = p / p.sum()
    qs = q.sum()
    if qs > 0:
        q = q / qs
    q = np.where(support & (q == 0), EPS, q)
    return float(rel_entr(p, q).sum())


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    hist = np.asarray(spec["hist"], dtype=np.int64)
    width = float(spec["bin_width"])
    if hist.size < LEVELS or hist.sum() == 0:
        raise SystemExit("histogram shorter than 128 bins or empty")
    # Level the zero bin to its neighbour before the search (as NVIDIA's
    # pytorch-quantization does): a ReLU's spike at exactly 0 says nothing about the
    # threshold but would dominate the merged first group of Q.
    if hist.size > 1:
        hist[0] = hist[1]
    divs = [divergence(hist, i) for i in range(LEVELS, hist.size + 1)]
    best = int(np.argmin(divs))  # first minimum
    bins = LEVELS + best
    json.dump({"bins": bins, "amax": bins * width, "divergences": divs}, sys.stdout)


if __name__ == "__main__":
    main()
