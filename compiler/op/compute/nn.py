"""Anchor ops (conv2d, conv2d_transpose, dense, matmul, batch_matmul and its _axes variant):
their generic compute rules, plain reductions in any dtype, where padding is a guard on the
reduction (`where`), not a padded copy.

The schedules written for speed (codegen.schedules: packed panels, LLVM micro-kernels, fused
epilogues) are the strategy layer's implementations (compiler.op.strategy): the lowering asks
the strategy first and runs these rules where no implementation applies (other dtypes,
matrix-vector dense shapes, ...).
"""
from __future__ import annotations

from compiler.ir.types import TensorType
from compiler.op.nn_batch_matmul_axes import window

from .common import rule, te, tir
from .conv_layout import any_layout


def _acc(x, dtype: str):
    return tir.cast(x, dtype)


def _conv2d(inputs, attrs, out_type):
    data, weight = inputs
    dt = out_type.dtype
    _, c, h, w = data.shape
    o, ig, kh, kw = weight.shape
    og = o // attrs.groups
    (sh, sw), (dh, dw) = attrs.strides, attrs.dilation
    pt, pl = attrs.padding[0], attrs.padding[1]

    def f(n, oc, y, x):
        ic = te.reduce_axis(ig, "ic")
        ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
        iy = y * sh + ry * dh - pt if pt else y * sh + ry * dh
        ix = x * sw + rx * dw - pl if pl else x * sw + rx * dw
        ch = tir.floordiv(oc, og) * ig + ic if attrs.groups > 1 else ic
        conds = []
        if pt or (h - 1) < ((out_type.shape[2] - 1) * sh + (kh - 1) * dh):
            conds += [tir.ge(iy, 0), tir.lt(iy, h)]
        if pl or (w - 1) < ((out_type.shape[3] - 1) * sw + (kw - 1) * dw):
            conds += [tir.ge(ix, 0), tir.lt(ix, w)]
        prod = _acc(data[n, ch, iy, ix], dt) * _acc(weight[oc, ic, ry, rx], dt)
        return te.sum(prod, (ic, ry, rx), where=tir.all(*conds) if conds else None)
    return te.compute(out_type.shape, f, name="T_conv2d")


rule("nn.conv2d")(any_layout("NCHW", "OIHW", _conv2d))


def height1_attrs(attrs, kernel_layout: str):
    """The 2-D attrs of a 1-D convolution over height-1 views (height1)."""
    (left, right) = attrs.padding
    updates = {"strides": (1, *attrs.strides), "dilation": (1, *attrs.dilation),
               "padding": (0, left, 0, right), "data_layout": "NCHW",
               "kernel_layout": kernel_layout, "out_layout": "", "kernel_size": None}
    if "output_padding" in attrs:
        updates["output_padding"] = (0, *attrs.output_padding)
    return attrs.with_updates(**updates)


def height1_shape(shape: tuple) -> tuple:
    """A 1-D convolution's [N, C, W] (or weight [O, I, W]) as the height-1 [N, C, 1, W]."""
    return tuple(shape[:2]) + (1,) + tuple(shape[2:])


def height1(rule2d, name: str, kernel_layout: str):
    """A 1-D convolution rule as the 2-D `rule2d` over height-1 views, so conv1d and
    conv1d_transpose run on the conv2d rules and implementations."""
    def rule1d(inputs, attrs, out_type):
        data, weight = inputs
        data4 = te.compute(height1_shape(data.shape), lambda n, c, h, w: data[n, c, w],
                           name=f"T_{name}_data")
        weight4 = te.compute(height1_shape(weight.shape), lambda a, b, h, k: weight[a, b, k],
                             name=f"T_{name}_weight")
        out4 = rule2d([data4, weight4], height1_attrs(attrs, kernel_layout),
                      TensorType(height1_shape(out_type.shape), out_type.dtype))
        return te.compute(out_type.shape, lambda n, o, w: out4[n, o, 0, w], name=f"T_{name}")
    return rule1d


rule("nn.conv1d")(any_layout("NCW", "OIW", height1(_conv2d, "conv1d", "OIHW")))


