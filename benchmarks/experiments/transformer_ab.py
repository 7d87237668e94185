"""Same-process A/B of the transformer path's lowering choices, in thread CPU time.

    RELAYJIT_BUILD_CACHE=0 nice -n 10 python benchmarks/experiments/transformer_ab.py matmul_dense_nd \
        gen_bert_encoder gen_gpt2_decoder [--rounds 15] [--threads 1]

Each model is built twice in one process, once with the switch as the code has it (on) and
once with the earlier lowering (off); the outputs are checked against each other, then both
graph modules run in interleaved rounds and the medians of thread CPU time per run are printed
with their ratio (on / off; below 1 is faster). At --threads 2 the pool's second thread is not
counted by thread_time, so the wall-clock medians are printed as well. Figures only.

Switches:
  matmul_dense_nd   ONNX MatMul of [..., M, K] @ [K, N] lowers to nn.dense on the left
                    operand as it is; off: reshaped to 2-D around the dense (as before), which
                    keeps the bias add and GELU out of the dense's epilogue.
  softmax_groups    softmax rows in interleaved groups (softmax.rows' row_group); off: one row
                    at a time (row_group 1).
  layer_norm        FuseLayerNorm (decomposed layer norms become one nn.layer_norm row
                    kernel); off: the pass skipped.
  fold_transposes   FoldTransposeIntoBatchMatmul (attention's head split/merge reshapes and
                    transposes become the batch matmul's axis orders); off: the pass skipped.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from benchmarks.generated_models import GENERATED_MODELS  # noqa: E402
from benchmarks.generated_models import build as build_generated  # noqa: E402
from compiler import relay  # noqa: E402
from compiler.frontend.onnx_ops import common as onnx_common  # noqa: E402
from compiler.frontend.onnx_ops.common import num_elements, reshape  # noqa: E402
from compiler.transform import PassContext  # noqa: E402
from runtime import cpu, graph_executor, threadpool  # noqa: E402


@contextlib.contextmanager
def matmul_reshaped():
    """The MatMul lowering before matmul_dense_nd: a 2-D dense between two reshapes."""
    versions = onnx_common.CONVERTERS[("", "MatMul")]
    since, current = versions[-1]

    def legacy(ctx, inputs):
        a, b = inputs
        sa, sb = ctx.shape(a), ctx.shape(b)
        if len(sb) != 2 or len(sa) <= 2:
            return current(ctx, inputs)
        flat = reshape(a, [num_elements(sa[:-1]), sa[-1]])
        return reshape(current(ctx, [flat, b]), [*sa[:-1], sb[-1]])

    versions[-1] = (since, legacy)
    try:
        yield
    finally:
        versions[-1] = (since, current)


@contextlib.contextmanager
def without_pass(name: str):
    """Build with the named pass disabled."""
    yield {"disabled_pass": [name]}


@contextlib.contextmanager
def configured(implementation: str, **fields):
    """Build with these fields of an implementation's configuration."""
    yield {"config": {"relayjit.schedule_config": {implementation: fields}}}


SWITCHES = {
    "matmul_dense_nd": lambda: matmul_reshaped(),
    "fold_transposes": lambda: without_pass("FoldTransposeIntoBatchMatmul"),
    "layer_norm": lambda: without_pass("FuseLayerNorm"),
    "softmax_groups": lambda: configured("softmax.rows", row_group=1),
}


def build_module(model, feeds, switch_off=None):
    ctx_kwargs = {}
    with contextlib.ExitStack() as stack:
        if switch_off is not None:
            extra = stack.enter_context(switch_off())
            ctx_kwargs.update(extra or {})
        mod, params = relay.frontend.from_onnx(model)
        with PassContext(opt_level=3, **ctx_kwargs):
            factory = relay.build(mod, params=params)
    gm = graph_executor.GraphModule(factory["default"](cpu()))
    gm.set_input(**feeds)
    gm.run()
    return gm


def timed(fn, number):
    c0, w0 = time.thread_time(), time.perf_counter()
    for _ in range(number):
        fn()
    return (time.thread_time() - c0) / number * 1e3, (time.perf_counter() - w0) / number * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("switch", choices=sorted(SWITCHES))
    ap.add_argument("models", nargs="+", choices=sorted(GENERATED_MODELS))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    threadpool.set_num_threads(args.threads)
    for name in args.models:
        model, feeds = build_generated(name)
        on = build_module(model, feeds)
        off = build_module(model, feeds, SWITCHES[args.switch])
        np.testing.assert_allclose(on.get_output(0).numpy(), off.get_output(0).numpy(),
                                   rtol=1e-4, atol=1e-4)
        number = max(1, int(0.05 / max(timed(on.run, 1)[1] * 1e-3, 1e-6)))
        t_on, t_off = [], []
        for _ in range(args.rounds):
            t_on.append(timed(on.run, number))
            t_off.append(timed(off.run, number))
        (c_on, w_on), (c_off, w_off) = np.median(t_on, axis=0), np.median(t_off, axis=0)
        print(f"{name:>18} {args.switch} threads={args.threads}: cpu on {c_on:7.3f} ms  off "
              f"{c_off:7.3f} ms  ratio {c_on / c_off:.3f} | wall on {w_on:7.3f}  off "
              f"{w_off:7.3f}  ratio {w_on / w_off:.3f}", flush=True)


if __name__ == "__main__":
    main()
