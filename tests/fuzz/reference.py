"""onnx.reference.ReferenceEvaluator with its known defects patched (the oracle).

The fuzzer found these in onnx 1.23's reference implementation (onnxruntime and relayjit
agree with each other and with the spec against it), so the oracle overrides them instead of
blaming relayjit:

- Conv lets a NaN at an input position that a dilated window skips reach the output.
- Softmax / LogSoftmax / Hardmax before opset 13 coerce the input to 2-D at `axis` (default
  1); the reference only has the opset-13 per-axis semantics. LogSoftmax of an empty tensor
  fails (a max over an empty axis).
- ConvTranspose with group > 1 computes garbage or fails to reshape; patched to run the
  reference's own group=1 implementation per group.
- Integer ReduceSumSquare / ReduceL1 / ReduceSum / ReduceProd return int64 for int32 input
  (numpy's sum upcast); the spec keeps the input type (wrapping as the engines do).
- Pad with negative pads (cropping, valid since opset 11) fails in np.pad.
- Flatten of an empty tensor fails to reshape with -1.
- BatchNormalization before opset 14 uses batch statistics (the schema's default momentum
  is always loaded, which the stock code reads as training mode).
- GlobalMaxPool / GlobalAveragePool of 3-D spatial inputs keep a spatial dim; MaxPool /
  AveragePool with auto_pad SAME_* compute the wrong output size or negative pads; Squeeze
  with unsorted axes squeezes the wrong dims. Pools are therefore defined here directly
  (asymmetric pads break the stock pools' output size). Unsqueeze with mixed negative axes.
- GatherElements with a negative axis compares the wrong dims; Mean does not broadcast
  when the first input is the smaller one.
- Resize turns a zero-weight tap on an infinite input into NaN (0 * inf), and saturates an
  infinite float16/float32 result to the dtype's largest finite value.
- QLinearConv / QLinearMatMul add the output zero point before rounding, in float64; the
  fuzzer compares integer results with onnxruntime's requantisation instead:
  round_half_even(float32(acc) * float32(x_scale * w_scale / y_scale)) + zero point.
  QuantizeLinear casts to int32 before saturating (garbage beyond 2^31, NaN to int32 min):
  here values saturate and NaN gives the type's minimum, as onnxruntime. DequantizeLinear
  has no implementation before opset 19.
"""
from __future__ import annotations

import warnings

import numpy as np
from onnx import helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from onnx.reference.ops import load_op


class _Patched(OpRun):
    """Reads its attributes from the node itself and keeps the stock implementation at hand."""

    op_domain = ""

    def __init__(self, onnx_node, run_params):
        OpRun.__init__(self, onnx_node, run_params)
        self.opset = int(run_params["opsets"].get("", 1))
        self.attrs = {a.name: helper.get_attribute_value(a) for a in onnx_node.attribute}
        for key, value in list(self.attrs.items()):
            if isinstance(value, bytes):
                self.attrs[key] = value.decode()
        self.stock = load_op("", onnx_node.op_type, self.opset)(onnx_node, run_params)

    def _run(self, *inputs, **_attributes):
        return self.fix(*inputs)

    def fix(self, *inputs):
        raise NotImplementedError


def _coerced(x: np.ndarray, axis: int, fn) -> np.ndarray:
    """Apply fn along axis 1 of x viewed as 2-D at `axis` (the pre-opset-13 semantics)."""
    axis = axis + x.ndim if axis < 0 else axis
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    cols = int(np.prod(x.shape[axis:], dtype=np.int64))
    if x.size == 0:
        return x
    return fn(x.reshape(rows, cols), 1).reshape(x.shape)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _hardmax(x, axis):
    out = np.zeros_like(x)
    idx = np.expand_dims(np.argmax(x, axis=axis), axis)
    np.put_along_axis(out, idx, 1, axis=axis)
    return out


class _SoftmaxFamily(_Patched):
    fn = staticmethod(_softmax)

    def fix(self, x):
        if self.opset >= 13:
            return self.stock.run(x)
        axis = self.attrs.get("axis", 1)
        return (_coerced(x, axis, self.fn).astype(x.dtype),)


