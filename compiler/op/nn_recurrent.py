"""A whole recurrent layer as one op: ONNX's RNN / GRU / LSTM for one direction, the time loop
inside the kernel (compiler.op.strategy.recurrent selects it; codegen.schedules.recurrent).

- nn.contrib_recurrent_layer(xw[T, B, G*H], r, h0[B, H], c0[B, H], rbias[G*H], peep[3*H],
  lens[B] int32; mode, hidden_size, reverse, activations, activation_alpha,
  activation_beta, clip, linear_before_reset, input_forget, weight_block)
  -> (Y[T, B, H], Y_h[B, H], Y_c[B, H]).
  xw is the input projection of every step with the input bias (X W^T + Wb: one GEMM for all
  steps, outside the op); r the recurrent weight, [G*H, H] (weight_block 0) or packed by
  nn.contrib_recurrent_weight_pack (weight_block = its block); rbias the recurrent bias Rb,
  added to the recurrent product (inside the reset product of a GRU with
  linear_before_reset); peep LSTM's peepholes (P[iof], zeros for none); lens the sequence
  lengths: a batch entry past its length keeps its state and emits zeros (one of length 0
  ends in zero states, as in onnxruntime). The gates are ONNX's
  (LSTM i, o, f, c; GRU z, r, h); activations are named per function (lower case) with one
  alpha and beta each; clip bounds every activation's input but LSTM's output function's.
  Y_c is the LSTM's final cell (c0 for the others).
- nn.contrib_recurrent_weight_pack(r[G*H, H]; gates, block) -> [G*ceil(H/block), H, block],
  Rp[g*NT + p, k, v] = r[g*H + p*block + v, k], zero past H: each gate in its own panels of
  `block` columns, which the GEMV micro-kernel streams (AlterOpLayout packs a constant R).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from codegen import te, tir
from codegen.schedules.recurrent import GATES, RecurrentLayer, recurrent_layer, recurrent_panels
from compiler.ir.types import TensorType, TupleType
from .registry import OpDef, OpPattern, make_call, register, register_compute
from .type_relations import check_arity, fail, static_shape, tensor_arg

__all__ = ["ACTIVATIONS", "GATES", "contrib_recurrent_layer", "contrib_recurrent_weight_pack",
           "recurrent_reference", "layer_of", "split_layer_result"]

LAYER, PACK = "nn.contrib_recurrent_layer", "nn.contrib_recurrent_weight_pack"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# name -> (numpy f(x, alpha, beta), tir f(x, alpha, beta), default alpha, default beta);
# None: the function takes no such parameter
ACTIVATIONS: dict[str, tuple[Callable, Callable, float | None, float | None]] = {
    "relu": (lambda x, a, b: np.maximum(x, 0), lambda x, a, b: tir.max(x, 0.0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), lambda x, a, b: tir.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: _np_sigmoid(x), lambda x, a, b: tir.sigmoid(x), None, None),
    "leakyrelu": (lambda x, a, b: np.where(x < 0, a * x, x),
                  lambda x, a, b: tir.select(tir.lt(x, 0.0), x * a, x), 0.01, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)),
                 lambda x, a, b: x / (tir.abs(x) + 1.0), None, None),
    "softplus": (lambda x, a, b: np.log(1 + np.exp(x)),
                 lambda x, a, b: tir.log(tir.exp(x) + 1.0), None, None),
    "affine": (lambda x, a, b: a * x + b, lambda x, a, b: x * a + b, 1.0, 0.0),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x),
                   lambda x, a, b: tir.tanh(x * b) * a, 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1),
                    lambda x, a, b: tir.min(tir.max(x * a + b, 0.0), 1.0), 0.2, 0.5),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0),
                        lambda x, a, b: tir.select(tir.gt(x, a), x, 0.0), 1.0, None),
    "elu": (lambda x, a, b: np.where(x < 0, a * (np.exp(x) - 1), x),
            lambda x, a, b: tir.select(tir.lt(x, 0.0), (tir.exp(x) - 1.0) * a, x), 1.0, None),
}
DEFAULT_ACTIVATIONS = {"RNN": ("tanh",), "GRU": ("sigmoid", "tanh"),
                       "LSTM": ("sigmoid", "tanh", "tanh")}


def _activation_expr(attrs, i: int) -> Callable:
    """The tir form of the layer's activation function i (clip applied by the caller)."""
    fn = ACTIVATIONS[attrs.activations[i]][1]
    a, b = float(attrs.activation_alpha[i]), float(attrs.activation_beta[i])
    return lambda x: fn(x, a, b)


