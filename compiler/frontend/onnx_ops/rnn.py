"""RNN, GRU and LSTM: per direction, the input projection of all time steps as one dense call,
then nn.contrib_recurrent_layer, whose kernel loops over time (compiler.op.nn_recurrent).

sequence_lens (a constant or a graph input) goes to the layer, which keeps the state of a batch
entry past its length and emits zeros there: the reverse direction of a short entry then
starts at its last step, as ONNX says. Other float dtypes run the layer in float32.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import Tuple, TupleGetItem
from compiler.op.nn_recurrent import ACTIVATIONS, DEFAULT_ACTIVATIONS, GATES
from compiler.op.nn_recurrent import contrib_recurrent_layer

from .common import NodeContext, const, converter, op, reshape

F32 = "float32"


def _activations(ctx: NodeContext, kind: str, num_dirs: int) -> list:
    """Per direction (names, alphas, betas); the alpha/beta lists are consumed in order by the
    functions that take them."""
    defaults = DEFAULT_ACTIVATIONS[kind]
    names = ctx.attr("activations")
    names = list(names) if names else list(defaults) * num_dirs
    if len(names) != len(defaults) * num_dirs:
        raise ctx.error(f"activations must list {len(defaults)} function(s) per direction "
                        f"({num_dirs}), got {names}")
    alphas = iter(ctx.attr("activation_alpha", []) or [])
    betas = iter(ctx.attr("activation_beta", []) or [])
    per = []
    for given in names:
        name = given.lower()
        if name not in ACTIVATIONS:
            raise ctx.error(f"activation {given!r} is not supported; supported: "
                            f"{sorted(ACTIVATIONS)}")
        _, _, alpha, beta = ACTIVATIONS[name]
        per.append((name, float(next(alphas, alpha)) if alpha is not None else 0.0,
                    float(next(betas, beta)) if beta is not None else 0.0))
    k = len(defaults)
    return [tuple(zip(*per[d * k:(d + 1) * k])) for d in range(num_dirs)]


def _pick(x, index: int, shape: tuple):
    """x[index] along axis 0 with that axis dropped."""
    part = op("strided_slice", x, begin=[index], end=[index + 1], strides=[1], axes=[0],
              slice_mode="end")
    return reshape(part, list(shape[1:]))


def _half(x, first: bool, size: int):
    return op("strided_slice", x, begin=[0 if first else size], end=[size if first else 2 * size],
              strides=[1], axes=[0], slice_mode="end")


def _lengths(ctx: NodeContext, lens, seq: int, batch: int):
    """The int32 [B] sequence lengths (all of seq without the input); constant ones checked."""
    if lens is None:
        return const(np.full((batch,), seq), "int32")
    if ctx.shape(lens) != (batch,):
        raise ctx.error(f"sequence_lens must be [{batch}], got {ctx.shape(lens)}")
    found = ctx.maybe_value(lens)
    if found is not None:
        found = np.asarray(found).reshape(-1).astype(np.int64)
        if (found < 0).any() or (found > seq).any():
            raise ctx.error(f"sequence_lens must be {batch} lengths in [0, {seq}], got {found}")
    return lens if ctx.dtype(lens) == "int32" else op("cast", lens, dtype="int32")


def _recurrent(kind: str):
    def convert(ctx: NodeContext, inputs):
        inputs = list(inputs) + [None] * (8 - len(inputs))
        x, w, r, b, lens, h0 = inputs[:6]
        c0, p = (inputs[6], inputs[7]) if kind == "LSTM" else (None, None)
        gates = GATES[kind]
        hidden = int(ctx.attr("hidden_size", ctx.shape(r)[-1]))
        direction = ctx.attr("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ctx.error(f"direction must be forward, reverse or bidirectional, got "
                            f"{direction!r}")
        num_dirs = 2 if direction == "bidirectional" else 1
        layout = int(ctx.attr("layout", 0))
        dtype = ctx.dtype(x)
        if layout not in (0, 1):
            raise ctx.error(f"layout must be 0 or 1, got {layout}")
        if dtype != F32:  # the layer computes in float32
            x, w, r, b, h0, c0, p = (None if v is None else op("cast", v, dtype=F32)
                                     for v in (x, w, r, b, h0, c0, p))
        if layout == 1:
            x = op("transpose", x, axes=[1, 0, 2])
            h0 = None if h0 is None else op("transpose", h0, axes=[1, 0, 2])
            c0 = None if c0 is None else op("transpose", c0, axes=[1, 0, 2])
        seq, batch, width = ctx.shape(x)
        wshape, rshape = ctx.shape(w), ctx.shape(r)
        if wshape != (num_dirs, gates * hidden, width) or rshape != (num_dirs, gates * hidden,
                                                                     hidden):
            raise ctx.error(f"W {wshape} / R {rshape} do not match {num_dirs} direction(s), "
                            f"{gates} gate(s), hidden_size {hidden}, input size {width}")
        acts = _activations(ctx, kind, num_dirs)
        lengths = _lengths(ctx, lens, seq, batch)
        state = (num_dirs, batch, hidden)
        zeros = const(np.zeros((batch, hidden)), F32)
        flat_x = ctx.reshape(x, [seq * batch, width])
        clip = ctx.attr("clip")
        ys, hs, cs = [], [], []
        for d in range(num_dirs):
            xw = op("nn.dense", flat_x, _pick(w, d, wshape), units=None, out_dtype="")
            rb = const(np.zeros(gates * hidden), F32)
            if b is not None:
                b_d = _pick(b, d, ctx.shape(b))
                xw, rb = op("add", xw, _half(b_d, True, gates * hidden)), \
                    _half(b_d, False, gates * hidden)
            names, alpha, beta = acts[d]
            out = contrib_recurrent_layer(
                ctx.reshape(xw, [seq, batch, gates * hidden]), _pick(r, d, rshape),
                zeros if h0 is None else _pick(h0, d, state),
                zeros if c0 is None else _pick(c0, d, state),
                rb, const(np.zeros(3 * hidden), F32) if p is None else
                _pick(p, d, ctx.shape(p)), lengths, mode=kind, hidden_size=hidden,
                reverse=direction == "reverse" or d == 1, activations=names,
                activation_alpha=alpha, activation_beta=beta, clip=clip,
                linear_before_reset=int(ctx.attr("linear_before_reset", 0)),
                input_forget=int(ctx.attr("input_forget", 0)))
            ys.append(TupleGetItem(out, 0))
            hs.append(TupleGetItem(out, 1))
            cs.append(TupleGetItem(out, 2))
        y = op("stack", Tuple(ys), axis=1)  # [T, D, B, H]
        y_h = op("stack", Tuple(hs), axis=0)  # [D, B, H]
        y_c = op("stack", Tuple(cs), axis=0)
        if layout == 1:
            y = op("transpose", y, axes=[2, 0, 1, 3])
            y_h = op("transpose", y_h, axes=[1, 0, 2])
            y_c = op("transpose", y_c, axes=[1, 0, 2])
        outs = [y, y_h, y_c] if kind == "LSTM" else [y, y_h]
        return outs if dtype == F32 else [op("cast", v, dtype=dtype) for v in outs]
    return convert


converter("RNN", since=7)(_recurrent("RNN"))
converter("GRU", since=7)(_recurrent("GRU"))
converter("LSTM", since=7)(_recurrent("LSTM"))
