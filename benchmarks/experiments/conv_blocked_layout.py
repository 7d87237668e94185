"""Channel-blocked (NCHW[x]c) conv against today's NCHW conv, layer by layer, one thread.

    python benchmarks/experiments/conv_blocked_layout.py [--rounds 15] [--model resnet50 squeezenet ...]

Each layer is built twice through the schedules and codegen.jit (weights pre-packed as
AlterOpLayout packs them): NCHW (codegen.schedules.conv2d picks its schedule as in a model)
and NCHW[x]c (codegen.schedules.conv2d_nchwc, x the target's vector width), each with the
fused epilogue bias + relu, and bias + residual add + relu. The outputs are checked against
each other first. Times: CPU time of this thread (time.thread_time), median of interleaved
rounds, one thread; GFLOP/s of the NCHW[x]c kernel beside the machine's FMA peak.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from benchmarks.model_cpu_time import interleaved_medians  # noqa: E402
from codegen import te  # noqa: E402
from codegen.jit import build_te  # noqa: E402
from codegen.schedules import Conv2dConfig, conv2d_nchw_packed  # noqa: E402
from codegen.schedules import conv2d_pack_geometry  # noqa: E402
from codegen.schedules.conv2d_config import channel_block  # noqa: E402
from codegen.schedules.conv2d_nchwc import conv2d_nchwc_packed  # noqa: E402
from codegen.tir.ops import max as tir_max  # noqa: E402
from compiler.driver.build import current_options  # noqa: E402

OPTIONS = current_options()  # as relay.build would build here ($RELAYJIT_VECTOR_WIDTH, ...)

# (label, C, H, K, R, stride, pad): ResNet-50's 1x1 and non-Winograd 3x3 convs, then
# SqueezeNet's and MobileNet-v2's (non-depthwise) shapes
LAYERS = {
    "resnet50": [
        ("64->64 1x1 @56", 64, 56, 64, 1, 1, 0),
        ("64->256 1x1 @56", 64, 56, 256, 1, 1, 0),
        ("256->64 1x1 @56", 256, 56, 64, 1, 1, 0),
        ("256->128 1x1 @56", 256, 56, 128, 1, 1, 0),
        ("128->128 3x3/2 @56", 128, 56, 128, 3, 2, 1),
        ("128->512 1x1 @28", 128, 28, 512, 1, 1, 0),
        ("256->512 1x1/2 @56", 256, 56, 512, 1, 2, 0),
        ("512->128 1x1 @28", 512, 28, 128, 1, 1, 0),
        ("256->256 3x3/2 @28", 256, 28, 256, 3, 2, 1),
        ("256->1024 1x1 @14", 256, 14, 1024, 1, 1, 0),
        ("1024->256 1x1 @14", 1024, 14, 256, 1, 1, 0),
        ("512->512 3x3/2 @14", 512, 14, 512, 3, 2, 1),
        ("512->2048 1x1 @7", 512, 7, 2048, 1, 1, 0),
        ("2048->512 1x1 @7", 2048, 7, 512, 1, 1, 0),
        ("512->512 3x3 @7", 512, 7, 512, 3, 1, 1),
        ("64->64 3x3 @56 (Winograd in models)", 64, 56, 64, 3, 1, 1),
    ],
    "squeezenet": [
        ("16->64 1x1 @55", 16, 55, 64, 1, 1, 0),
        ("128->32 1x1 @27", 128, 27, 32, 1, 1, 0),
        ("32->128 1x1 @27", 32, 27, 128, 1, 1, 0),
        ("48->192 1x1 @13", 48, 13, 192, 1, 1, 0),
        ("48->192 3x3 @13", 48, 13, 192, 3, 1, 1),
        ("512->1000->1008 1x1 @13", 512, 13, 1008, 1, 1, 0),
    ],
    "mobilenet_v2": [
        ("16->96 1x1 @112", 16, 112, 96, 1, 1, 0),
        ("144->32 1x1 @28", 144, 28, 32, 1, 1, 0),
        ("32->192 1x1 @28", 32, 28, 192, 1, 1, 0),
        ("64->384 1x1 @14", 64, 14, 384, 1, 1, 0),
        ("384->64 1x1 @14", 384, 14, 64, 1, 1, 0),
        ("64->1280 1x1 @14", 64, 14, 1280, 1, 1, 0),
    ],
}


def blocked(a: np.ndarray, x: int) -> np.ndarray:
    """NCHW -> NCHW[x]c."""
    n, c, h, w = a.shape
    return np.ascontiguousarray(a.reshape(n, c // x, x, h, w).transpose(0, 1, 3, 4, 2))


def pack(w: np.ndarray, kb: int) -> np.ndarray:
    """OIHW -> Wp[1, K/KB, C, R, S, KB] (conv2d_pack_geometry, groups 1)."""
    k, c, r, s = w.shape
    nkb = -(-k // kb)
    wp = np.zeros((1, nkb, c, r, s, kb), np.float32)
    for b in range(nkb):
        part = w[b * kb:(b + 1) * kb]
        wp[0, b, ..., :part.shape[0]] = part.transpose(1, 2, 3, 0)
    return wp


def build(layout: str, c: int, h: int, k: int, r: int, stride: int, pad: int, residual: bool,
          config: Conv2dConfig | None = None):
    """(kernel, argument arrays) of conv + bias (+ residual) + relu in one layout (config:
    fields of the blocked conv's configuration)."""
    x = OPTIONS.vector_width
    geo = conv2d_pack_geometry(k, c, r, r, 1, channel_block(k, x))
    wp = te.placeholder(geo, name="wp")
    strides, padding = (stride, stride), (pad,) * 4
    if layout == "NCHW":
        data = te.placeholder((1, c, h, h), name="x")
        y = conv2d_nchw_packed(data, wp, strides, padding, channels=k, options=OPTIONS)
        bias = te.placeholder((k, 1, 1), name="b")
        res = te.placeholder(y.shape, name="res")

        def value(n, kk, i, j):
            v = y[n, kk, i, j] + bias[kk, 0, 0]
            return tir_max(v + res[n, kk, i, j] if residual else v, 0.0)
    else:
        data = te.placeholder((1, c // x, h, h, x), name="x")
        y = conv2d_nchwc_packed(data, wp, strides, padding, channels=k, options=OPTIONS,
                                config=config)
        bias = te.placeholder((k // x, 1, 1, x), name="b")
        res = te.placeholder(y.shape, name="res")

        def value(n, kb, i, j, v):
            s = y[n, kb, i, j, v] + bias[kb, 0, 0, v]
            return tir_max(s + res[n, kb, i, j, v] if residual else s, 0.0)
    z = te.compute(y.shape, value, name="z")
    inputs = [data, wp, bias] + ([res] if residual else [])
    run = build_te(inputs, [z], f"conv_{layout}")
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((1, c, h, h)).astype(np.float32)
    wa = (rng.standard_normal((k, c, r, r)) * 0.1).astype(np.float32)
    ba = rng.standard_normal(k).astype(np.float32)
    oh = (h + 2 * pad - r) // stride + 1
    ra = rng.standard_normal((1, k, oh, oh)).astype(np.float32)
    if layout == "NCHW":
        args = [xa, pack(wa, geo[-1]), ba.reshape(k, 1, 1)] + ([ra] if residual else [])
    else:
        args = [blocked(xa, x), pack(wa, geo[-1]), ba.reshape(k // x, 1, 1, x)] \
            + ([blocked(ra, x)] if residual else [])
    out = np.empty(z.shape, np.float32)
    kernel = run.library[f"conv_{layout}"]
    return (lambda: kernel(*args, out)), out


def compare(layer, residual: bool, rounds: int) -> tuple[float, float]:
    """(NCHW ms, NCHW[x]c ms), median of interleaved rounds of thread CPU time."""
    _, c, h, k, r, stride, pad = layer
    fns = {lay: build(lay, c, h, k, r, stride, pad, residual) for lay in ("NCHW", "NCHWc")}
    for f, _ in fns.values():
        f()
    a, b = fns["NCHW"][1], fns["NCHWc"][1]
    np.testing.assert_allclose(blocked(a, OPTIONS.vector_width), b, rtol=1e-3, atol=1e-3)
    med = interleaved_medians({lay: f for lay, (f, _) in fns.items()}, rounds)
    return med["NCHW"], med["NCHWc"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--model", nargs="+", default=list(LAYERS))
    args = parser.parse_args()
    from runtime import threadpool

    threadpool.set_num_threads(1)
    print(f"one thread, thread CPU time, median of {args.rounds} interleaved rounds; "
          f"x = {OPTIONS.vector_width}")
    print(f"{'layer':38s} {'epilogue':18s} {'NCHW ms':>8s} {'NCHWc ms':>9s} {'ratio':>6s} "
          f"{'GFLOP/s':>8s}")
    for model in args.model:
        for layer in LAYERS[model]:
            label, c, h, k, r, stride, pad = layer
            oh = (h + 2 * pad - r) // stride + 1
            flops = 2 * c * k * r * r * oh * oh
            for residual in (False, True):
                nchw, nchwc = compare(layer, residual, args.rounds)
                epi = "bias+add+relu" if residual else "bias+relu"
                print(f"{model + ' ' + label:38s} {epi:18s} {nchw:8.4f} {nchwc:9.4f} "
                      f"{nchwc / nchw:6.2f} {flops / nchwc / 1e6:8.1f}", flush=True)


if __name__ == "__main__":
    main()
