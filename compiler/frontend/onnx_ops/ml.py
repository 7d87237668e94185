"""ai.onnx.ml converters: Binarizer, ArrayFeatureExtractor and TreeEnsemble (opset 5).

TreeEnsemble is compiled from its constant node tables, with every shape static. Internal
nodes and leaves share one index space (leaves after the nodes, each leaf its own child), so
every tree descends in lockstep: `depth` rounds of "look up feature, split and mode of the
current node (take on constant tables), gather the feature from X, compare, pick the true or
false child (where)". After as many rounds as the deepest tree has levels, every tree sits on
a leaf; a constant (node, target) table turns leaves into per-target contributions, which are
summed, averaged, or reduced with min/max over the trees. Comparisons run in float64, as in
onnx/reference/ops/aionnxml/op_tree_ensemble.py (python floats against the splits).
"""
from __future__ import annotations

import numpy as np

from compiler.ir.expr import RelayExpr

from .common import NodeContext, as_ints, cast, const, converter, op

ML_DOMAIN = "ai.onnx.ml"


@converter("Binarizer", since=1, domain=ML_DOMAIN)
def _binarizer(ctx, inputs):
    x = inputs[0]
    dtype = ctx.dtype(x)
    above = op("greater", x, const(float(ctx.attr("threshold", 0.0)), dtype))
    return op("cast", above, dtype=dtype)


@converter("ArrayFeatureExtractor", since=1, domain=ML_DOMAIN)
def _array_feature_extractor(ctx, inputs):
    x, indices = inputs[:2]
    shape = ctx.shape(x)
    width = shape[-1] if shape else 0
    static = ctx.maybe_value(indices)
    count = int(np.prod(ctx.shape(indices), dtype=np.int64))
    if static is not None:
        flat = np.asarray(static, np.int64).reshape(-1)
        bad = flat[(flat < -width) | (flat >= width)]
        if bad.size:
            raise ctx.error(f"index {int(bad[0])} is out of range for the last axis of size "
                            f"{width}")
        indices = const(np.where(flat < 0, flat + width, flat), "int64")
    else:
        indices = ctx.reshape(cast(indices, ctx, "int64"), [count])
    picked = op("take", x, indices, axis=len(shape) - 1, batch_dims=0, mode="clip")
    # a 1-D input gives one row, as onnxruntime and the reference do
    out_shape = [1, count] if len(shape) == 1 else [*shape[:-1], count]
    return ctx.reshape(picked, out_shape)


# --- TreeEnsemble -----------------------------------------------------------------------------

_LEQ, _LT, _GTE, _GT, _EQ, _NEQ, _MEMBER = range(7)
_COMPARE = {_LEQ: "less_equal", _LT: "less", _GTE: "greater_equal", _GT: "greater",
            _EQ: "equal", _NEQ: "not_equal"}
_SUM, _AVERAGE, _MIN, _MAX = 1, 0, 2, 3


