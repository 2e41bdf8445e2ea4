#!/usr/bin/env python3
"""Writes the onnx package's own node test cases for If, Loop and Scan (models with
inputs and the outputs onnx's reference implementation expects) into OUTDIR.

usage: onnx_node_cases.py OUTDIR

For each case: NAME.onnx, NAME_in.npz (one array per graph input) and
NAME_expected.npz (output_0, output_1, ...). Prints the case names as JSON:
{"tensor": [cases with tensor values only], "other": [cases using sequences or
optionals, or Scan-8, which rtq refuses]}.
"""
import json
import os
import sys
import warnings

import numpy as np
import onnx

warnings.simplefilter("ignore")
from onnx.backend.test.case.node import collect_testcases  # noqa: E402

WANTED = {"test_if", "test_if_seq", "test_if_opt", "test_loop11", "test_loop13_seq",
          "test_loop16_seq_none", "test_scan_sum", "test_scan9_sum", "test_scan9_multi_state",
          "test_scan9_scalar"}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    tensor, other = [], []
    for case in collect_testcases():
        if case.name not in WANTED:
            continue
        onnx.save(case.model, os.path.join(out, case.name + ".onnx"))
        inputs, outputs = case.data_sets[0]
        plain = all(isinstance(x, (np.ndarray, np.generic)) for x in list(inputs) + list(outputs))
        if plain and case.name != "test_scan_sum":
            names = [i.name for i in case.model.graph.input]
            np.savez(os.path.join(out, case.name + "_in.npz"), **{n: np.asarray(x) for n, x in zip(names, inputs)})
            np.savez(os.path.join(out, case.name + "_expected.npz"),
                     **{f"output_{k}": np.asarray(o) for k, o in enumerate(outputs)})
            tensor.append(case.name)
        else:
            other.append(case.name)
    print(json.dumps({"tensor": sorted(tensor), "other": sorted(other)}))


if __name__ == "__main__":
    main()
