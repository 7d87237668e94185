"""vision.all_class_non_max_suppression as one hand-written sequential kernel (te.extern).

Greedy suppression is a recurrence (a box is kept only if no box kept before it suppresses
it), so it is written as TIR loops over scratch buffers rather than as a te.compute. Per
batch and class: rank the boxes above the score threshold by (score desc, index asc) in
O(boxes^2) comparisons (exact, stable, no sort network), then walk them in rank order against
the kept list. The extern writes (rows + 1, 3) int64: the selected rows, then the count;
two computes split that into the op's two outputs. Every index read is a loop variable or a
box index the kernel wrote itself, so no input value can send a load out of bounds.
"""
from __future__ import annotations

from codegen.tir.expr import Load
from codegen.tir.stmt import Allocate, Buffer, For, IfThenElse, LetStmt, Store, seq

from .common import rule, te, tir

_I64 = "int64"


def _c(value: int):
    return tir.const(value, _I64)


def _clamp(index, count: int):
    """A box index read back from scratch memory, held inside [0, count)."""
    return tir.min(tir.max(index, _c(0)), _c(max(count - 1, 0)))


def _corners(boxes, b, i, dt):
    """(y0, y1, x0, x1) of box i, each pair ordered."""
    v = [Load(boxes, (b, i, _c(k)), dt) for k in range(4)]
    return (tir.min(v[0], v[2]), tir.max(v[0], v[2]), tir.min(v[1], v[3]),
            tir.max(v[1], v[3]))


def _suppresses(boxes, b, i, k, threshold, dt):
    """Box k suppresses box i (as compiler.op.vision_nms._suppresses)."""
    ay0, ay1, ax0, ax1 = _corners(boxes, b, i, dt)
    by0, by1, bx0, bx1 = _corners(boxes, b, k, dt)
    zero = tir.const(0, dt)
    w = tir.min(ax1, bx1) - tir.max(ax0, bx0)
    h = tir.min(ay1, by1) - tir.max(ay0, by0)
    inter = w * h
    area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b - inter
    overlap = tir.all(tir.gt(w, zero), tir.gt(h, zero), tir.gt(area_a, zero),
                      tir.gt(area_b, zero), tir.gt(union, zero))
    safe_union = tir.select(overlap, union, tir.const(1, dt))
    return tir.logical_and(overlap, tir.gt(inter / safe_union, threshold))


def _scalar(buf, dtype):
    return Load(buf, (_c(0),) * len(buf.shape), buf.dtype) if dtype is None else \
        tir.cast(Load(buf, (_c(0),) * len(buf.shape), buf.dtype), dtype)


@rule("vision.all_class_non_max_suppression")
def _all_class_nms(inputs, attrs, out_type):
    boxes_t, scores_t = inputs[0], inputs[1]
    batch, classes, count = (int(d) for d in scores_t.shape)
    rows = batch * classes * count
    dt = scores_t.dtype

    def fcompute(ins, outs):
        boxes, scores, limit_b, iou_b, score_b = ins
        out = outs[0]
        order = Buffer("nms_order", (max(count, 1),), _I64)
        kept = Buffer("nms_kept", (max(count, 1),), _I64)
        # counters: valid boxes of this class, kept of this class, total kept, a flag
        cnt = Buffer("nms_count", (4,), _I64)
        b, c, i, j, r, k, z = (tir.Var(n, _I64) for n in ("nms_b", "nms_c", "nms_i", "nms_j",
                                                           "nms_r", "nms_k", "nms_z"))
        limit = tir.max(_scalar(limit_b, _I64), _c(0))
        iou_thr, score_thr = _scalar(iou_b, dt), _scalar(score_b, dt)

        def at(idx):
            return Load(cnt, (_c(idx),), _I64)

        def put(idx, value):
            return Store(cnt, (_c(idx),), value)

        def score(box):
            return Load(scores, (b, c, box), dt)

        def valid(box):
            return tir.logical_or(tir.isnan(score_thr), tir.gt(score(box), score_thr))

        earlier = tir.logical_or(tir.gt(score(j), score(i)),
                                 tir.logical_and(tir.eq(score(j), score(i)), tir.lt(j, i)))
        rank = seq(put(3, _c(0)),
                   For(j, count, IfThenElse(tir.logical_and(valid(j), earlier),
                                            put(3, at(3) + _c(1)))),
                   Store(order, (_clamp(at(3), count),), i), put(0, at(0) + _c(1)))
        box = tir.Var("nms_box", _I64)
        other = tir.Var("nms_other", _I64)
        check = For(k, count, IfThenElse(  # nested: no box is read for an unused slot
            tir.logical_and(tir.lt(k, at(1)), tir.eq(at(3), _c(1))),
            LetStmt(other, _clamp(Load(kept, (k,), _I64), count), IfThenElse(
                _suppresses(boxes, b, box, other, iou_thr, dt), put(3, _c(0))))))
        keep = IfThenElse(tir.eq(at(3), _c(1)), seq(
            Store(kept, (_clamp(at(1), count),), box), put(1, at(1) + _c(1)),
            Store(out, (at(2), _c(0)), b), Store(out, (at(2), _c(1)), c),
            Store(out, (at(2), _c(2)), box), put(2, at(2) + _c(1))))
        walk = For(r, count, IfThenElse(
            tir.logical_and(tir.lt(r, at(0)), tir.lt(at(1), limit)),
            LetStmt(box, _clamp(Load(order, (r,), _I64), count),
                    seq(put(3, _c(1)), check, keep))))
        per_class = seq(put(0, _c(0)), For(i, count, IfThenElse(valid(i), rank)),
                        put(1, _c(0)), walk)
        clear = For(z, rows + 1, seq(*(Store(out, (z, _c(m)), _c(0)) for m in range(3))))
        body = seq(clear, put(2, _c(0)), For(b, batch, For(c, classes, per_class)),
                   Store(out, (_c(rows), _c(0)), at(2)))
        return Allocate(order, Allocate(kept, Allocate(cnt, body)))

    packed = te.extern((rows + 1, 3), list(inputs), fcompute, dtype=_I64, name="T_nms")
    selected = te.compute((rows, 3), lambda n, m: packed[n, m], name="T_nms_indices")
    total = te.compute((1,), lambda n: packed[_c(rows), _c(0)], name="T_nms_count")
    return selected, total
