"""relay.annotation ops: markers for passes that compute nothing (stop_fusion).

`annotation.stop_fusion(x)` is OPAQUE, so FuseOps never fuses across it, and FuseOps drops the
call from the fused program (as TVM's FuseMutator does); its reference and compute rule are
the identity, so a program that is run without FuseOps still gives the same result.
"""
from __future__ import annotations

from .registry import OpDef, OpPattern, make_call, register
from .type_relations import identity_rel

__all__ = ["stop_fusion"]

register(OpDef(name="annotation.stop_fusion", num_inputs=1,
               type_rel=identity_rel("annotation.stop_fusion"), pattern=OpPattern.OPAQUE,
               reference=lambda inputs, attrs: inputs[0].copy(),
               description="a fusion boundary: FuseOps fuses nothing across it"))


def stop_fusion(data):
    """relay.annotation.stop_fusion: a boundary FuseOps does not fuse across."""
    return make_call("annotation.stop_fusion", [data])
