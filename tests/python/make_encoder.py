#!/usr/bin/env python3
"""Writes a small transformer encoder (BERT- or ViT-style) or GPT-style decoder built with
onnx's helper, and calibration / evaluation samples for it.

usage: make_encoder.py KIND MODEL CALIB N [--seed S] [--layers L] [--layernorm op|decomposed]
                       [--gelu erf|tanh] [--einsum] [--opset O] [--sample-seed S]

KIND is `bert` (inputs `hidden` float[batch, seq, 64] and `mask` int64[batch, seq]; outputs
`sequence` float[batch, seq, 64] and `pooled` float[batch, 64]; samples of 8 to 32 tokens)
or `vit` (input `image` float[batch, 3, 32, 32]; output `logits` float[batch, 10]) or
`gpt` (input `tokens` int64[batch, seq]; output `logits` float[batch, seq, 512]: token
embedding Gather, learned positions, 4 pre-norm blocks of width 256 with causal attention
and a GELU MLP, final LayerNorm, LM-head MatMul; samples of 16 to 64 Zipf-distributed
tokens).

Weights have trained-like statistics rather than plain Gaussians: heavy-tailed
(Student-t) matrices scaled by 1/sqrt(fan_in), LayerNorm gains around 1 with a few
channels an order of magnitude larger (the outlier channels trained BERT/ViT models
have), small biases. The GPT's matrices are lighter-tailed (normal, 0.5% of the
entries 2.5x larger; LayerNorm outliers 4x) and its embeddings normal. Every sample is a `.npz` with one array per input. Seeded: the same
arguments write the same files.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D, HEADS, FFN = 64, 4, 256
DH = D // HEADS


class Builder:
    """Collects nodes and initializers with unique names."""

    def __init__(self, rng, opset, layernorm, gelu, einsum, dims=(D, HEADS, FFN), gaussian=False, outlier_gain=8.0):
        self.rng, self.opset, self.layernorm, self.gelu, self.einsum = rng, opset, layernorm, gelu, einsum
        self.d, self.heads_n, self.ffn = dims
        # gaussian: GPT-style normal weights with a few larger entries instead of Student-t.
        self.gaussian, self.outlier_gain = gaussian, outlier_gain
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def const(self, base, array):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def node(self, op, inputs, base=None, **attrs):
        out = self.name(base or op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out + "_node", **attrs))
        return out

    def weight(self, fan_in, fan_out):
        if self.gaussian:
            # Normal, with 0.5% of the entries 2.5x larger (lighter tails than Student-t(5)).
            w = self.rng.standard_normal((fan_in, fan_out))
            w[self.rng.random((fan_in, fan_out)) < 0.005] *= 2.5
            return (w / np.sqrt(fan_in) * 0.8).astype(np.float32)
        w = self.rng.standard_t(5, (fan_in, fan_out)) / np.sqrt(fan_in) * 0.8
        return w.astype(np.float32)

    def linear(self, x, fan_in, fan_out, base):
        y = self.node("MatMul", [x, self.const(base + "_w", self.weight(fan_in, fan_out))], base)
        b = (self.rng.standard_normal(fan_out) * 0.02).astype(np.float32)
        return self.node("Add", [y, self.const(base + "_b", b)], base + "_bias")

    def layer_norm(self, x, base):
        d = self.d
        gamma = (1.0 + 0.1 * self.rng.standard_normal(d)).astype(np.float32)
        outliers = self.rng.choice(d, 2, replace=False)
        gamma[outliers] *= self.outlier_gain
        beta = (0.05 * self.rng.standard_normal(d)).astype(np.float32)
        g, b = self.const(base + "_gamma", gamma), self.const(base + "_beta", beta)
        if self.layernorm == "op":
            return self.node("LayerNormalization", [x, g, b], base, axis=-1, epsilon=1e-5)
        axes = self.const(base + "_axes", np.array([-1], np.int64))
        reduce = (lambda v: self.node("ReduceMean", [v, axes], base + "_mean")) if self.opset >= 18 else (
            lambda v: self.node("ReduceMean", [v], base + "_mean", axes=[-1]))
        mean = reduce(x)
        centered = self.node("Sub", [x, mean], base + "_sub")
        sq = self.node("Pow", [centered, self.const(base + "_two", np.array(2.0, np.float32))], base + "_pow")
        var = reduce(sq)
        eps = self.node("Add", [var, self.const(base + "_eps", np.array(1e-5, np.float32))], base + "_addeps")
        std = self.node("Sqrt", [eps], base + "_sqrt")
        normed = self.node("Div", [centered, std], base + "_div")
        scaled = self.node("Mul", [normed, g], base + "_scale")
        return self.node("Add", [scaled, b], base + "_shift")

    def gelu_act(self, x, base):
        if self.gelu == "erf":
            div = self.node("Div", [x, self.const(base + "_sqrt2", np.array(np.sqrt(2.0), np.float32))], base + "_div")
            erf = self.node("Erf", [div], base + "_erf")
            one = self.node("Add", [erf, self.const(base + "_one", np.array(1.0, np.float32))], base + "_add")
            mul = self.node("Mul", [x, one], base + "_mul")
            return self.node("Mul", [mul, self.const(base + "_half", np.array(0.5, np.float32))], base + "_half")
        cube = self.node("Pow", [x, self.const(base + "_three", np.array(3.0, np.float32))], base + "_pow")
        inner = self.node("Mul", [cube, self.const(base + "_c", np.array(0.044715, np.float32))], base + "_c")
        inner = self.node("Add", [x, inner], base + "_add")
        inner = self.node("Mul", [inner, self.const(base + "_k", np.array(np.sqrt(2 / np.pi), np.float32))], base + "_k")
        t = self.node("Tanh", [inner], base + "_tanh")
        t = self.node("Add", [t, self.const(base + "_one", np.array(1.0, np.float32))], base + "_one")
        t = self.node("Mul", [x, t], base + "_mul")
        return self.node("Mul", [t, self.const(base + "_half", np.array(0.5, np.float32))], base + "_half")

    def heads(self, x, base, perm):
        shape = self.const(base + "_shape", np.array([0, 0, self.heads_n, self.d // self.heads_n], np.int64))
        r = self.node("Reshape", [x, shape], base + "_reshape")
        return self.node("Transpose", [r], base + "_transpose", perm=perm)

    def attention(self, x, mask, base):
        d = self.d
        q = self.heads(self.linear(x, d, d, base + "_q"), base + "_qh", [0, 2, 1, 3])
        v = self.heads(self.linear(x, d, d, base + "_v"), base + "_vh", [0, 2, 1, 3])
        if self.einsum:
            k = self.heads(self.linear(x, d, d, base + "_k"), base + "_kh", [0, 2, 1, 3])
            scores = self.node("Einsum", [q, k], base + "_scores", equation="bhqd,bhkd->bhqk")
        else:
            k = self.heads(self.linear(x, d, d, base + "_k"), base + "_kh", [0, 2, 3, 1])
            scores = self.node("MatMul", [q, k], base + "_scores")
        dh = d // self.heads_n
        scores = self.node("Div", [scores, self.const(base + "_scale", np.array(np.sqrt(dh), np.float32))], base + "_div")
        if mask is not None:
            scores = self.node("Add", [scores, mask], base + "_mask")
        probs = self.node("Softmax", [scores], base + "_softmax", axis=-1)
        ctx = self.node("MatMul", [probs, v], base + "_context")
        ctx = self.node("Transpose", [ctx], base + "_ctx_transpose", perm=[0, 2, 1, 3])
        ctx = self.node("Reshape", [ctx, self.const(base + "_merge", np.array([0, 0, d], np.int64))], base + "_merge")
        return self.linear(ctx, d, d, base + "_out")

    def block(self, x, mask, base, pre_norm):
        D, FFN = self.d, self.ffn
        if pre_norm:  # ViT: x + attn(LN(x)), then x + mlp(LN(x))
            h = self.node("Add", [x, self.attention(self.layer_norm(x, base + "_ln1"), mask, base + "_attn")], base + "_res1")
            f = self.linear(self.gelu_act(self.linear(self.layer_norm(h, base + "_ln2"), D, FFN, base + "_fc1"), base + "_gelu"), FFN, D, base + "_fc2")
            return self.node("Add", [h, f], base + "_res2")
        # BERT: LN(x + attn(x)), then LN(h + mlp(h))
        h = self.layer_norm(self.node("Add", [x, self.attention(x, mask, base + "_attn")], base + "_res1"), base + "_ln1")
        f = self.linear(self.gelu_act(self.linear(h, D, FFN, base + "_fc1"), base + "_gelu"), FFN, D, base + "_fc2")
        return self.layer_norm(self.node("Add", [h, f], base + "_res2"), base + "_ln2")


def bert(b, layers):
    mask = b.node("Cast", ["mask"], "mask_float", to=TensorProto.FLOAT)
    mask = b.node("Sub", [b.const("one", np.array(1.0, np.float32)), mask], "mask_invert")
    mask = b.node("Mul", [mask, b.const("neg", np.array(-10000.0, np.float32))], "mask_additive")
    axes = b.const("mask_axes", np.array([1, 2], np.int64))
    mask = b.node("Unsqueeze", [mask, axes], "mask_unsqueeze") if b.opset >= 13 else b.node(
        "Unsqueeze", [mask], "mask_unsqueeze", axes=[1, 2])
    x = b.layer_norm("hidden", "embed_ln")
    for i in range(layers):
        x = b.block(x, mask, f"layer{i}", pre_norm=False)
    b.nodes.append(helper.make_node("Identity", [x], ["sequence"], name="sequence_out"))
    first = b.node("Gather", [x, b.const("first", np.array(0, np.int64))], "first_token", axis=1)
    pooled = b.node("Gemm", [first, b.const("pooler_w", b.weight(D, D)), b.const("pooler_b", np.zeros(D, np.float32))], "pooler")
    b.nodes.append(helper.make_node("Tanh", [pooled], ["pooled"], name="pooled_out"))
    inputs = [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", D]),
              helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("sequence", TensorProto.FLOAT, ["batch", "seq", D]),
               helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", D])]
    return inputs, outputs


def vit(b, layers):
    patch = b.rng.standard_t(5, (D, 3, 8, 8)) / np.sqrt(3 * 64)
    x = b.node("Conv", ["image", b.const("patch_w", patch.astype(np.float32)),
                        b.const("patch_b", (0.02 * b.rng.standard_normal(D)).astype(np.float32))],
               "patch_embed", kernel_shape=[8, 8], strides=[8, 8])
    x = b.node("Reshape", [x, b.const("flat", np.array([1, D, 16], np.int64))], "patch_flat")
    x = b.node("Transpose", [x], "tokens", perm=[0, 2, 1])
    cls = b.const("cls_token", (0.02 * b.rng.standard_normal((1, 1, D))).astype(np.float32))
    x = b.node("Concat", [cls, x], "with_cls", axis=1)
    pos = b.const("position", (0.1 * b.rng.standard_normal((1, 17, D))).astype(np.float32))
    x = b.node("Add", [x, pos], "positioned")
    for i in range(layers):
        x = b.block(x, None, f"block{i}", pre_norm=True)
    x = b.layer_norm(x, "final_ln")
    first = b.node("Gather", [x, b.const("first", np.array(0, np.int64))], "cls_out", axis=1)
    b.nodes.append(helper.make_node("Gemm", [first, b.const("head_w", b.weight(D, 10)), b.const("head_b", np.zeros(10, np.float32))],
                                    ["logits"], name="head"))
    inputs = [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])]
    return inputs, outputs


GPT_DIMS, GPT_VOCAB, GPT_POSITIONS = (256, 4, 1024), 512, 64


def gpt(b, layers):
    d = b.d
    wte = b.const("wte", (0.5 * b.rng.standard_normal((GPT_VOCAB, d))).astype(np.float32))
    wpe = b.const("wpe", (0.1 * b.rng.standard_normal((GPT_POSITIONS, d))).astype(np.float32))
    seq = b.node("Shape", ["tokens"], "seq_len", start=1, end=2)
    zero = b.const("zero", np.array([0], np.int64))
    positions = b.node("Slice", [wpe, zero, seq, zero], "positions")
    x = b.node("Gather", [wte, "tokens"], "embed", axis=0)
    x = b.node("Add", [x, positions], "positioned")
    # Causal mask: 0 on and below the diagonal, -1e4 above, cut to [seq, seq].
    causal = np.triu(np.full((GPT_POSITIONS, GPT_POSITIONS), -10000.0, np.float32), 1)
    ends = b.node("Concat", [seq, seq], "mask_ends", axis=0)
    mask = b.node("Slice", [b.const("causal", causal), b.const("mask_starts", np.array([0, 0], np.int64)), ends,
                            b.const("mask_axes", np.array([0, 1], np.int64))], "causal_mask")
    for i in range(layers):
        x = b.block(x, mask, f"h{i}", pre_norm=True)
    x = b.layer_norm(x, "ln_f")
    b.nodes.append(helper.make_node("MatMul", [x, b.const("lm_head", b.weight(d, GPT_VOCAB))], ["logits"], name="lm_head"))
    inputs = [helper.make_tensor_value_info("tokens", TensorProto.INT64, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", GPT_VOCAB])]
    return inputs, outputs


def gpt_samples(rng, n, out):
    # Zipf-like token frequencies (p ~ 1 / rank^1.1) over a shuffled vocabulary, the same
    # ranking for every sample seed (as a tokenizer's).
    p = 1.0 / np.arange(1, GPT_VOCAB + 1) ** 1.1
    p /= p.sum()
    ids = np.random.default_rng(GPT_VOCAB).permutation(GPT_VOCAB)
    for i in range(n):
        seq = int(rng.integers(16, GPT_POSITIONS + 1))
        tokens = ids[rng.choice(GPT_VOCAB, seq, p=p)].astype(np.int64)[None]
        np.savez(os.path.join(out, f"sample_{i:03d}.npz"), tokens=tokens)


def bert_samples(rng, n, out):
    # Embedding-like hidden states: mostly small, two outlier dimensions, a few padded tokens.
    scale = np.full(D, 0.5, np.float32)
    scale[[3, 41]] = 4.0
    for i in range(n):
        seq = int(rng.integers(8, 33))
        hidden = (rng.standard_normal((1, seq, D)) * scale).astype(np.float32)
        mask = np.ones((1, seq), np.int64)
        mask[0, seq - int(rng.integers(0, seq // 4 + 1)):] = 0
        np.savez(os.path.join(out, f"sample_{i:03d}.npz"), hidden=hidden, mask=mask)


def vit_samples(rng, n, out):
    yy, xx = np.meshgrid(np.linspace(-1, 1, 32), np.linspace(-1, 1, 32), indexing="ij")
    for i in range(n):
        img = np.empty((1, 3, 32, 32), np.float32)
        for c in range(3):
            a, bb, cc = rng.uniform(-1, 1, 3)
            cx, cy, s = rng.uniform(-0.6, 0.6, 2).tolist() + [rng.uniform(0.15, 0.5)]
            v = 0.5 * (a * xx + bb * yy) + cc * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * s * s))
            v += 0.3 * np.sign(np.sin(rng.uniform(4, 20) * xx + rng.uniform(-3, 3)))
            img[0, c] = np.clip(v + rng.normal(0, 0.05, v.shape), -1, 1)
        np.savez(os.path.join(out, f"sample_{i:03d}.npz"), image=img)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["bert", "vit", "gpt"])
    p.add_argument("model")
    p.add_argument("calib")
    p.add_argument("n", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layers", type=int, help="blocks (default: 2, 4 for gpt)")
    p.add_argument("--layernorm", choices=["op", "decomposed"], default="op")
    p.add_argument("--gelu", choices=["erf", "tanh"], default="erf")
    p.add_argument("--einsum", action="store_true")
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--sample-seed", type=int, help="seed of the samples (default: SEED + 1000)")
    a = p.parse_args()
    if a.layernorm == "op" and a.opset < 17:
        p.error("LayerNormalization needs opset 17 or later")
    rng = np.random.default_rng(a.seed)
    if a.kind == "gpt":
        b = Builder(rng, a.opset, a.layernorm, a.gelu, a.einsum, dims=GPT_DIMS, gaussian=True, outlier_gain=4.0)
    else:
        b = Builder(rng, a.opset, a.layernorm, a.gelu, a.einsum)
    build = {"bert": bert, "vit": vit, "gpt": gpt}[a.kind]
    layers = a.layers if a.layers is not None else (4 if a.kind == "gpt" else 2)
    inputs, outputs = build(b, layers)
    name = "gpt_decoder" if a.kind == "gpt" else f"{a.kind}_encoder"
    graph = helper.make_graph(b.nodes, name, inputs, outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", a.opset)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, a.model)
    os.makedirs(a.calib, exist_ok=True)
    samples = {"bert": bert_samples, "vit": vit_samples, "gpt": gpt_samples}[a.kind]
    samples(np.random.default_rng(a.seed + 1000 if a.sample_seed is None else a.sample_seed), a.n, a.calib)


if __name__ == "__main__":
    main()