class _Tables:
    """The ensemble's node tables over one index space: nodes 0..N-1, then leaves N..N+L-1."""

    def __init__(self, ctx: NodeContext):
        def ints(name):
            value = ctx.attr(name)
            if value is None:
                raise ctx.error(f"the {name} attribute is required")
            return np.asarray(as_ints(value), np.int64)

        features, modes = ints("nodes_featureids"), ints("nodes_modes")
        true_ids, false_ids = ints("nodes_truenodeids"), ints("nodes_falsenodeids")
        true_leaf, false_leaf = ints("nodes_trueleafs") != 0, ints("nodes_falseleafs") != 0
        splits = np.asarray(ctx.attr("nodes_splits"), np.float64).reshape(-1)
        self.targets, roots = ints("leaf_targetids"), ints("tree_roots")
        self.weights = np.asarray(ctx.attr("leaf_weights"), np.float64).reshape(-1)
        n, leaves = len(features), len(self.targets)
        for name, table in (("nodes_modes", modes), ("nodes_splits", splits),
                            ("nodes_truenodeids", true_ids), ("nodes_falsenodeids", false_ids),
                            ("nodes_trueleafs", true_leaf), ("nodes_falseleafs", false_leaf)):
            if len(table) != n:
                raise ctx.error(f"{name} has {len(table)} entries, expected {n} (one per node)")
        if len(self.weights) != leaves:
            raise ctx.error(f"leaf_weights has {len(self.weights)} entries, expected {leaves}")
        if ((modes < _LEQ) | (modes > _MEMBER)).any():
            raise ctx.error(f"nodes_modes must be 0..6, got {sorted(set(modes.tolist()))}")
        self.n = n
        self.modes = set(modes.tolist())
        true_next = np.where(true_leaf, true_ids + n, true_ids)
        false_next = np.where(false_leaf, false_ids + n, false_ids)
        for ids, limit, what in ((true_next, n + leaves, "child"),
                                 (false_next, n + leaves, "child"), (roots, n, "root")):
            if ((ids < 0) | (ids >= limit)).any():
                raise ctx.error(f"a tree {what} index is out of range")
        # a root whose two branches are the same leaf is a tree that is just that leaf
        degenerate = true_leaf[roots] & false_leaf[roots] & (true_ids[roots] == false_ids[roots])
        self.roots = np.where(degenerate, true_next[roots], roots)
        leaf_ids = np.arange(n, n + leaves)
        self.feature = np.concatenate([features, np.zeros(leaves, np.int64)])
        self.mode = np.concatenate([modes, np.full(leaves, _LEQ)])
        self.split = np.concatenate([splits, np.zeros(leaves)])
        self.true_next = np.concatenate([true_next, leaf_ids])
        self.false_next = np.concatenate([false_next, leaf_ids])
        self.members = self._members(ctx, modes, leaves)
        tracks = ctx.attr("nodes_missing_value_tracks_true")
        tracks = np.zeros(n, bool) if tracks is None else np.asarray(as_ints(tracks)) != 0
        self.tracks_missing = np.concatenate([tracks, np.zeros(leaves, bool)])
        self.depth = self._depth(ctx)

    def _members(self, ctx: NodeContext, modes: np.ndarray, leaves: int) -> np.ndarray | None:
        """(N+L, M) member values per node, NaN-padded; the sets follow node order (spec)."""
        member_nodes = np.flatnonzero(modes == _MEMBER)
        if not len(member_nodes):
            return None
        values = ctx.attr("membership_values")
        if values is None:
            raise ctx.error("set-membership nodes need the membership_values attribute")
        values = np.asarray(values, np.float64).reshape(-1)
        sets, current = [], []
        for v in values:
            if np.isnan(v):
                sets.append(current)
                current = []
            else:
                current.append(v)
        if current:
            sets.append(current)
        if len(sets) != len(member_nodes):
            raise ctx.error(f"membership_values holds {len(sets)} NaN-delimited sets, but "
                            f"{len(member_nodes)} nodes test set membership")
        table = np.full((self.n + leaves, max(1, max(len(s) for s in sets))), np.nan)
        for node, members in zip(member_nodes, sets):
            table[node, :len(members)] = members
        return table

    def _depth(self, ctx: NodeContext) -> int:
        """Most internal nodes on any root-to-leaf path (explicit stack; a cycle is an error)."""
        deepest = 0
        for root in self.roots.tolist():
            stack = [(root, 0, frozenset())]
            while stack:
                node, level, above = stack.pop()
                if node >= self.n:
                    deepest = max(deepest, level)
                    continue
                if node in above:
                    raise ctx.error(f"the tree rooted at node {root} has a cycle through "
                                    f"node {node}")
                path = above | {node}
                stack.append((int(self.true_next[node]), level + 1, path))
                stack.append((int(self.false_next[node]), level + 1, path))
        return deepest


def _lookup(table: np.ndarray, idx: RelayExpr, dtype: str) -> RelayExpr:
    return op("take", const(table, dtype), idx, axis=0, batch_dims=0, mode="clip")


