"""Pools and depthwise convs in NCHW[x]c against today's NCHW kernels, layer by layer, one thread.

    python benchmarks/experiments/blocked_window_layers.py [--rounds 15] [--model resnet50 squeezenet ...]

Each layer is lowered twice through the ops' own compute rules (the registry's, as a model
build lowers them) and codegen.jit: NCHW (codegen.schedules.window: stride phases per channel
plane) and NCHW[x]c (codegen.schedules.window_nchwc; x the target's vector width). The
depthwise convs carry MobileNet-v2's fused epilogue, bias + clip(0, 6). The outputs are
checked against each other first. Times: CPU time of this thread (time.thread_time), median
of interleaved rounds, one thread.
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
from codegen.tir.ops import max as tir_max, min as tir_min  # noqa: E402
from compiler import relay  # noqa: E402
from compiler.op.blocked_layout import block_ref  # noqa: E402
from compiler.op.nn_depthwise_nchwc import contrib_depthwise_conv2d_NCHWc  # noqa: E402
from compiler.driver.build import current_options  # noqa: E402
from compiler.op.registry import get_def  # noqa: E402
from compiler.op.strategy import CallInfo, compute_with_strategy  # noqa: E402

OPTIONS = current_options()  # as relay.build would build here ($RELAYJIT_VECTOR_WIDTH, ...)

# (label, kind, C, H, kernel, stride, pad): kind max / avg / global_avg / depthwise
LAYERS = {
    "resnet50": [
        ("stem max pool 64@112 3x3/2", "max", 64, 112, 3, 2, 1),
        ("global avg pool 2048@7", "global_avg", 2048, 7, 7, 1, 0),
    ],
    "squeezenet": [
        ("max pool 96@109 3x3/2", "max", 96, 109, 3, 2, 0),
        ("max pool 256@27 3x3/2", "max", 256, 27, 3, 2, 0),
        ("max pool 512@13 3x3/2", "max", 512, 13, 3, 2, 0),
    ],
    "mobilenet_v2": [
        ("dw 32@112 3x3/1", "depthwise", 32, 112, 3, 1, 1),
        ("dw 96@112 3x3/2", "depthwise", 96, 112, 3, 2, 1),
        ("dw 144@56 3x3/1", "depthwise", 144, 56, 3, 1, 1),
        ("dw 144@56 3x3/2", "depthwise", 144, 56, 3, 2, 1),
        ("dw 192@28 3x3/1", "depthwise", 192, 28, 3, 1, 1),
        ("dw 192@28 3x3/2", "depthwise", 192, 28, 3, 2, 1),
        ("dw 384@14 3x3/1", "depthwise", 384, 14, 3, 1, 1),
        ("dw 576@14 3x3/1", "depthwise", 576, 14, 3, 1, 1),
        ("dw 576@14 3x3/2", "depthwise", 576, 14, 3, 2, 1),
        ("dw 960@7 3x3/1", "depthwise", 960, 7, 3, 1, 1),
    ],
}


def _call(kind: str, shape: tuple, layout: str, k: int, stride: int, pad: int, wshape=None):
    d = relay.var("d", shape=shape)
    if kind == "global_avg":
        return relay.nn.global_avg_pool2d(d, layout=layout)
    if kind in ("max", "avg"):
        return getattr(relay.nn, f"{kind}_pool2d")(d, (k, k), (stride, stride),
                                                   padding=(pad, pad), layout=layout)
    w = relay.var("w", shape=wshape)
    c = shape[1] * (shape[4] if len(shape) == 5 else 1)
    if layout == "NCHW":
        return relay.nn.conv2d(d, w, strides=(stride, stride), padding=(pad, pad), groups=c,
                               channels=c, kernel_size=(k, k))
    x = shape[4]
    return contrib_depthwise_conv2d_NCHWc(d, w, (stride, stride), (pad, pad), groups=c,
                                          channels=c, kernel_size=(k, k), data_layout=layout,
                                          kernel_layout=f"OIHW1i{x}o")


def build(layout: str, kind: str, c: int, h: int, k: int, stride: int, pad: int):
    """(run once, output array) of the layer in one layout, as the lowering computes it (the
    strategy's implementation)."""
    x = OPTIONS.vector_width
    blocked = layout != "NCHW"
    shape = (1, c // x, h, h, x) if blocked else (1, c, h, h)
    wshape = ((c // x, 1, k, k, 1, x) if blocked else (c, 1, k, k)) \
        if kind == "depthwise" else None
    call = _call(kind, shape, layout, k, stride, pad, wshape)
    opdef = get_def(call.op.name)
    arg_types = [TensorTypeOf(shape)] + ([TensorTypeOf(wshape)] if wshape else [])
    out_type = opdef.type_rel(arg_types, call.attrs)
    ins = [te.placeholder(shape, name="x")] + ([te.placeholder(wshape, name="w")]
                                               if wshape else [])
    y = compute_with_strategy(CallInfo(call.op.name, call.attrs, tuple(arg_types), out_type),
                              ins, OPTIONS)
    if y is None:  # no implementation applies: the op's generic compute rule
        y = opdef.compute(ins, call.attrs, out_type)
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((1, c, h, h)).astype(np.float32)
    args = [block_ref(xa, x) if blocked else xa]
    outs = [y]
    if kind == "depthwise":
        wa = rng.standard_normal((c, 1, k, k)).astype(np.float32)
        ba = rng.standard_normal(c).astype(np.float32)
        bshape = (c // x, 1, 1, x) if blocked else (c, 1, 1)
        bias = te.placeholder(bshape, name="b")
        ins.append(bias)
        if blocked:
            args += [np.ascontiguousarray(wa.reshape(c // x, x, 1, k, k).transpose(
                0, 2, 3, 4, 1)[:, :, :, :, None, :]), ba.reshape(bshape)]
            z = te.compute(y.shape, lambda n, cb, i, j, v: tir_min(tir_max(
                y[n, cb, i, j, v] + bias[cb, 0, 0, v], 0.0), 6.0), name="z")
        else:
            args += [wa, ba.reshape(bshape)]
            z = te.compute(y.shape, lambda n, cc, i, j: tir_min(tir_max(
                y[n, cc, i, j] + bias[cc, 0, 0], 0.0), 6.0), name="z")
        outs = [z]
    name = f"{kind}_{layout}"
    run = build_te(ins, outs, name)
    out = np.empty(outs[0].shape, np.float32)
    kernel = run.library[name]
    return (lambda: kernel(*args, out)), out


def TensorTypeOf(shape):  # noqa: N802 - reads as the type it builds
    from compiler.ir.types import TensorType
    return TensorType(shape, "float32")


def compare(layer, rounds: int) -> tuple[float, float]:
    """(NCHW ms, NCHW[x]c ms), median of interleaved rounds of thread CPU time."""
    _, kind, c, h, k, stride, pad = layer
    x = OPTIONS.vector_width
    fns = {lay: build(lay, kind, c, h, k, stride, pad) for lay in ("NCHW", f"NCHW{x}c")}
    for f, _ in fns.values():
        f()
    a, b = fns["NCHW"][1], fns[f"NCHW{x}c"][1]
    np.testing.assert_allclose(block_ref(a, x), b, rtol=1e-4, atol=1e-4)
    med = interleaved_medians({lay: f for lay, (f, _) in fns.items()}, rounds)
    return tuple(med[lay] for lay in fns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--model", nargs="+", default=list(LAYERS))
    args = parser.parse_args()
    from runtime import threadpool

    threadpool.set_num_threads(1)
    x = OPTIONS.vector_width
    print(f"one thread, thread CPU time, median of {args.rounds} interleaved rounds; x = {x}")
    print(f"{'layer':42s} {'NCHW ms':>8s} {f'NCHW{x}c ms':>11s} {'ratio':>6s}")
    for model in args.model:
        for layer in LAYERS[model]:
            nchw, blocked = compare(layer, args.rounds)
            print(f"{model + ' ' + layer[0]:42s} {nchw:8.4f} {blocked:11.4f} "
                  f"{blocked / nchw:6.2f}", flush=True)


if __name__ == "__main__":
    main()
