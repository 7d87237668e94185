"""conv2d NCHW schedule (direct 16/32-channel x 6-pixel micro-kernel, depthwise) vs numpy."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te, tir
from codegen.jit import build_te, get_llvm_ir
from codegen.lower import lower
from codegen.schedules import conv2d_nchw, conv2d_nchw_packed
from codegen.schedules.window import depthwise_conv2d_nchw

from tests.schedule_helpers import conv_pack, host

RNG = np.random.default_rng(11)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def conv(x, w, st, pad, dil, groups=1, options=None):
    """conv2d as the strategy computes it: one input channel a group per channel plane
    (depthwise), else the direct family."""
    schedule = depthwise_conv2d_nchw if w.shape[1] == 1 else conv2d_nchw
    return schedule(x, w, st, pad, dil, groups, options=options or host())


def ref_conv(x, w, st, pad, dil, groups):
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x.astype("f8"), ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    oh = (xp.shape[2] - dil[0] * (r - 1) - 1) // st[0] + 1
    ow = (xp.shape[3] - dil[1] * (s - 1) - 1) // st[1] + 1
    out = np.zeros((n, k, oh, ow))
    kg = k // groups
    for g in range(groups):
        for rr in range(r):
            for ss in range(s):
                patch = xp[:, g * cg:(g + 1) * cg,
                           rr * dil[0]:rr * dil[0] + st[0] * (oh - 1) + 1:st[0],
                           ss * dil[1]:ss * dil[1] + st[1] * (ow - 1) + 1:st[1]]
                out[:, g * kg:(g + 1) * kg] += np.einsum(
                    "nchw,kc->nkhw", patch, w[g * kg:(g + 1) * kg, :, rr, ss])
    return out


CASES = [
    # x shape, w shape, strides, padding (t, l, b, r), dilation, groups
    ((1, 3, 9, 9), (5, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 8, 10, 7), (20, 8, 3, 3), (2, 2), (1, 0, 2, 1), (1, 1), 1),
    ((1, 16, 12, 12), (32, 4, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 4),
    ((1, 6, 11, 11), (6, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 6),
    ((1, 6, 11, 11), (12, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 6),
    ((1, 4, 9, 41), (4, 1, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 4),  # depthwise, wide, unpadded
    ((1, 3, 23, 23), (16, 3, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1),
    # windows over ROW_LOOP_TAPS loop over their rows in the micro-kernel
    ((1, 8, 19, 17), (34, 4, 5, 5), (1, 2), (2, 1, 3, 2), (2, 3), 2),
    ((1, 32, 7, 7), (17, 32, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 1, 1, 1), (1, 1, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 5, 6, 13), (40, 5, 2, 3), (3, 1), (0, 2, 1, 0), (2, 1), 1),
    ((1, 12, 9, 9), (6, 4, 3, 1), (1, 2), (1, 0, 1, 0), (1, 3), 3),
    ((1, 64, 14, 14), (64, 64, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 16, 9, 7), (24, 16, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # 1x1 as GEMM
    ((1, 12, 10, 9), (68, 3, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 4),  # grouped 1x1 as GEMM
]


@pytest.mark.parametrize("xs,ws,st,pad,dil,groups", CASES)
def test_conv2d(xs, ws, st, pad, dil, groups, width) -> None:
    x, w = te.placeholder(xs, name="x"), te.placeholder(ws, name="w")
    run = build_te([x, w], [conv(x, w, st, pad, dil, groups)], "conv")
    a, b = _f32(*xs), _f32(*ws)
    want = ref_conv(a, b, st, pad, dil, groups)
    got = run(a, b)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,ws,st,pad,dil,groups", [CASES[1], CASES[3], CASES[6], *CASES[-2:]])
def test_conv2d_fused_bias_relu_residual(xs, ws, st, pad, dil, groups, width) -> None:
    x, w = te.placeholder(xs, name="x"), te.placeholder(ws, name="w")
    c = conv(x, w, st, pad, dil, groups)
    bias, res = te.placeholder((ws[0], 1, 1), name="bias"), te.placeholder(c.shape, name="res")
    y = te.compute(c.shape, lambda n, k, h, v: c[n, k, h, v] + bias[k, 0, 0], name="b")
    z = te.compute(c.shape, lambda *i: tir.max(y[i] + res[i], tir.const(0.0)), name="relu")
    run = build_te([x, w, bias, res], [z], "conv_epi")
    assert "T_conv2d[" not in str(run.primfunc), "the epilogue was not fused"
    a, b, c, r = _f32(*xs), _f32(*ws), _f32(ws[0], 1, 1), _f32(*c.shape)
    want = np.maximum(ref_conv(a, b, st, pad, dil, groups) + c + r, 0)
    np.testing.assert_allclose(run(a, b, c, r)[0], want, rtol=1e-4, atol=1e-4)


def test_conv_micro_kernel_is_vector_fma() -> None:
    x, w = te.placeholder((1, 8, 8, 8), name="x"), te.placeholder((16, 8, 3, 3), name="w")
    func = lower("conv_fma", [x, w], [conv2d_nchw(x, w, (1, 1), (1, 1, 1, 1),
                                                  options=host(8))])
    text = get_llvm_ir([func], options=host())
    assert "@llvm.fma.v8f32(<8 x float>" in text


def test_conv_kernels_prefer_the_micro_kernel_vector_width(width) -> None:
    """The conv kernel's own loops (padding copies, edge tiles, epilogue) are asked to
    vectorise at the micro-kernel's width; a plain elementwise kernel is left to LLVM."""
    x, w = te.placeholder((1, 8, 8, 8), name="x"), te.placeholder((16, 8, 3, 3), name="w")
    c = conv2d_nchw(x, w, (1, 1), (1, 1, 1, 1), options=host())
    relu = te.compute(c.shape, lambda *i: tir.ops.max(c[i], tir.ops.const(0.0, "float32")),
                      name="relu")
    func = lower("conv_width", [x, w], [relu])  # the epilogue keeps the conv's attrs
    assert func.attrs == {"prefer_vector_width": 32 * width}
    text = get_llvm_ir([func], optimized=False, options=host())
    defines = [line for line in text.splitlines() if line.startswith("define")]
    assert defines and all(f'"prefer-vector-width"="{32 * width}"' in d for d in defines)
    y = te.placeholder((64,), name="y")
    plain = lower("exp", [y], [te.compute((64,), lambda i: tir.ops.exp(y[i]), name="e")])
    assert plain.attrs == {} and "prefer-vector-width" not in get_llvm_ir([plain], options=host())


