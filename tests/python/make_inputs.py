#!/usr/bin/env python3
"""Writes N seeded image-like float32 samples of SHAPE as .npy files into OUTDIR.

usage: make_inputs.py OUTDIR 1x3x224x224 N SEED

Each sample mixes smooth gradients, Gaussian blobs and stripes (like photos or text
crops) scaled to roughly [-1, 1] per channel, plus a little noise.
"""
import os
import sys

import numpy as np


def main():
    out, shape, n, seed = sys.argv[1], [int(d) for d in sys.argv[2].split("x")], int(sys.argv[3]), int(sys.argv[4])
    rng = np.random.default_rng(seed)
    os.makedirs(out, exist_ok=True)
    h, w = shape[-2], shape[-1]
    yy, xx = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    for i in range(n):
        x = np.empty(shape, dtype=np.float32)
        for idx in np.ndindex(*shape[:-2]):
            a, b, c = rng.uniform(-1, 1, 3)
            cx, cy, s = rng.uniform(-0.6, 0.6), rng.uniform(-0.6, 0.6), rng.uniform(0.15, 0.5)
            img = 0.5 * (a * xx + b * yy)
            img += np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * s * s)) * c
            img += 0.3 * np.sign(np.sin(rng.uniform(4, 20) * xx + rng.uniform(-3, 3)))
            img += rng.normal(0.0, 0.05, img.shape)
            x[idx] = np.clip(img, -1, 1)
        np.save(os.path.join(out, f"sample_{i:03d}.npy"), x)


if __name__ == "__main__":
    main()
