"""relay.op.dyn: the dyn.* ops, whose shape-like arguments are tensors (as tvm.relay.op.dyn).

relay.reshape, relay.zeros, relay.nn.pad, ... build these themselves when given a computed
(non-constant) shape, so most code never names them; DynamicToStatic turns them back into
the static ops once the shapes fold to constants."""
from compiler.op.dyn import (broadcast_to, expand_dims, full, one_hot, ones,  # noqa: F401
                             reshape, squeeze, strided_slice, tile, topk, zeros)
from . import nn  # noqa: F401,E402

__all__ = ["broadcast_to", "expand_dims", "full", "one_hot", "ones", "reshape", "squeeze",
           "strided_slice", "tile", "topk", "zeros", "nn"]
