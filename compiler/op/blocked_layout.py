"""The channel-blocked activation layout NCHW<x>c (TVM's NCHW[x]c) as the op definitions see it:
the block x of a layout string, numpy conversions for references, and a blocked conv's
attributes as its NCHW conv's. Ops with a blocked form (nn_nchwc, nn_winograd, nn_pool) share
these; the ConvertBlockedLayout pass produces them."""
from __future__ import annotations

import numpy as np

from .transform_layout import parse_layout

__all__ = ["channel_block_of", "block_ref", "unblock_ref", "unblocked_attrs", "BLOCKED_FORM"]

# Op attribute (as TVM's register_op_attr) of the ops that take NCHW<x>c through a layout
# attribute of theirs: its name ("layout" for pools, "data_layout" for Winograd convs); the
# output follows in the same layout. The ConvertBlockedLayout pass reads it.
BLOCKED_FORM = "TBlockedForm"


def channel_block_of(layout: str) -> int | None:
    """x of an "NCHW<x>c" layout string, None for any other layout."""
    try:
        tokens = parse_layout(layout)
    except Exception:  # noqa: BLE001 - not a layout string at all
        return None
    letters = [t[0] for t in tokens]
    return tokens[4][1] if letters == ["N", "C", "H", "W", "c"] else None


def unblock_ref(data: np.ndarray) -> np.ndarray:
    """NCHW<x>c -> NCHW (numpy)."""
    n, cb, h, w, x = data.shape
    return np.ascontiguousarray(data.transpose(0, 1, 4, 2, 3).reshape(n, cb * x, h, w))


def block_ref(data: np.ndarray, x: int) -> np.ndarray:
    """NCHW -> NCHW<x>c (numpy)."""
    n, c, h, w = data.shape
    return np.ascontiguousarray(data.reshape(n, c // x, x, h, w).transpose(0, 1, 3, 4, 2))


class _Unblocked:
    def __init__(self, attrs):
        self._attrs = attrs

    def __getattr__(self, name):
        if name in ("data_layout", "out_layout", "layout"):
            return "NCHW"
        if name == "kernel_layout":
            return "OIHW"
        return getattr(self._attrs, name)


def unblocked_attrs(attrs):
    """A blocked op's attributes as its NCHW op's (data, out and pool layouts NCHW, kernel
    layout OIHW; the rest as they are), for the NCHW type relations and references."""
    return _Unblocked(attrs)