def layer_of(attrs, xw_shape) -> RecurrentLayer:
    """What the kernel computes, from the op's attrs and xw's shape [T, B, G*H]."""
    return RecurrentLayer(attrs.mode, int(xw_shape[0]), int(xw_shape[1]), attrs.hidden_size,
                          bool(attrs.reverse),
                          tuple(_activation_expr(attrs, i) for i in range(len(attrs.activations))),
                          attrs.clip, bool(attrs.linear_before_reset), bool(attrs.input_forget))


def split_layer_result(packed: te.Tensor) -> tuple:
    """(Y, Y_h, Y_c) from the kernel's [T + 2, B, H] buffer."""
    t_len = packed.shape[0] - 2
    y = te.compute((t_len,) + packed.shape[1:], lambda t, b, j: packed[t, b, j], name="T_y")
    last = [te.compute(packed.shape[1:], lambda b, j, k=k: packed[t_len + k, b, j],
                       name=name) for k, name in ((0, "T_y_h"), (1, "T_y_c"))]
    return (y, *last)


# --- the weight packing ----------------------------------------------------------------------


def _pack_rel(types, attrs):
    check_arity(PACK, types, 1)
    r = tensor_arg(PACK, types, 0, "weight")
    static_shape(PACK, r, "weight")
    g, blk = attrs.gates, attrs.block
    if r.ndim != 2 or g < 1 or blk < 1 or r.shape[0] != g * r.shape[1]:
        raise fail(PACK, f"expected a [gates*H, H] weight with gates={g} and block >= 1, got "
                         f"{r.shape}, block={blk}")
    return TensorType(recurrent_panels(g, r.shape[1], blk), r.dtype)


def _pack_ref(inputs, attrs):
    (r,) = inputs
    g, blk = attrs.gates, attrs.block
    h = r.shape[1]
    nt = _ceil_div(h, blk)
    padded = np.zeros((g, nt * blk, h), r.dtype)
    padded[:, :h] = r.reshape(g, h, h)
    return np.ascontiguousarray(padded.reshape(g, nt, blk, h).transpose(0, 1, 3, 2)
                                .reshape(g * nt, h, blk))


def unpack_recurrent_weight(rp: np.ndarray, gates: int) -> np.ndarray:
    """The [G*H, H] weight a packed one was made from (numpy)."""
    panels, h, blk = rp.shape
    nt = panels // gates
    full = rp.reshape(gates, nt, h, blk).transpose(0, 1, 3, 2).reshape(gates, nt * blk, h)
    return np.ascontiguousarray(full[:, :h].reshape(gates * h, h))


register(OpDef(name=PACK, num_inputs=1, type_rel=_pack_rel, pattern=OpPattern.INJECTIVE,
               reference=_pack_ref, attrs={"gates": 4, "block": 32},
               attrs_type_key="relay.attrs.RecurrentWeightPackAttrs", exact_reference="values",
               description="Pack a recurrent weight into per-gate GEMV panels."))