def _conv2d_transpose(inputs, attrs, out_type):
    data, weight = inputs
    dt = out_type.dtype
    _, c, h, w = data.shape
    _, og, kh, kw = weight.shape
    ig = c // attrs.groups
    (sh, sw), (dh, dw) = attrs.strides, attrs.dilation
    pt, pl = attrs.padding[0], attrs.padding[1]

    def f(n, oc, y, x):
        ic = te.reduce_axis(ig, "ic")
        ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
        ty = y + pt - ry * dh  # = iy * sh for the contributing input row
        tx = x + pl - rx * dw
        iy, ix = tir.floordiv(ty, sh), tir.floordiv(tx, sw)
        ch = tir.floordiv(oc, og) * ig + ic if attrs.groups > 1 else ic
        conds = [tir.ge(ty, 0), tir.ge(tx, 0), tir.lt(iy, h), tir.lt(ix, w)]
        if sh > 1:
            conds.append(tir.eq(tir.floormod(ty, sh), tir.const(0, "int64")))
        if sw > 1:
            conds.append(tir.eq(tir.floormod(tx, sw), tir.const(0, "int64")))
        prod = _acc(data[n, ch, iy, ix], dt) * _acc(weight[ch, tir.floormod(oc, og), ry, rx], dt)
        return te.sum(prod, (ic, ry, rx), where=tir.all(*conds))
    return te.compute(out_type.shape, f, name="T_conv2d_transpose")


rule("nn.conv2d_transpose")(_conv2d_transpose)
rule("nn.conv1d_transpose")(height1(_conv2d_transpose, "conv1d_transpose", "IOHW"))


@rule("nn.dense")
def _dense(inputs, attrs, out_type):
    data, weight = inputs
    dt, kdim = out_type.dtype, data.shape[-1]

    def f(*i):
        k = te.reduce_axis(kdim, "k")
        return te.sum(_acc(data[i[:-1] + (k,)], dt) * _acc(weight[i[-1], k], dt), k)
    return te.compute(out_type.shape, f, name="T_dense")


@rule("nn.matmul")
def _matmul(inputs, attrs, out_type):
    a, b = inputs
    dt = out_type.dtype
    kdim = a.shape[0] if attrs.transpose_a else a.shape[-1]

    def f(*i):
        k = te.reduce_axis(kdim, "k")
        av = a[k, i[0]] if attrs.transpose_a else a[i[:-1] + (k,)]
        bv = b[i[-1], k] if attrs.transpose_b else b[k, i[-1]]
        return te.sum(_acc(av, dt) * _acc(bv, dt), k)
    return te.compute(out_type.shape, f, name="T_matmul")


@rule("nn.batch_matmul")
def _batch_matmul(inputs, attrs, out_type):
    a, b = inputs
    dt = out_type.dtype
    kdim = a.shape[1] if attrs.transpose_a else a.shape[2]

    def f(bi, m, n):
        k = te.reduce_axis(kdim, "k")
        ba = 0 if a.shape[0] == 1 else bi
        bb = 0 if b.shape[0] == 1 else bi
        av = a[ba, k, m] if attrs.transpose_a else a[ba, m, k]
        bv = b[bb, n, k] if attrs.transpose_b else b[bb, k, n]
        return te.sum(_acc(av, dt) * _acc(bv, dt), k)
    return te.compute(out_type.shape, f, name="T_batch_matmul")


@rule("nn.contrib_batch_matmul_axes")
def _batch_matmul_axes(inputs, attrs, out_type):
    a, b = inputs
    dt = out_type.dtype
    (a0, xs) = window(a.shape, attrs.a_begin, attrs.a_shape, "tensor_a")
    (b0, ys) = window(b.shape, attrs.b_begin, attrs.b_shape, "tensor_b")
    ea, eb = dict(zip(attrs.a_axes, xs)), dict(zip(attrs.b_axes, ys))
    out_axes = attrs.out_axes
    ext = {"B": ea["B"], "M": ea["M"], "N": eb["N"]}
    perm = tuple(ext[c] for c in out_axes)

    def c(*i):  # the out_axes-ordered result, then viewed as out_type's shape
        k = te.reduce_axis(ea["K"], "k")
        at = dict(zip(out_axes, i))
        av = a[tuple({"B": at["B"], "M": at["M"], "K": k}[x] + o
                     for x, o in zip(attrs.a_axes, a0))]
        bv = b[tuple({"B": at["B"], "N": at["N"], "K": k}[x] + o
                     for x, o in zip(attrs.b_axes, b0))]
        return te.sum(_acc(av, dt) * _acc(bv, dt), k)
    result = te.compute(perm, c, name="T_batch_matmul")
    if perm == tuple(out_type.shape):
        return result
    return te.compute(tuple(out_type.shape), lambda *i: result[_unmerge(i, perm,
                                                                        out_type.shape)],
                      name="T_batch_matmul_view")


def _unmerge(index, inner, outer) -> tuple:
    """The row-major index into `inner` of element `index` of the same data shaped `outer`."""
    flat = 0
    for i, d in zip(index, outer):
        flat = flat * d + i
    out = []
    for d in reversed(inner):
        out.append(flat % d)
        flat = flat // d
    return tuple(reversed(out))
