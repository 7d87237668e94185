"""vision.all_class_non_max_suppression: TVM's op, with ONNX NonMaxSuppression's semantics.

How many boxes survive depends on the data, so, as TVM does, the op has fixed-size outputs
and a count: `selected_indices` is (batch * classes * boxes, 3) int64 rows (batch, class,
box), of which the first `num_total_detections` (a (1,) int64 tensor) are meaningful and the
rest are zero; a caller slices them off (the ONNX frontend with a dynamic strided_slice).
The kernel is therefore static-shaped and runs in both executors.

Per batch and class: the boxes whose score exceeds score_threshold (all of them when it is
NaN: ONNX's "no threshold") in descending score order (ties: lower box index first), each
kept unless its IoU with a box already kept in this class exceeds iou_threshold, until
max_output_boxes_per_class are kept. Boxes are corners [y1, x1, y2, x2] in either order;
the frontend converts ONNX's center_point_box format first.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import RelayExpr, TupleWrapper, const
from compiler.ir.types import TensorType, TupleType
from .registry import OpDef, OpPattern, make_call, register
from .type_relations import (check_arity, dims_agree, fail, require_float, require_int,
                             tensor_arg)

__all__ = ["all_class_non_max_suppression"]

OP = "vision.all_class_non_max_suppression"


def _scalar_arg(types, index: int, name: str) -> TensorType:
    ty = tensor_arg(OP, types, index, name)
    if len(ty.shape) > 1 or (ty.shape and not dims_agree(OP, ty.shape[0], 1, f"{name} must "
                                                         "hold one value")):
        raise fail(OP, f"{name} must be a scalar or a 1-element vector, got shape {ty.shape}")
    return ty


def _nms_rel(types, attrs):
    check_arity(OP, types, 5)
    boxes, scores = tensor_arg(OP, types, 0, "boxes"), tensor_arg(OP, types, 1, "scores")
    require_float(OP, boxes, "boxes")
    if len(boxes.shape) != 3 or not dims_agree(OP, boxes.shape[2], 4, "boxes dim 2 must be 4"):
        raise fail(OP, f"boxes must be (batch, boxes, 4), got {boxes.shape}")
    if len(scores.shape) != 3 or scores.dtype != boxes.dtype or \
            not dims_agree(OP, scores.shape[0], boxes.shape[0], "scores and boxes must agree "
                                                                "on the batch") or \
            not dims_agree(OP, scores.shape[2], boxes.shape[1], "scores must have one score "
                                                                "per box"):
        raise fail(OP, f"scores must be (batch, classes, boxes) = ({boxes.shape[0]}, C, "
                       f"{boxes.shape[1]}) {boxes.dtype}, got {scores.shape} {scores.dtype}")
    require_int(OP, _scalar_arg(types, 2, "max_output_boxes_per_class"),
                "max_output_boxes_per_class")
    for index, name in ((3, "iou_threshold"), (4, "score_threshold")):
        require_float(OP, _scalar_arg(types, index, name), name)
    if attrs.output_format != "onnx":
        raise fail(OP, f"output_format must be 'onnx', got {attrs.output_format!r}")
    rows = scores.shape[0] * scores.shape[1] * scores.shape[2]
    return TupleType([TensorType((rows, 3), "int64"), TensorType((1,), "int64")])


def _suppresses(a: np.ndarray, b: np.ndarray, threshold) -> bool:
    """Whether box b suppresses box a: [y1, x1, y2, x2] corners in either order, overlapping
    with positive areas and an IoU above threshold (ONNX's reference, in the boxes' dtype)."""
    ay0, ay1 = min(a[0], a[2]), max(a[0], a[2])
    ax0, ax1 = min(a[1], a[3]), max(a[1], a[3])
    by0, by1 = min(b[0], b[2]), max(b[0], b[2])
    bx0, bx1 = min(b[1], b[3]), max(b[1], b[3])
    w, h = min(ax1, bx1) - max(ax0, bx0), min(ay1, by1) - max(ay0, by0)
    if not (w > 0 and h > 0):
        return False
    inter = w * h
    area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b - inter
    if not (area_a > 0 and area_b > 0 and union > 0):
        return False
    return bool(inter / union > threshold)


def _nms_ref(inputs, attrs):
    boxes, scores, max_out, iou_thr, score_thr = inputs
    limit = max(int(np.asarray(max_out).reshape(-1)[0]), 0)
    iou_thr = np.asarray(iou_thr).reshape(-1)[0].astype(boxes.dtype)
    score_thr = np.asarray(score_thr).reshape(-1)[0]
    batch, classes, count = scores.shape
    out = np.zeros((batch * classes * count, 3), np.int64)
    total = 0
    for b in range(batch):
        for c in range(classes):
            s = scores[b, c]
            order = [i for i in sorted(range(count), key=lambda i: (-s[i], i))
                     if np.isnan(score_thr) or s[i] > score_thr]
            kept: list = []
            for i in order:
                if len(kept) >= limit:
                    break
                if not any(_suppresses(boxes[b, i], boxes[b, k], iou_thr) for k in kept):
                    kept.append(i)
                    out[total] = (b, c, i)
                    total += 1
    return out, np.array([total], np.int64)


register(OpDef(name=OP, num_inputs=5, type_rel=_nms_rel, pattern=OpPattern.OPAQUE,
               reference=_nms_ref, attrs={"output_format": "onnx"},
               attrs_type_key="relay.attrs.AllClassNonMaximumSuppressionAttrs"))


def all_class_non_max_suppression(boxes, scores, max_output_boxes_per_class=-1,
                                  iou_threshold=-1.0, score_threshold=-1.0,
                                  output_format="onnx"):
    """relay.vision.all_class_non_max_suppression: (selected_indices, num_total_detections)
    (see the module docstring); thresholds and the limit are tensors or Python numbers."""
    args = [boxes, scores]
    for value, dtype in ((max_output_boxes_per_class, "int64"), (iou_threshold, "float32"),
                         (score_threshold, "float32")):
        args.append(value if isinstance(value, RelayExpr) else
                    const(np.asarray(value, dtype), dtype=dtype))
    return TupleWrapper(make_call(OP, args, output_format=output_format), 2)
