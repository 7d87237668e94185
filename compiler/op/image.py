"""relay.image ops: grid_sample (TVM's name and attrs; ONNX GridSample semantics).

grid is channel-first as in TVM: [N, ndim, *out_spatial] with grid[:, 0] the x (last, width)
coordinate in [-1, 1]. Nearest rounds half to even and the padding modes follow ONNX's
reference (PyTorch's GridSampler), so the converter only transposes the grid.
"""
from __future__ import annotations

import itertools

import numpy as np

from compiler.ir.types import TensorType
from .registry import OpDef, OpPattern, make_call, register
from .type_relations import check_arity, dims_agree, fail, known, tensor_arg

__all__ = ["grid_sample"]

METHODS = ("nearest", "bilinear", "bicubic")
PADDING_MODES = ("zeros", "border", "reflection")
_LAYOUTS = {"NCHW": 2, "NCDHW": 3}
CUBIC_A = -0.75


def _grid_sample_rel(types, attrs):
    op = "image.grid_sample"
    check_arity(op, types, 2)
    data, grid = tensor_arg(op, types, 0, "data"), tensor_arg(op, types, 1, "grid")
    if attrs.layout not in _LAYOUTS:
        raise fail(op, f"layout={attrs.layout!r} is not supported; expected NCHW or NCDHW")
    nd = _LAYOUTS[attrs.layout]
    if attrs.method not in METHODS or (nd == 3 and attrs.method == "bicubic"):
        raise fail(op, f"method={attrs.method!r} is not supported for {attrs.layout}; expected "
                       f"one of {METHODS[:3 if nd == 2 else 2]}")
    if attrs.padding_mode not in PADDING_MODES:
        raise fail(op, f"padding_mode={attrs.padding_mode!r}; expected one of {PADDING_MODES}")
    if data.ndim != nd + 2 or grid.ndim != nd + 2 or \
            not dims_agree(op, grid.shape[1], nd, f"grid dim 1 must be {nd}"):
        raise fail(op, f"{attrs.layout} needs data of rank {nd + 2} and grid [N, {nd}, ...], "
                       f"got data {data.shape} and grid {grid.shape}")
    if not dims_agree(op, grid.shape[0], data.shape[0], "data and grid batch sizes must agree"):
        raise fail(op, f"batch sizes differ: data {data.shape} vs grid {grid.shape}")
    if data.dtype not in ("float32", "float64") or grid.dtype not in ("float32", "float64"):
        raise fail(op, f"data and grid must be float32/float64, got {data.dtype}, {grid.dtype}")
    return TensorType((known(data.shape[0], grid.shape[0]),) + data.shape[1:2] + grid.shape[2:],
                      data.dtype)


def denormalize(g, size: int, align_corners: bool):
    """[-1, 1] -> pixel coordinate (corner pixel centres, or corner pixel edges)."""
    return (g + 1) / 2 * (size - 1) if align_corners else ((g + 1) * size - 1) / 2


def bounds(size: int, align_corners: bool) -> tuple:
    """The coordinate range reflection folds into."""
    return (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)


def reflect(x, lo: float, hi: float):
    """Fold x into [lo, hi] by repeated reflection at the borders (ONNX's _gs_reflect)."""
    rng = hi - lo
    if rng <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    dx = np.where(below, lo - x, np.where(above, x - hi, 0))
    n = np.trunc(dx / rng)
    r = dx - n * rng
    even = np.mod(n, 2) == 0
    low_side = np.where(below, even, ~even)
    return np.where(below | above, np.where(low_side, lo + r, hi - r), x)


def cubic_weights(t):
    """Keys' cubic convolution weights (A = -0.75) of the taps at -1, 0, 1, 2."""
    a = CUBIC_A

    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _taps(x, method: str, dtype):
    """(integer tap positions, weights) along one axis for coordinates x."""
    if method == "nearest":
        return [np.trunc(x).astype(np.int64)], [np.ones_like(x)]
    x0 = np.floor(x)
    t = (x - x0).astype(dtype)
    x0 = x0.astype(np.int64)
    if method == "bilinear":
        return [x0, x0 + 1], [1 - t, t]
    return [x0 - 1, x0, x0 + 1, x0 + 2], cubic_weights(t)


def _grid_sample_ref(inputs, attrs):
    data, grid = inputs
    dt = data.dtype
    nd = _LAYOUTS[attrs.layout]
    sizes = data.shape[2:]
    n, c = data.shape[:2]
    out = np.zeros(data.shape[:2] + grid.shape[2:], dt)
    per_axis = []
    for a in range(nd):
        size = sizes[a]
        lo, hi = bounds(size, attrs.align_corners)
        x = denormalize(grid[:, nd - 1 - a].astype(dt), size, attrs.align_corners)
        if attrs.method == "nearest":
            x = np.rint(x)
        if attrs.padding_mode == "border":
            x = np.where((x < lo) | (x > hi), np.clip(x, 0, size - 1), x)
        elif attrs.padding_mode == "reflection":
            x = reflect(x, lo, hi)
        x = np.where(np.isfinite(x), x, -2.0).clip(-8.0, size + 8.0)
        taps, weights = _taps(x, attrs.method, dt)
        fixed = []
        for i in taps:
            valid = (i >= 0) & (i < size)
            if attrs.padding_mode == "border":
                i = np.clip(i, 0, size - 1)
            elif attrs.padding_mode == "reflection":
                i = np.trunc(reflect(i.astype(np.float64), lo, hi)).astype(np.int64)
            if attrs.padding_mode != "zeros":
                valid = np.ones_like(valid)
            fixed.append((np.clip(i, 0, size - 1), valid))
        per_axis.append(list(zip(fixed, weights)))
    batch = np.arange(n).reshape((n,) + (1,) * (grid.ndim - 2))
    for combo in itertools.product(*per_axis):
        weight = np.ones((), dt)
        valid = True
        idx = []
        for (i, ok), w in combo:
            weight = weight * w
            valid = valid & ok
            idx.append(i)
        picked = data[(batch[:, None], np.arange(c)[None, :].reshape((1, c) + (1,) * (nd)))
                      + tuple(i[:, None] for i in idx)]
        out += np.where(valid[:, None], weight[:, None] * picked, 0).astype(dt)
    return out


register(OpDef(name="image.grid_sample", num_inputs=2, type_rel=_grid_sample_rel,
               pattern=OpPattern.INJECTIVE, reference=_grid_sample_ref,
               attrs={"method": "bilinear", "layout": "NCHW", "padding_mode": "zeros",
                      "align_corners": True},
               attrs_type_key="relay.attrs.GridSampleAttrs"))


def grid_sample(data, grid, method="bilinear", layout="NCHW", padding_mode="zeros",
                align_corners=True):
    """relay.image.grid_sample: sample data at the normalised coordinates in grid."""
    return make_call("image.grid_sample", [data, grid], method=method, layout=layout,
                     padding_mode=padding_mode, align_corners=bool(align_corners))