class Softmax(_SoftmaxFamily):
    fn = staticmethod(_softmax)


class LogSoftmax(_SoftmaxFamily):
    """x - max - log(sum(exp(x - max))) in float64 at every opset: the stock version takes
    the log of the softmax, -inf wherever a probability underflows (onnxruntime and relayjit
    give the finite value)."""
    fn = staticmethod(_log_softmax)

    def fix(self, x):
        if self.opset < 13:
            return super().fix(x)
        if x.size == 0:  # np.max of an empty axis fails; the result is as empty as x
            return (x.copy(),)
        wide = _log_softmax(x.astype(np.float64), self.attrs.get("axis", -1))
        return (wide.astype(x.dtype),)


class LayerNormalization(_Patched):
    """Normalised in float64 and rounded once (the stock version rounds float16 on the way,
    where onnxruntime computes in float32)."""

    def fix(self, x, scale, bias=None):
        axis = self.attrs.get("axis", -1)
        axis = axis + x.ndim if axis < 0 else axis
        axes = tuple(range(axis, x.ndim))
        wide = x.astype(np.float64)
        mean = wide.mean(axis=axes, keepdims=True)
        inv_std = 1.0 / np.sqrt(((wide - mean) ** 2).mean(axis=axes, keepdims=True)
                                + float(self.attrs.get("epsilon", 1e-5)))
        y = (wide - mean) * inv_std * scale.astype(np.float64)
        if bias is not None:
            y = y + bias.astype(np.float64)
        stash = np.float32 if self.attrs.get("stash_type", 1) == 1 else x.dtype
        return (y.astype(x.dtype), mean.astype(stash), inv_std.astype(stash))[
            :max(1, len(self.onnx_node.output))]


class Hardmax(_SoftmaxFamily):
    fn = staticmethod(_hardmax)


class ConvTranspose(_Patched):
    """A direct definition: every input pixel scatters x * w into the strided output."""

    def fix(self, x, w, bias=None):
        a = self.attrs
        nd = x.ndim - 2
        group = int(a.get("group", 1))
        kernel = w.shape[2:]
        strides = a.get("strides", [1] * nd)
        dil = a.get("dilations", [1] * nd)
        pads = a.get("pads", [0] * 2 * nd)
        outpad = a.get("output_padding", [0] * nd)
        if a.get("auto_pad", "NOTSET") not in ("NOTSET", "") or "output_shape" in a:
            return self.stock.run(x, w, bias)
        n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
        cin, cout = c // group, w.shape[1]
        full = [(i - 1) * s + (k - 1) * d + 1 + p
                for i, s, k, d, p in zip(spatial, strides, kernel, dil, outpad)]
        buf = np.zeros((n, cout * group, *full), np.float64)
        xd, wd = x.astype(np.float64), w.astype(np.float64)
        for g in range(group):
            xg = xd[:, g * cin:(g + 1) * cin]
            wg = wd[g * cin:(g + 1) * cin]
            for kk in np.ndindex(*kernel):
                contrib = np.einsum("nc...,cm->nm...", xg, wg[(slice(None), slice(None)) + kk])
                where = tuple(slice(k * d, k * d + (i - 1) * s + 1, s)
                              for k, d, i, s in zip(kk, dil, spatial, strides))
                buf[(slice(None), slice(g * cout, (g + 1) * cout)) + where] += contrib
        crop = tuple(slice(pads[j], full[j] - pads[j + nd]) for j in range(nd))
        y = buf[(slice(None), slice(None)) + crop]
        if bias is not None:
            y = y + bias.astype(np.float64).reshape((-1,) + (1,) * nd)
        return (y.astype(x.dtype),)


