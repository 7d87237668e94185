"""int8 batch_matmul of two run-time operands (qnn.batch_matmul): x[B, M, K] and y[B, N, K]
(or [B, K, N]), 8-bit either sign, with per-tensor zero points, -> int32 [B, M, N], through the
same tiles as the int8 dense (dense_int8.int8_gemm_stmt, the Int8Dot micro-kernel).

    out[b, m, n] = sum_k (x - zx)(y - zy)
                 = sum_k x'y' - zx' colsum(y')[b, n] - zy' rowsum(x')[b, m] + K zx' zy'

with x' = x (uint8) or x + 128 (int8, zx' = zx + 128) and y' = y (int8) or y - 128 (uint8,
zy' = zy - 128): the operands vpdpbusd multiplies, the centered values unchanged. Every term
is int32 arithmetic, wrapping as the reference's cast of its exact sum.

    for b in batch:
      Bp[N/NR][K/4][NR][4] = y'[b] packed, zero padded; colsum[n] = sum_k y'[b, n, k]
      rowsum[m] = sum_k x'[b, m, k]
      the int8 GEMM tiles over x'[b] (read in place when uint8) and Bp, through the epilogue
        epilogue(acc - zx' colsum[n] - zy' rowsum[m] + K zx' zy')
"""
from __future__ import annotations

from .. import te
from ..options import CodegenOptions
from ..tir.expr import Load
from ..tir.ops import cast, const, if_then_else, lt
from ..tir.ops import min as tir_min
from ..tir.stmt import Allocate, Buffer, For, Stmt, Store, seq
from .common import addr, ceil_div, imm, mark_epilogue, var
from .dense_int8 import int8_gemm_stmt
from .int8_config import Int8Config, resolve_int8

U8, I8, I32 = "uint8", "int8", "int32"
OPERANDS = (U8, I8)


def batch_matmul_int8(x: te.Tensor, y: te.Tensor, zx: te.Tensor, zy: te.Tensor,
                      transpose_b: bool = True, name: str = "T_batch_matmul_int8", *,
                      options: CodegenOptions, config: Int8Config | None = None
                      ) -> te.Tensor:
    """qnn.batch_matmul's int32 result for 8-bit x [B, M, K] and y [B, N, K] (transpose_b) or
    [B, K, N], int32 zero points zx, zy (one value each); a batch of 1 broadcasts."""
    bx, m, k = x.shape
    by = y.shape[0]
    n = y.shape[1] if transpose_b else y.shape[2]
    ky = y.shape[2] if transpose_b else y.shape[1]
    config = resolve_int8(options, config, columns=n)
    if x.dtype not in OPERANDS or y.dtype not in OPERANDS or ky != k or zx.dtype != I32 \
            or zy.dtype != I32 or zx.shape not in ((), (1,)) or zy.shape not in ((), (1,)) \
            or (bx != by and 1 not in (bx, by)):
        raise ValueError(f"batch_matmul_int8: {x.dtype} {x.shape} x {y.dtype} {y.shape} "
                         f"(transpose_b={transpose_b}) with zero points {zx.dtype} {zx.shape}, "
                         f"{zy.dtype} {zy.shape}: expected 8-bit operands of agreeing batch "
                         f"and reduction dims and int32 scalar zero points")
    batch = max(bx, by)

    def fcompute(ins, outs, epilogue=None):
        return _stmt(*ins, outs[0], (bx, by, batch, m, n, k), transpose_b, epilogue, name,
                     options, config)

    return te.extern((batch, m, n), [x, y, zx, zy], mark_epilogue(fcompute, in_place=True),
                     name=name, dtype=I32,
                     kernel_attrs={"prefer_vector_width": 32 * config.lanes})


def _shifted(value, dtype: str, to: str):
    """The value as `to` (uint8 data, int8 weights), moved by 128 where its sign differs."""
    if dtype == to:
        return value
    delta = 128 if to == U8 else -128
    return cast(cast(value, I32) + const(delta, I32), to)


def _stmt(xb: Buffer, yb: Buffer, zxb: Buffer, zyb: Buffer, out: Buffer, dims: tuple,
          transpose_b: bool, epilogue, name: str, options: CodegenOptions,
          config: Int8Config) -> Stmt:
    bx, by, batch, m, n, k = dims
    NR = config.block()  # noqa: N806
    groups, nt = ceil_div(k, 4), ceil_div(n, NR)
    par = options.parallel
    b = var(f"{name}_b")
    xi = (lambda: b) if bx > 1 else (lambda: imm(0))
    yi = (lambda: b) if by > 1 else (lambda: imm(0))
    zx = Load(zxb, (imm(0),) * len(zxb.shape), I32) + const(0 if xb.dtype == U8 else 128, I32)
    zy = Load(zyb, (imm(0),) * len(zyb.shape), I32) - const(0 if yb.dtype == I8 else 128, I32)

    def a_load(i, kk):
        return _shifted(Load(xb, (xi(), i, kk), xb.dtype), xb.dtype, U8)

    def y_load(j, kk):
        index = (yi(), j, kk) if transpose_b else (yi(), kk, j)
        return _shifted(Load(yb, index, yb.dtype), yb.dtype, I8)

    # y'[b] packed: Bp[jt, g, v, q] = y'(jt*NR + v, 4g + q), zero past N and K
    bp = Buffer(f"{name}_bpack", (nt, groups, NR, 4), I8)
    jt, g, v, q = (var(f"{name}_p{c}") for c in "jgvq")
    col, kk = jt * NR + v, g * 4 + q
    conds = ([lt(col, n)] if nt * NR != n else []) + ([lt(kk, k)] if k % 4 else [])
    val = y_load(tir_min(col, imm(n - 1)) if nt * NR != n else col,
                 tir_min(kk, imm(k - 1)) if k % 4 else kk)
    for c in conds:
        val = if_then_else(c, val, const(0, I8))
    pack = par.loop(jt, nt, For(g, groups, For(v, NR, For(q, 4, Store(bp, (jt, g, v, q), val)))),
                    nbytes=2 * nt * groups * NR * 4)
    # the zero points' terms: sums of y' per column and x' per row
    colsum, rowsum = Buffer(f"{name}_colsum", (n,), I32), Buffer(f"{name}_rowsum", (m,), I32)

    def sums(buf, count: int, load, tag: str) -> Stmt:
        i, r = var(f"{name}_{tag}i"), var(f"{name}_{tag}k")
        add = Store(buf, (i,), Load(buf, (i,), I32) + cast(load(i, r), I32))
        return par.loop(i, count, seq(Store(buf, (i,), const(0, I32)), For(r, k, add)),
                        nbytes=count * k)

    def terms(value, idx):
        total = value - zx * Load(colsum, (idx[2],), I32) - zy * Load(rowsum, (idx[1],), I32)
        total = total + const(k, I32) * zx * zy
        return total if epilogue is None else epilogue(total, idx)

    in_place = xb.dtype == U8 and k % 4 == 0
    gemm = int8_gemm_stmt(m, n, k, a_load, (lambda i: addr(xb, xi(), i, 0)) if in_place
                          else None, lambda i, j: (b, i, j), bp, out, terms, name, options,
                          config)
    body = seq(pack, sums(colsum, n, y_load, "c"), sums(rowsum, m, a_load, "r"), gemm)
    for buf in (bp, colsum, rowsum):
        body = Allocate(buf, body)
    return For(b, batch, body)