@register_compute(PACK)
def _pack_compute(inputs, attrs, out_type):
    (r,) = inputs
    h, blk = r.shape[1], attrs.block
    nt = _ceil_div(h, blk)

    def f(p, k, v):
        g, col = p // nt, (p % nt) * blk + v
        if nt * blk == h:
            return r[g * h + col, k]
        return tir.if_then_else(tir.lt(col, h), r[g * h + tir.min(col, h - 1), k],
                                tir.const(0, r.dtype))
    return te.compute(out_type.shape, f, name="T_recurrent_weight_pack")


def contrib_recurrent_weight_pack(weight, gates: int, block: int):
    """Pack a [gates*H, H] recurrent weight into per-gate panels of `block` columns."""
    return make_call(PACK, [weight], gates=int(gates), block=int(block))


# --- the layer -------------------------------------------------------------------------------


def _layer_rel(types, attrs):
    check_arity(LAYER, types, 7)
    names = ("xw", "r", "h0", "c0", "rbias", "peep", "lens")
    args = [tensor_arg(LAYER, types, i, n) for i, n in enumerate(names)]
    for t, n in zip(args, names):
        static_shape(LAYER, t, n)
    xw, r, h0, c0, rb, peep, lens = args
    mode, h = attrs.mode, attrs.hidden_size
    if mode not in GATES:
        raise fail(LAYER, f"mode must be one of {sorted(GATES)}, got {mode!r}")
    g = GATES[mode]
    if xw.ndim != 3 or xw.shape[2] != g * h or xw.dtype != "float32":
        raise fail(LAYER, f"xw must be float32 [T, B, {g}*{h}], got {xw}")
    t, b = xw.shape[:2]
    want_r = recurrent_panels(g, h, attrs.weight_block) if attrs.weight_block else (g * h, h)
    want = {"r": (r, want_r), "h0": (h0, (b, h)), "c0": (c0, (b, h)), "rbias": (rb, (g * h,)),
            "peep": (peep, (3 * h,))}
    for n, (ty, shape) in want.items():
        if tuple(ty.shape) != shape or ty.dtype != "float32":
            raise fail(LAYER, f"{n} must be float32 {list(shape)}, got {ty}")
    if tuple(lens.shape) != (b,) or lens.dtype != "int32":
        raise fail(LAYER, f"lens must be int32 [{b}], got {lens}")
    acts = attrs.activations
    if len(acts) != len(DEFAULT_ACTIVATIONS[mode]) or any(a not in ACTIVATIONS for a in acts) \
            or len(attrs.activation_alpha) != len(acts) \
            or len(attrs.activation_beta) != len(acts):
        raise fail(LAYER, f"{mode} takes {len(DEFAULT_ACTIVATIONS[mode])} activations of "
                          f"{sorted(ACTIVATIONS)} with one alpha and beta each, got {acts}, "
                          f"alpha {attrs.activation_alpha}, beta {attrs.activation_beta}")
    state = TensorType((b, h), "float32")
    return TupleType([TensorType((t, b, h), "float32"), state, state])