class BatchNormalization(_Patched):
    def fix(self, x, scale, bias, mean, var):
        if self.opset >= 14 and self.attrs.get("training_mode", 0):
            return self.stock.run(x, scale, bias, mean, var)
        # before opset 14 the stock version applies momentum (training statistics) whenever
        # the schema's default momentum is loaded, i.e. always
        shape = (-1,) + (1,) * (x.ndim - 2)
        eps = float(self.attrs.get("epsilon", 1e-5))
        y = (scale.reshape(shape) * (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
             + bias.reshape(shape))
        return (y.astype(x.dtype),)


class GatherElements(_Patched):
    def fix(self, data, indices):
        axis = int(self.attrs.get("axis", 0)) % data.ndim
        idx = np.where(indices < 0, indices + data.shape[axis], indices)
        return (np.take_along_axis(data, idx.astype(np.int64), axis=axis),)


class Mean(_Patched):
    def fix(self, *args):
        total = args[0].astype(np.float64) if args[0].dtype != np.float64 else args[0]
        for m in args[1:]:
            total = total + m
        return ((total / len(args)).astype(args[0].dtype),)


class _KeepIntType(_Patched):
    def fix(self, data, *rest):
        out = self.stock.run(data, *rest)[0]
        if data.dtype.kind in "iu" and out.dtype != data.dtype:
            out = out.astype(data.dtype)
        return (np.asarray(out),)


class ReduceSumSquare(_KeepIntType):
    pass


class ReduceL1(_KeepIntType):
    pass


class ReduceSum(_KeepIntType):
    pass


class ReduceProd(_KeepIntType):
    pass


class Pad(_Patched):
    def fix(self, data, pads, constant_value=None, axes=None):
        pads = [int(p) for p in pads]
        if min(pads, default=0) < 0:  # crop first, then pad what is positive
            rank = data.ndim
            axes_l = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
            n = len(axes_l)
            crop = [slice(None)] * rank
            for i, axis in enumerate(axes_l):
                begin, end = pads[i], pads[i + n]
                crop[axis] = slice(max(-begin, 0), data.shape[axis] + min(end, 0))
            data = data[tuple(crop)]
            pads = [max(p, 0) for p in pads]
        args = [data, np.asarray(pads, np.int64), constant_value]
        if axes is not None:
            args.append(axes)
        return self.stock.run(*args)


class Flatten(_Patched):
    def fix(self, x):
        axis = int(self.attrs.get("axis", 1))
        axis = axis + x.ndim if axis < 0 else axis
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        return (x.reshape(rows, int(np.prod(x.shape[axis:], dtype=np.int64))),)


class GlobalMaxPool(_Patched):
    def fix(self, x):
        return (x.max(axis=tuple(range(2, x.ndim)), keepdims=True),)


class GlobalAveragePool(_Patched):
    def fix(self, x):
        return (x.mean(axis=tuple(range(2, x.ndim)), keepdims=True).astype(x.dtype),)


def _windows(x: np.ndarray, attrs: dict, kernel: list, conv: bool = False) -> tuple:
    """Every sliding window of x, gathered: (windows (N, C, o0, k0, o1, k1, ...), valid mask,
    in-padding mask, per-dim position index), following auto_pad / pads / ceil_mode."""
    nd = x.ndim - 2
    strides = list(attrs.get("strides", [1] * nd))
    dil = list(attrs.get("dilations", [1] * nd))
    pads = list(attrs.get("pads", [0] * 2 * nd))
    spatial = x.shape[2:]
    mode = attrs.get("auto_pad", "NOTSET")
    out = []
    for j in range(nd):
        n, k, s, d = spatial[j], kernel[j], strides[j], dil[j]
        eff = (k - 1) * d + 1
        if mode in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-n // s)
            total = max((o - 1) * s + eff - n, 0)
            small, big = total // 2, total - total // 2
            pads[j], pads[j + nd] = (small, big) if mode == "SAME_UPPER" else (big, small)
        elif mode == "VALID":
            pads[j] = pads[j + nd] = 0
            o = (n - eff) // s + 1
        else:
            span = n + pads[j] + pads[j + nd] - eff
            if attrs.get("ceil_mode", 0) and not conv:
                o = -(-span // s) + 1
                if (o - 1) * s >= n + pads[j]:
                    o -= 1
            else:
                o = span // s + 1
        out.append(o)
    index, valid, inpad = [], None, None
    for j in range(nd):
        pos = (np.arange(out[j]) * strides[j] - pads[j])[:, None] + np.arange(kernel[j]) * dil[j]
        shape = [1] * (2 * nd)
        shape[2 * j], shape[2 * j + 1] = out[j], kernel[j]
        index.append(np.clip(pos, 0, max(spatial[j] - 1, 0)).reshape(shape))
        ok = ((pos >= 0) & (pos < spatial[j])).reshape(shape)
        padded = ((pos >= -pads[j]) & (pos < spatial[j] + pads[j + nd])).reshape(shape)
        valid = ok if valid is None else valid & ok
        inpad = padded if inpad is None else inpad & padded
    windows = x[(slice(None), slice(None)) + tuple(index)].astype(np.float64)
    return windows, valid, inpad, index


class Conv(_Patched):
    """A direct definition (gathered windows times the weights): the stock version lets a
    NaN at an input position a dilated window skips leak into the output."""

    def fix(self, x, w, bias=None):
        nd = x.ndim - 2
        group = int(self.attrs.get("group", 1))
        kernel = list(w.shape[2:])
        windows, valid, _, _ = _windows(x, self.attrs, kernel, conv=True)
        windows = np.where(valid, windows, 0.0)
        cin, cout = x.shape[1] // group, w.shape[0] // group
        outs, ks = "pqr"[:nd], "uvw"[:nd]
        win = "nc" + "".join(o + k for o, k in zip(outs, ks))
        spec = f"{win},mc{ks}->nm{outs}"
        parts = [np.einsum(spec, windows[:, g * cin:(g + 1) * cin],
                           w[g * cout:(g + 1) * cout].astype(np.float64), optimize=True)
                 for g in range(group)]
        y = np.concatenate(parts, axis=1)
        if bias is not None:
            y = y + bias.astype(np.float64).reshape((-1,) + (1,) * nd)
        return (y.astype(x.dtype),)


class _Pool(_Patched):
    """MaxPool (with Indices), AveragePool and LpPool defined directly: every window is a
    gather of kernel positions; positions outside the input are ignored (max, Lp), or
    counted when inside the pads and count_include_pad=1 (average). The stock versions get
    asymmetric pads, SAME auto_pad and some ceil_mode shapes wrong."""

    def fix(self, x):
        kernel = list(self.attrs["kernel_shape"])
        windows, valid, inpad, index = _windows(x, self.attrs, kernel)
        kaxes = tuple(3 + 2 * j for j in range(x.ndim - 2))
        return self.reduce(x, windows, valid, inpad, kaxes, index)


class MaxPool(_Pool):
    def reduce(self, x, windows, valid, inpad, kaxes, index):
        masked = np.where(valid, windows, -np.inf)
        y = masked.max(axis=kaxes).astype(x.dtype)
        if len(self.onnx_node.output) < 2 or not self.onnx_node.output[1]:
            return (y,)
        nd = x.ndim - 2
        spatial, out = x.shape[2:], y.shape[2:]
        # the linear (row- or column-major) spatial offset of every window cell
        order = reversed(range(nd)) if self.attrs.get("storage_order", 0) else range(nd)
        lin = np.zeros(valid.shape, np.int64)
        for j in order:
            lin = lin * spatial[j] + np.broadcast_to(index[j], valid.shape)
        perm = tuple(range(0, 2 * nd, 2)) + tuple(range(1, 2 * nd, 2))
        lin = np.transpose(lin, perm).reshape(tuple(out) + (-1,))
        cells = np.transpose(masked, (0, 1) + tuple(2 + a for a in perm))
        best = cells.reshape(cells.shape[:2 + nd] + (-1,)).argmax(axis=-1)
        offset = np.take_along_axis(np.broadcast_to(lin, best.shape + lin.shape[-1:]),
                                    best[..., None], axis=-1)[..., 0]
        plane = int(np.prod(spatial))
        base = np.arange(x.shape[0] * x.shape[1]).reshape(x.shape[:2] + (1,) * nd) * plane
        return y, (base + offset).astype(np.int64)


class AveragePool(_Pool):
    def reduce(self, x, windows, valid, inpad, kaxes, index):
        total = np.where(valid, windows, 0.0).sum(axis=kaxes)
        counted = inpad if self.attrs.get("count_include_pad", 0) else valid
        count = np.broadcast_to(counted, windows.shape[2:]).sum(axis=tuple(k - 2 for k in kaxes))
        # a window with nothing to count (dilated or strided past the input, inside no
        # pads) averages to 0, as onnxruntime and relayjit give, not 0 / 0
        return ((total / np.maximum(count, 1)).astype(x.dtype),)


class LpPool(_Pool):
    def reduce(self, x, windows, valid, inpad, kaxes, index):
        p = float(self.attrs.get("p", 2))
        total = (np.where(valid, np.abs(windows), 0.0) ** p).sum(axis=kaxes)
        return ((total ** (1.0 / p)).astype(x.dtype),)


class Unsqueeze(_Patched):
    """Mixed negative axes (the stock version normalises them against the input rank)."""

    def fix(self, x, axes=None):
        axes = self.attrs.get("axes") if axes is None else axes
        rank = x.ndim + len(np.ravel(axes))
        for axis in sorted(int(a) % rank for a in np.ravel(axes)):
            x = np.expand_dims(x, axis)
        return (x,)


class Squeeze(_Patched):
    """Unsorted axes (the stock version squeezes them one by one without renumbering)."""

    def fix(self, x, axes=None):
        axes = self.attrs.get("axes") if axes is None else axes
        if axes is None:
            return (np.squeeze(x),) if x.ndim else (x,)
        return (np.squeeze(x, axis=tuple(int(a) % x.ndim for a in np.ravel(axes))),)


class Resize(_Patched):
    """Interpolation of finite values, with infinities and NaN placed by IEEE rules.

    The stock version adds 0 * x for a tap whose weight is 0 at a position (NaN next to an
    infinite x; even nearest mode is a one-hot weighted sum), and saturate-casts float16 /
    float32 results (an infinite result becomes the largest finite value). Here a zero
    weight means the tap takes no part (as in relayjit, and onnxruntime's nearest and
    antialiased modes): the finite values are interpolated with non-finite ones as 0, and
    indicator images of +inf, -inf and NaN (minus the all-zero image, which holds the
    extrapolation value) say where a non-finite input has a nonzero weight. That is exact
    for non-negative weights; cubic's negative ones could cancel, so the generator gives
    cubic Resize finite inputs only.
    """

    def fix(self, x, *rest):
        if x.dtype.kind != "f":
            return self.stock.run(x, *rest)
        x64 = x.astype(np.float64)
        finite = np.isfinite(x64)
        (y,) = self.stock.run(np.where(finite, x64, 0.0), *rest)
        (base,) = self.stock.run(np.zeros_like(x64), *rest)
        pos, neg, nan = (self.stock.run(mask.astype(np.float64), *rest)[0] - base
                         for mask in (x64 == np.inf, x64 == -np.inf, np.isnan(x64)))
        plus, minus = (pos > 0) | (neg < 0), (pos < 0) | (neg > 0)
        y = np.where(plus, np.inf, np.where(minus, -np.inf, y))
        y = np.where((plus & minus) | (nan != 0), np.nan, y)
        return (y.astype(x.dtype),)


def _requantized(acc: np.ndarray, multiplier: np.ndarray, zero_point, dtype) -> np.ndarray:
    """onnxruntime's MlasRequantizeOutput: float32(acc) * multiplier, half to even, + zp."""
    info = np.iinfo(dtype)
    zp = np.int64(np.asarray(zero_point).reshape(()) if zero_point is not None else 0)
    r = np.rint(acc.astype(np.float32) * multiplier.astype(np.float32)).astype(np.float64)
    return (np.clip(r, info.min - zp, info.max - zp).astype(np.int64) + zp).astype(dtype)


def _centered(q: np.ndarray, zero_point, axis: int = 0) -> np.ndarray:
    out = q.astype(np.int64)
    if zero_point is None:
        return out
    zp = np.asarray(zero_point).astype(np.int64)
    if zp.size > 1:
        zp = zp.reshape((-1,) + (1,) * (q.ndim - axis - 1))
    return out - zp.reshape(()) if zp.size == 1 else out - zp


class QLinearConv(_Patched):
    def fix(self, x, xs, xz, w, ws, wz, ys, yz, bias=None):
        from onnx.reference.ops.op_conv import _conv_implementation
        st = self.stock
        acc = _conv_implementation(_centered(x, xz), _centered(w, wz), None, st.auto_pad,
                                   st.dilations, st.group, st.kernel_shape, st.pads,
                                   st.strides).astype(np.int64)
        if bias is not None:
            acc = acc + bias.astype(np.int64).reshape((1, -1) + (1,) * (acc.ndim - 2))
        m = (np.float32(xs.reshape(())) * ws.astype(np.float32)) / np.float32(ys.reshape(()))
        m = m.reshape((1, -1) + (1,) * (acc.ndim - 2)) if m.size > 1 else m.reshape(())
        return (_requantized(acc.astype(np.int32), m, yz, yz.dtype if yz is not None
                             else x.dtype),)


class QLinearMatMul(_Patched):
    def fix(self, a, a_s, az, b, b_s, bz, ys, yz):
        acc = np.matmul(_centered(a, az), _centered(b, bz, b.ndim - 1))
        m = (np.float32(a_s.reshape(())) * b_s.astype(np.float32)) / np.float32(ys.reshape(()))
        return (_requantized(acc.astype(np.int32), m if m.size > 1 else m.reshape(()), yz,
                             yz.dtype if yz is not None else a.dtype),)


class QuantizeLinear(_Patched):
    def fix(self, x, scale, zero_point=None):
        dtype = np.dtype(zero_point.dtype) if zero_point is not None else np.dtype("uint8")
        if dtype.kind not in "iu" or self.attrs.get("block_size") or x.dtype != np.float32:
            return self.stock.run(x, scale, zero_point)
        axis = self.attrs.get("axis", 1) % max(x.ndim, 1)
        shape = (-1,) + (1,) * (x.ndim - axis - 1)
        s = scale.reshape(shape) if scale.size > 1 else scale.reshape(())
        zp = np.zeros((), dtype) if zero_point is None else (
            zero_point.reshape(shape) if zero_point.size > 1 else zero_point.reshape(()))
        info, z = np.iinfo(dtype), zp.astype(np.int64)
        r = np.rint(x / s.astype(np.float32)).astype(np.float64)
        r = np.where(np.isnan(r), -np.inf, r)
        return ((np.clip(r, info.min - z, info.max - z).astype(np.int64) + z).astype(dtype),)


class DequantizeLinear(_Patched):
    """(x - zero point) * scale in float32: the stock operator set has no version before 19."""

    def __init__(self, onnx_node, run_params):
        OpRun.__init__(self, onnx_node, run_params)
        self.attrs = {a.name: helper.get_attribute_value(a) for a in onnx_node.attribute}

    def fix(self, x, scale, zero_point=None):
        axis = self.attrs.get("axis", 1) % max(x.ndim, 1)
        shape = (-1,) + (1,) * (x.ndim - axis - 1)
        s = scale.reshape(shape) if scale.size > 1 else scale.reshape(())
        z = 0 if zero_point is None else (zero_point.reshape(shape) if zero_point.size > 1
                                          else zero_point.reshape(()))
        return (((x.astype(np.int64) - np.asarray(z, np.int64)).astype(np.float32)
                 * s.astype(np.float32)).astype(scale.dtype),)


PATCHES = [QLinearConv, QLinearMatMul, QuantizeLinear, DequantizeLinear, Conv, Softmax, LogSoftmax, Hardmax, ConvTranspose, ReduceSumSquare, ReduceL1, ReduceSum,
           ReduceProd, Pad, Flatten, BatchNormalization, GatherElements, Mean, GlobalMaxPool,
           GlobalAveragePool, MaxPool, AveragePool, LpPool, Squeeze, Unsqueeze, Resize,
           LayerNormalization]


def run_reference(model, feeds: dict, intermediate: bool = False):
    """The patched reference's outputs (a list), or every value by name (intermediate=True)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        evaluator = ReferenceEvaluator(model, new_ops=PATCHES)
        if intermediate:
            return {k: np.asarray(v) for k, v in
                    evaluator.run(None, feeds, intermediate=True).items()}
        return [np.asarray(o) for o in evaluator.run(None, feeds)]