def _pack(w: np.ndarray, groups: int) -> np.ndarray:
    """w [K, Cg, R, S] -> Wp[G, ceil(Kg/KB), Cg, R, S, KB] per conv2d_pack_geometry."""
    k, cg, r, s = w.shape
    geo = conv_pack(k, cg, r, s, groups)
    kb, kg = geo[-1], k // groups
    wp = np.zeros(geo, np.float32)
    for kk in range(k):
        g, kin = divmod(kk, kg)
        wp[g, kin // kb, :, :, :, kin % kb] = w[kk]
    return wp


ROWS_CASES = [
    # x shape, w shape, strides, padding, dilation: short reductions and few output channels
    # (the _rows schedule), odd widths and channel counts, a window over ROW_LOOP_TAPS
    ((1, 3, 37, 41), (13, 3, 3, 3), (2, 2), (0, 1, 1, 0), (1, 1)),
    ((2, 3, 20, 33), (24, 3, 5, 5), (2, 1), (2, 2, 2, 2), (1, 2)),
    ((1, 16, 18, 19), (16, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((1, 3, 23, 23), (64, 3, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1)),  # the direct schedule
    ((2, 16, 9, 11), (21, 16, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),  # pointwise, tail tile
    ((1, 24, 8, 8), (40, 24, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),  # pointwise, no tail
]


@pytest.mark.parametrize("xs,ws,st,pad,dil", ROWS_CASES)
def test_conv2d_packed_rows_with_epilogue(xs, ws, st, pad, dil, width) -> None:
    x = te.placeholder(xs, name="x")
    wp = te.placeholder(conv_pack(ws[0], ws[1], ws[2], ws[3]), name="wp")
    c = conv2d_nchw_packed(x, wp, st, pad, dil, 1, channels=ws[0], options=host())
    bias = te.placeholder((ws[0], 1, 1), name="bias")
    y = te.compute(c.shape, lambda *i: tir.max(c[i] + bias[i[1], 0, 0], tir.const(0.0)),
                   name="relu")
    run = build_te([x, wp, bias], [y], "conv_rows")
    rows = "convrows" in str(run.primfunc)
    assert rows == (ws[0] <= 32 or ws[1] * ws[2] * ws[3] <= 48 or ws[2] * ws[3] == 1), \
        str(run.primfunc)[:2000]
    a, w, c = _f32(*xs), _f32(*ws), _f32(ws[0], 1, 1)
    want = np.maximum(ref_conv(a, w, st, pad, dil, 1) + c, 0)
    np.testing.assert_allclose(run(a, _pack(w, 1), c)[0], want, rtol=1e-4, atol=1e-4)
