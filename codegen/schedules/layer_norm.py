"""Layer norm of float32 rows (the last axis) as one kernel: per row, a pass for the mean, one
for the variance of the centred values (two passes, as the decomposed graph computes it, not
E[x^2] - E[x]^2), and one writing (x - mean) / sqrt(var + eps) * gamma + beta, each a vector
loop over the row while it is in L1; rows in interleaved groups (codegen.schedules.rows).

The decomposed form (mean, subtract, square, mean, add, rsqrt, multiply, affine) is four
kernels after FuseOps (the centred values have two readers), each a trip through memory:
about 0.04-0.06 ms per 128x768 layer norm at one thread, against one pass of this kernel.
"""
from __future__ import annotations

from .. import te
from ..options import CodegenOptions
from ..tir.expr import Expr, Load
from ..tir.ops import const, sqrt
from ..tir.stmt import Buffer, For, Stmt, Store, seq
from .common import F32, imm, var
from .rows import RowsConfig, grouped_rows, lane_pass, lanes_reduce, resolve_rows


def layer_norm_rows(x: te.Tensor, gamma: te.Tensor | None, beta: te.Tensor | None, eps: float,
                    name: str = "T_layer_norm", *, options: CodegenOptions,
                    config: RowsConfig | None = None) -> te.Tensor:
    """(x - mean) / sqrt(var + eps) [* gamma] [+ beta] over x's last axis (float32)."""
    *outer, n = x.shape
    rows = 1
    for d in outer:
        rows *= d
    config = resolve_rows(options, config)
    vw = config.vector_width
    group = max(1, min(config.row_group, rows))
    inputs = [x] + [t for t in (gamma, beta) if t is not None]

    def fcompute(ins, outs) -> Stmt:
        xb, out = ins[0], outs[0]
        gb = ins[1] if gamma is not None else None
        bb = ins[-1] if beta is not None else None
        lanes = Buffer(f"{name}_lanes", (group, vw), F32)
        stats = Buffer(f"{name}_s", (group, 2), F32)  # each row's mean and 1 / std

        def row_passes(r: int, lead: tuple) -> tuple[Stmt, Stmt, Stmt]:
            k = var(f"{name}_k{r}")

            def x_at(c) -> Expr:
                return Load(xb, lead + (c,), F32)

            def lane_at(i) -> Expr:
                return Load(lanes, (imm(r), i), F32)

            def add(a: Expr, b: Expr) -> Expr:
                return a + b

            mean = Load(stats, (imm(r), imm(0)), F32)
            inv = Load(stats, (imm(r), imm(1)), F32)
            find_mean = seq(
                lane_pass(lanes, r, n, 0.0, lambda i, c: Store(
                    lanes, (imm(r), i), lane_at(i) + x_at(c)), name),
                Store(stats, (imm(r), imm(0)), lanes_reduce(lanes, r, add) / const(n, F32)))

            def centred_square(i, c) -> Stmt:
                d = x_at(c) - mean
                return Store(lanes, (imm(r), i), lane_at(i) + d * d)
            find_inv = seq(
                lane_pass(lanes, r, n, 0.0, centred_square, name),
                Store(stats, (imm(r), imm(1)), const(1.0, F32) / sqrt(
                    lanes_reduce(lanes, r, add) / const(n, F32) + const(eps, F32))))
            value = (x_at(k) - mean) * inv
            if gb is not None:
                value = value * Load(gb, (k,), F32)
            if bb is not None:
                value = value + Load(bb, (k,), F32)
            write = For(k, n, Store(out, lead + (k,), value), "vectorized")
            return find_mean, find_inv, write

        return grouped_rows(rows, group, n, [lanes, stats], row_passes, outer, name,
                            options.parallel)

    return te.extern(x.shape, inputs, fcompute, dtype=F32, name=name,
                     kernel_attrs={"prefer_vector_width": 32 * vw})
