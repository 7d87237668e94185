"""Strategy of the recurrent layer (nn.contrib_recurrent_layer): one kernel a layer and
direction that loops over time (codegen.schedules.recurrent).

Implementation (configuration type; weight layout):
- recurrent.gemv    RecurrentConfig: per step, GEMV micro-kernel calls over the recurrent
                    weight packed per gate (RecurrentWeight: panels of tile_columns; a
                    constant R is packed at compile time by AlterOpLayout, another at the
                    start of each call), then the gate math fused into one vectorised loop.
"""
from __future__ import annotations

from dataclasses import dataclass

from codegen.schedules.recurrent import RecurrentConfig, resolve_recurrent
from codegen.schedules.recurrent import recurrent_layer as recurrent_schedule
from compiler.ir.expr import Call, RelayExpr
from ..nn_recurrent import (GATES, LAYER, contrib_recurrent_weight_pack, layer_of,
                            split_layer_result)
from ..registry import get_def, make_call
from .alter import ALTER_LAYOUT
from .registry import CallInfo, OpStrategy, Workload, implementation, register_strategy, select

__all__ = ["RecurrentWeight"]


@dataclass(frozen=True)
class RecurrentWeight:
    """R packed by nn.contrib_recurrent_weight_pack: per gate, panels of `block` columns."""

    gates: int
    block: int


def _layout(w: Workload, config: RecurrentConfig) -> RecurrentWeight | None:
    return RecurrentWeight(GATES[w["mode"]], config.tile_columns) \
        if w["weight"] == "packed" else None


RECURRENT_GEMV = implementation(
    "recurrent.gemv", RecurrentConfig,
    lambda w, options, given: resolve_recurrent(w["hidden"], options, given), _layout)


@register_strategy(LAYER)
def recurrent_strategy(call: CallInfo, options) -> OpStrategy | None:
    """The GEMV kernel for every float32 layer; a constant weight is packed for it."""
    a, xw = call.attrs, call.tensor(0)
    packed = bool(a.weight_block) or 1 in call.constants
    t_len, batch, _ = xw.shape
    workload = Workload.of("recurrent", mode=a.mode, steps=t_len, batch=batch,
                           hidden=a.hidden_size, weight="packed" if packed else "plain")
    facts = {"tile_columns": a.weight_block} if a.weight_block else None
    strategy = OpStrategy()
    strategy.add(RECURRENT_GEMV, workload,
                 lambda ins, attrs, out, options, config: split_layer_result(
                     recurrent_schedule(*ins, layer_of(attrs, ins[0].shape),
                                        attrs.weight_block, options=options, config=config)),
                 facts=facts)
    return strategy


def _alter_recurrent(call: Call, old: Call, pack, options) -> RelayExpr | None:
    """A constant R packed for the chosen configuration (the layer then reads it so)."""
    if call.attrs.weight_block:
        return None
    info = CallInfo(old.op.name, old.attrs, tuple(a.checked_type for a in old.args),
                    old.checked_type, frozenset({1}))
    choice = select(info, options)
    layout = choice.weight_layout() if choice is not None else None
    if not isinstance(layout, RecurrentWeight):
        return None
    packed = pack(contrib_recurrent_weight_pack, call.args[1], gates=layout.gates,
                  block=layout.block)
    return make_call(LAYER, [call.args[0], packed, *call.args[2:]],
                     **{**dict(call.attrs), "weight_block": layout.block})


get_def(LAYER).set_attr(ALTER_LAYOUT, _alter_recurrent)