def _goes_true(tables: _Tables, x: RelayExpr, idx: RelayExpr) -> RelayExpr:
    """Per (sample, tree): does the current node send the sample down its true branch?"""
    feature = _lookup(tables.feature, idx, "int64")
    value = op("take", x, feature, axis=1, batch_dims=1, mode="clip")  # (B, T)
    mode = _lookup(tables.mode, idx, "int64") if len(tables.modes) > 1 else None
    split = _lookup(tables.split, idx, "float64")
    result = None
    for m in sorted(tables.modes):
        if m == _MEMBER:
            members = _lookup(tables.members, idx, "float64")  # (B, T, M)
            hit = op("equal", op("expand_dims", value, axis=-1, num_newaxis=1), members)
            cond = op("any", hit, axis=[-1], keepdims=False, exclude=False)
        else:
            cond = op(_COMPARE[m], value, split)
        if result is None:
            result = cond
        else:
            result = op("where", op("equal", mode, const(m, "int64")), cond, result)
    if tables.tracks_missing.any():
        tracks = _lookup(tables.tracks_missing, idx, "bool")
        result = op("logical_or", result, op("logical_and", op("isnan", value), tracks))
    return result


@converter("TreeEnsemble", since=5, domain=ML_DOMAIN)
def _tree_ensemble(ctx, inputs):
    x = inputs[0]
    shape, dtype = ctx.shape(x), ctx.dtype(x)
    if len(shape) != 2:
        raise ctx.error(f"X must be 2-D (samples, features), got shape {shape}")
    if dtype not in ("float16", "float32", "float64"):
        raise ctx.error(f"X must be float16, float32 or float64, got {dtype}")
    post = int(ctx.attr("post_transform", 0))
    if post != 0:
        # onnx's reference ignores post_transform, so there is nothing to check a result against
        raise ctx.error(f"post_transform {post} is not supported (only 0, NONE)")
    aggregate = int(ctx.attr("aggregate_function", _SUM))
    if aggregate not in (_SUM, _AVERAGE, _MIN, _MAX):
        raise ctx.error(f"aggregate_function must be 0..3, got {aggregate}")
    n_targets = ctx.attr("n_targets")
    if n_targets is None or int(n_targets) <= 0:
        raise ctx.error("the n_targets attribute is required and must be positive")
    n_targets = int(n_targets)
    tables = _Tables(ctx)
    if ((tables.targets < 0) | (tables.targets >= n_targets)).any():
        raise ctx.error(f"leaf_targetids must lie in [0, {n_targets})")
    if ctx.attr("membership_values") is not None and _MEMBER not in tables.modes:
        raise ctx.error("membership_values given, but no node tests set membership")
    batch, trees = shape[0], len(tables.roots)
    x64 = cast(x, ctx, "float64")
    idx = const(np.broadcast_to(tables.roots, (batch, trees)).copy(), "int64")
    for _ in range(tables.depth):
        goes_true = _goes_true(tables, x64, idx)
        idx = op("where", goes_true, _lookup(tables.true_next, idx, "int64"),
                 _lookup(tables.false_next, idx, "int64"))
    # what each leaf adds to each target; the fill is what min/max start from in the reference
    fill = {_MIN: np.finfo(dtype).max, _MAX: np.finfo(dtype).min}.get(aggregate, 0.0)
    contrib = np.full((tables.n + len(tables.targets), n_targets), float(fill))
    weights = tables.weights / trees if aggregate == _AVERAGE else tables.weights
    contrib[tables.n + np.arange(len(tables.targets)), tables.targets] = weights
    picked = _lookup(contrib, idx, "float64")  # (B, T, n_targets)
    reduce = {_SUM: "sum", _AVERAGE: "sum", _MIN: "min", _MAX: "max"}[aggregate]
    out = op(reduce, picked, axis=[1], keepdims=False, exclude=False)
    if aggregate in (_MIN, _MAX):  # the reference's starting value bounds the result too
        out = op("minimum" if aggregate == _MIN else "maximum", out, const(fill, "float64"))
    return cast(out, ctx, dtype)
