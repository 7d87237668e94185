"""reinterpret (TVM's relay.reinterpret, ONNX BitCast): the same bits read as another dtype."""
from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from .registry import OpDef, OpPattern, make_call, register
from .type_relations import check_arity, fail, tensor_arg

__all__ = ["reinterpret"]


def _reinterpret_rel(types, attrs):
    check_arity("reinterpret", types, 1)
    data = tensor_arg("reinterpret", types, 0, "data")
    try:
        out = TensorType(data.shape, attrs.dtype)
    except (TypeError, ValueError):
        raise fail("reinterpret", f"dtype {attrs.dtype!r} is not a known data type") from None
    have, want = np.dtype(data.dtype).itemsize, np.dtype(out.dtype).itemsize
    if have != want:
        raise fail("reinterpret", f"{data.dtype} elements are {have} byte(s) but {out.dtype} "
                                  f"elements are {want}: reinterpret needs equal widths")
    return out


def _reinterpret_ref(inputs, attrs):
    return np.ascontiguousarray(inputs[0]).view(attrs.dtype)


register(OpDef(name="reinterpret", num_inputs=1, type_rel=_reinterpret_rel,
               pattern=OpPattern.ELEMWISE, reference=_reinterpret_ref, attrs={"dtype": ""},
               attrs_type_key="relay.attrs.CastAttrs",
               description="the bits of each element read as dtype (same width)"))


def reinterpret(data, dtype):
    """relay.reinterpret: each element's bits read as dtype (of the same width)."""
    return make_call("reinterpret", [data],
                     dtype=dtype if isinstance(dtype, str) else np.dtype(dtype).name)
