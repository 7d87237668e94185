"""softmax / log_softmax of float32 rows (the last axis): one pass per row for the maximum,
one for exp and the sum, one for the scaling, each a vector loop over the row while it sits in
L1, with the rows in parallel.

The generic rule makes four stages over the whole tensor (max, exp into a scratch tensor as
large as the input, sum, divide), and its maximum is a serial chain of NaN-aware selects that
does not vectorise: attention's 12x128x128 softmax ran at 4.5x onnxruntime's time. Here the
maximum and the sum are kept in one accumulator per vector lane, combined once per row.

The kernel asks LLVM for loops of the schedule's vector width (kernel_attrs): at its default
256 bits on AVX-512 each 16-lane loop became two 8-lane halves indexing the lane accumulators,
which then lived on the stack (a store and reload per vector of exponentials); one thread,
CPU time: attention's 12x128x128 softmax 0.205 -> 0.145 ms.

Rows run in groups of ROW_GROUP, each pass over every row of the group in turn: a 128-float
row's passes are chains of dependent reductions (lane accumulators, then a horizontal tree and
a division) too short to fill the core alone, and the rows' chains are independent. The row
maximum is a plain compare-and-select (vmaxps), not NaN-aware: a NaN in a row still reaches
every output of the row through its exponential and the sum. One thread, CPU time, same
process: attention's 12x128x128 softmax 0.155 -> 0.121 ms, causally masked 0.158 -> 0.117 ms
(onnxruntime, with its call overhead, about 0.10 ms).
"""
from __future__ import annotations

from .. import te
from ..options import CodegenOptions
from ..tir.expr import Expr, Load, Var
from ..tir.ops import const, exp, gt, log, lt, select
from ..tir.ops import max as tir_max
from ..tir.stmt import Buffer, For, LetStmt, Stmt, Store, seq
from .common import Epilogue, F32, imm, mark_epilogue, var
from .rows import RowsConfig, grouped_rows, lane_pass, lanes_reduce, resolve_rows


# exp(-87.33) is float32's smallest normal number; softmax's terms below it are flushed to 0
# (an absolute error under 1.2e-38, as with a CPU flushing denormals to zero)
EXP_FLOOR = -87.33


def softmax_rows(x: te.Tensor, log_softmax: bool, name: str, *, options: CodegenOptions,
                 config: RowsConfig | None = None) -> te.Tensor:
    """softmax (or log_softmax) of float32 x along its last axis."""
    *outer, n = x.shape
    rows = 1
    for d in outer:
        rows *= d
    config = resolve_rows(options, config)
    vw = config.vector_width
    group = max(1, min(config.row_group, rows))

    def fcompute(ins, outs, epilogue: Epilogue | None = None) -> Stmt:
        xb, out = ins[0], outs[0]
        lanes = Buffer(f"{name}_lanes", (group, vw), F32)
        scalar = Buffer(f"{name}_m", (group, 2), F32)  # each row's maximum and sum

        def row_passes(r: int, lead: tuple) -> tuple[Stmt, Stmt, Stmt]:
            k = var(f"{name}_k{r}")

            def x_at(c) -> Expr:
                return Load(xb, lead + (c,), F32)

            def lane_at(i) -> Expr:
                return Load(lanes, (imm(r), i), F32)

            def fast_max(a: Expr, b: Expr) -> Expr:
                # not NaN-aware: a NaN in the row still makes its sum, hence every output, NaN
                return select(gt(a, b), a, b)

            mx = Load(scalar, (imm(r), imm(0)), F32)
            find_max = seq(lane_pass(lanes, r, n, float("-inf"), lambda i, c: Store(
                lanes, (imm(r), i), fast_max(x_at(c), lane_at(i))), name),
                Store(scalar, (imm(r), imm(0)), lanes_reduce(lanes, r, fast_max)))

            def exp_sum(i, c) -> Stmt:
                """lanes[r, i] += exp(x - max); softmax keeps the exponential in out.

                Below EXP_FLOOR the exponential is 0 instead of a denormal: an additive mask
                (-10000 above a causal diagonal) made every other exponential a denormal, and
                arithmetic on them took GPT-2's 12x128x128 softmax from 0.18 to 0.75 ms."""
                d, e = Var(f"{name}_d{r}", F32), Var(f"{name}_e{r}", F32)
                floor = const(EXP_FLOOR, F32)
                keep = None if log_softmax else Store(out, lead + (c,), e)
                return LetStmt(d, x_at(c) - mx, LetStmt(
                    e, select(lt(d, floor), const(0.0, F32), exp(tir_max(d, floor))),
                    seq(keep, Store(lanes, (imm(r), i), lane_at(i) + e))))
            add_exps = seq(lane_pass(lanes, r, n, 0.0, exp_sum, name),
                           Store(scalar, (imm(r), imm(1)),
                                 lanes_reduce(lanes, r, lambda a, b: a + b)))
            total = Load(scalar, (imm(r), imm(1)), F32)
            idx = lead + (k,)
            # one division per row, then products (a vector divide per 16 values cost a sixth
            # of the row); within an ulp of e / total
            scale = Store(scalar, (imm(r), imm(1)), const(1.0, F32) / total)
            value = x_at(k) - mx - log(total) if log_softmax else Load(out, idx, F32) * total
            if epilogue is not None:
                value = epilogue(value, idx)
            write = seq(None if log_softmax else scale,
                        For(k, n, Store(out, idx, value), "vectorized"))
            return find_max, add_exps, write

        return grouped_rows(rows, group, n, [lanes, scalar], row_passes, outer, name,
                            options.parallel)

    return te.extern(x.shape, [x], mark_epilogue(fcompute), dtype=F32, name=name,
                     kernel_attrs={"prefer_vector_width": 32 * vw})
