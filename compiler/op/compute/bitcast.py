"""reinterpret: an LLVM bitcast per element (bool is its stored byte)."""
from __future__ import annotations

from .common import rule, te, tir


@rule("reinterpret")
def _reinterpret(inputs, attrs, out_type):
    (x,) = inputs
    return te.compute(x.shape, lambda *i: tir.reinterpret(x[i], out_type.dtype),
                      name="T_reinterpret")