def recurrent_reference(inputs, attrs):
    """numpy: the layer's recurrence, step by step in float32."""
    xw, r, h0, c0, rb, peep, lens = inputs
    mode, hid = attrs.mode, attrs.hidden_size
    if attrs.weight_block:
        r = unpack_recurrent_weight(r, GATES[mode])
    t_len = xw.shape[0]
    clip = attrs.clip

    def act(i, x, clipped=True):
        fn, *_ = ACTIVATIONS[attrs.activations[i]]
        if clip is not None and clipped:
            x = np.clip(x, -clip, clip)
        return fn(x, np.float32(attrs.activation_alpha[i]),
                  np.float32(attrs.activation_beta[i])).astype(np.float32)

    h, c = h0.astype(np.float32).copy(), c0.astype(np.float32).copy()
    y = np.zeros((t_len,) + h.shape, np.float32)
    steps = range(t_len - 1, -1, -1) if attrs.reverse else range(t_len)
    for t in steps:
        running = (t < lens)[:, None]
        x = xw[t]
        rec = h @ r.T + rb
        if mode == "RNN":
            h_new, c_new = act(0, x + rec), c
        elif mode == "GRU":
            z = act(0, x[:, :hid] + rec[:, :hid])
            rt = act(0, x[:, hid:2 * hid] + rec[:, hid:2 * hid])
            if attrs.linear_before_reset:
                pre = x[:, 2 * hid:] + rt * rec[:, 2 * hid:]
            else:
                pre = x[:, 2 * hid:] + (rt * h) @ r[2 * hid:].T + rb[2 * hid:]
            h_new, c_new = (1 - z) * act(1, pre) + z * h, c
        else:
            g = x + rec
            i = act(0, g[:, :hid] + peep[:hid] * c)
            f = 1 - i if attrs.input_forget else act(0, g[:, 2 * hid:3 * hid]
                                                     + peep[2 * hid:] * c)
            c_new = f * c + i * act(1, g[:, 3 * hid:])
            o = act(0, g[:, hid:2 * hid] + peep[hid:2 * hid] * c_new)
            h_new = o * act(2, c_new, clipped=False)
        y[t] = np.where(running, h_new, 0)
        h = np.where(running, h_new, h).astype(np.float32)
        c = np.where(running, c_new, c).astype(np.float32)
    ran = (lens > 0)[:, None]  # an entry of length 0 ends in zeros (onnxruntime's choice)
    return y, np.where(ran, h, 0).astype(np.float32), np.where(ran, c, 0).astype(np.float32)


register(OpDef(name=LAYER, num_inputs=7, type_rel=_layer_rel, pattern=OpPattern.OPAQUE,
               reference=recurrent_reference,
               attrs={"mode": "LSTM", "hidden_size": 1, "reverse": False,
                      "activations": ("sigmoid", "tanh", "tanh"),
                      "activation_alpha": (0.0, 0.0, 0.0), "activation_beta": (0.0, 0.0, 0.0),
                      "clip": None, "linear_before_reset": 0, "input_forget": 0,
                      "weight_block": 0},
               attrs_type_key="relay.attrs.RecurrentLayerAttrs",
               description="One direction of an ONNX RNN/GRU/LSTM, the time loop inside."))


def contrib_recurrent_layer(xw, r, h0, c0, rbias, peep, lens, mode: str, hidden_size: int,
                            reverse: bool = False, activations=None, activation_alpha=None,
                            activation_beta=None, clip=None, linear_before_reset: int = 0,
                            input_forget: int = 0, weight_block: int = 0):
    """One direction of a recurrent layer (see the module docstring); activations default to
    ONNX's for the mode, alpha/beta to the functions' defaults."""
    acts = tuple(a.lower() for a in (activations or DEFAULT_ACTIVATIONS[mode]))
    alpha = tuple(float(a) for a in activation_alpha) if activation_alpha is not None else \
        tuple(float(ACTIVATIONS[a][2] or 0.0) if a in ACTIVATIONS else 0.0 for a in acts)
    beta = tuple(float(b) for b in activation_beta) if activation_beta is not None else \
        tuple(float(ACTIVATIONS[a][3] or 0.0) if a in ACTIVATIONS else 0.0 for a in acts)
    return make_call(LAYER, [xw, r, h0, c0, rbias, peep, lens], mode=mode,
                     hidden_size=int(hidden_size), reverse=bool(reverse), activations=acts,
                     activation_alpha=alpha, activation_beta=beta,
                     clip=None if clip is None else float(clip),
                     linear_before_reset=int(linear_before_reset),
                     input_forget=int(input_forget), weight_block=int(weight_block))


@register_compute(LAYER)
def _layer_compute(inputs, attrs, out_type):
    """Scalar loops (no vectors: the strategy's GEMV kernel applies otherwise)."""
    return split_layer_result(recurrent_layer(*inputs, layer_of(attrs, inputs[0].shape),
                                              attrs.weight_block))
