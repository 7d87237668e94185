"""FuseOps: group operators into primitive functions, as TVM's fuse_ops.cc does.

Algorithm (TVM's, made iterative so 10,000-node graphs never touch the recursion limit):

1. Indexed forward data-flow graph. Every Var, Constant, Call, Tuple, TupleGetItem, Let and
   If of the function (not the inside of Primitive functions) becomes a node, numbered in
   post-DFS order (children before parents, args in order). Each node records its pattern
   (OpPattern of its op; scalar constants of simple dtypes are ELEMWISE, other constants
   OPAQUE; tuples TUPLE; TupleGetItem INJECTIVE) and its forward edges to the nodes that use
   it. An edge into a BROADCAST op whose argument already has the result shape is ELEMWISE.
   Nodes referenced from outside the data flow (function params and body, Let/If operands,
   non-tensor tuple fields) are marked extern_ref: they are never fused into a consumer.

2. Post-dominator tree. Visiting nodes in reverse topological order, the immediate
   post-dominator of a node is the least common ancestor (in the tree built so far) of all
   its consumers; the pattern stored with it is the max of the edge patterns on the way.
   Extern nodes have no post-dominator.

3. Partition (union-find over groups, one per node), three phases over the nodes in order;
   a node tries to join the group of its immediate post-dominator `dom` when every node on
   every path from it to `dom` satisfies a condition (CheckPath), and then all those nodes
   join (CommitFuse):
   - phase 0: an OUT_ELEMWISE_FUSABLE anchor (conv2d, dense, pooling, softmax) fuses into
     `dom` when the path pattern is ELEMWISE and everything on the way is at most BROADCAST;
     ELEMWISE/BROADCAST nodes fuse into an INJECTIVE or COMM_REDUCE `dom` through paths of
     injective ops (the sink may also be an anchor group).
   - phase 1: INJECTIVE nodes and tuples fuse into `dom` through injective paths.
   - phase 2: injective nodes fuse into an intermediate tuple that was itself fused into
     an injective consumer (concatenate's input tuple).
   Opaque nodes never move (annotation.stop_fusion is opaque: a boundary, dropped from the
   result in step 4); a fusion that would exceed the PassContext config
   "relay.FuseOps.max_depth" (default 256) nodes is refused. fuse_opt_level 0 skips step 3
   (one primitive function per op).

4. Rewrite. Each group becomes `fn (p0, p1, ...) { ... }` with Primitive=1 (and
   relay.reshape_only=1 when it only reshapes), called where the group's root was. Inputs
   from other groups become parameters in first-use order; a scalar constant fused into the
   group stays inline; with link_params off, other constants are inputs (so build lifts them
   into the params blob). The rewrite walks with an explicit stack and allocates parameters
   in the same order as TVM's recursive mutator, so results compare structurally with TVM's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from compiler.ir.attrs import DictAttrs
from compiler.ir.expr import (Call, Constant, Function, GlobalVar, If, Let, Op, RelayExpr,
                              Tuple, TupleGetItem, Var)
from compiler.ir.traversal import children, post_order, with_children
from compiler.ir.types import TensorType, TupleType, Type, is_dynamic_type
from compiler.op.registry import OpPattern, get_op
from compiler.transform import FunctionPass, function_pass, register_pass

__all__ = ["FuseOps", "fuse_ops", "is_reshape_op", "is_non_computational"]

DEFAULT_MAX_DEPTH = 256
_SIMPLE_CONST_DTYPES = {"int32", "int64", "float32", "float64", "bool"}

ELEMWISE, BROADCAST, INJECTIVE = OpPattern.ELEMWISE, OpPattern.BROADCAST, OpPattern.INJECTIVE
COMM_REDUCE, OUT_EWISE = OpPattern.COMM_REDUCE, OpPattern.OUT_ELEMWISE_FUSABLE
TUPLE, OPAQUE = OpPattern.TUPLE, OpPattern.OPAQUE
STOP_FUSION = get_op("annotation.stop_fusion")


def is_reshape_op(op: RelayExpr) -> bool:
    """True for ops that only reinterpret the shape (TVM's TReshapeOp)."""
    return isinstance(op, Op) and op.op_def.reshape_only


def is_non_computational(op: RelayExpr) -> bool:
    """TVM's TNonComputational: an OpDef may set `non_computational = True`."""
    return isinstance(op, Op) and op.op_def.non_computational


# ---- 1. indexed forward graph ------------------------------------------------------------


@dataclass(eq=False)
class GraphNode:
    ref: RelayExpr
    index: int
    pattern: OpPattern = OPAQUE
    extern_ref: bool = False
    outputs: list = field(default_factory=list)  # [(GraphNode, edge pattern)]


_GRAPH_KINDS = (Var, Constant, Call, Tuple, TupleGetItem, Let, If)


def _expand_into(node: RelayExpr) -> bool:
    return not (isinstance(node, Function) and node.is_primitive)


def _reads_values_for_its_shape(call: Call) -> bool:
    """A call whose dynamic output shape its shape function computes from input values (arange
    with computed bounds): alone, so those values stay parameters of its primitive function,
    where the VM's shape program reads them."""
    shape_func = call.op.op_def.shape_func if isinstance(call.op, Op) else None
    return shape_func is not None and is_dynamic_type(call._checked_type) and \
        any(shape_func.reads_value(i) for i in range(len(call.args)))


def _tensor_type(expr: RelayExpr) -> TensorType | None:
    ty = expr._checked_type
    return ty if isinstance(ty, TensorType) else None


def build_graph(func: Function) -> list[GraphNode]:
    """The nodes of `func` in post-DFS order, with forward edges and patterns."""
    every = post_order(func, expand=_expand_into)
    order = [n for n in every if isinstance(n, _GRAPH_KINDS)]
    nodes = {id(n): GraphNode(n, i) for i, n in enumerate(order)}

    def extern(expr: RelayExpr) -> None:
        g = nodes.get(id(expr))
        if g is not None:
            g.extern_ref = True

    def edge(expr: RelayExpr, parent: GraphNode, pattern: OpPattern) -> None:
        g = nodes.get(id(expr))
        if g is not None:
            g.outputs.append((parent, pattern))

    for expr in every:
        kind = type(expr)
        if kind is Function:
            if expr.is_primitive and expr is not func:
                continue
            for p in expr.params:
                extern(p)
            extern(expr.body)
            continue
        g = nodes.get(id(expr))
        if g is None:
            continue
        if kind is Constant:
            simple = expr.data.dtype in _SIMPLE_CONST_DTYPES
            g.pattern = ELEMWISE if simple and len(expr.data.shape) == 0 else OPAQUE
        elif kind is Call:
            g.pattern = OpPattern(expr.op.op_def.pattern) if isinstance(expr.op, Op) else OPAQUE
            rtype = _tensor_type(expr)
            if _reads_values_for_its_shape(expr):
                g.pattern = OPAQUE
            for arg in expr.args:
                pattern = g.pattern
                atype = _tensor_type(arg)
                if (pattern == BROADCAST and atype is not None and rtype is not None
                        and atype.shape == rtype.shape):
                    pattern = ELEMWISE
                edge(arg, g, pattern)
        elif kind is Tuple:
            g.pattern = TUPLE
            for f in expr.fields:
                if _tensor_type(f) is not None:
                    edge(f, g, INJECTIVE)
                else:
                    extern(f)
        elif kind is TupleGetItem:
            ttype = expr.tuple_value.checked_type
            if isinstance(ttype, TupleType) and all(isinstance(t, TensorType)
                                                    for t in ttype.fields):
                g.pattern = INJECTIVE
                edge(expr.tuple_value, g, INJECTIVE)
            else:
                extern(expr.tuple_value)
        elif kind is Let:
            for e in (expr.var, expr.value, expr.body):
                extern(e)
        elif kind is If:
            for e in (expr.cond, expr.true_branch, expr.false_branch):
                extern(e)
    extern(func)
    return [nodes[id(n)] for n in order]


# ---- 2. post-dominator tree --------------------------------------------------------------


@dataclass(eq=False)
class DomNode:
    gnode: GraphNode
    parent: DomNode | None
    depth: int
    pattern: OpPattern


def _lca(lhs: DomNode | None, rhs: DomNode | None, pattern: OpPattern):
    while lhs is not rhs:
        if lhs is None or rhs is None:
            return None, pattern
        if lhs.depth < rhs.depth:
            pattern = max(pattern, rhs.pattern)
            rhs = rhs.parent
        elif rhs.depth < lhs.depth:
            pattern = max(pattern, lhs.pattern)
            lhs = lhs.parent
        else:
            pattern = max(pattern, lhs.pattern, rhs.pattern)
            lhs, rhs = lhs.parent, rhs.parent
    return lhs, pattern


def post_dominator_tree(graph: list[GraphNode]) -> list[DomNode]:
    """The immediate post-dominator of every node (single reverse pass with LCA, on a DAG)."""
    tree: list = [None] * len(graph)
    for gnode in reversed(graph):
        if gnode.extern_ref or not gnode.outputs:
            tree[gnode.index] = DomNode(gnode, None, 1, OPAQUE)
            continue
        pattern = ELEMWISE
        (first, first_pattern), rest = gnode.outputs[0], gnode.outputs[1:]
        parent = tree[first.index]
        pattern = max(pattern, first_pattern)
        for out, edge_pattern in rest:
            parent, pattern = _lca(parent, tree[out.index], pattern)
            pattern = max(pattern, edge_pattern)
        depth = parent.depth + 1 if parent is not None else 1
        tree[gnode.index] = DomNode(gnode, parent, depth, OpPattern(pattern))
    return tree


# ---- 3. partition ------------------------------------------------------------------------


class Group:
    """A union-find set of graph nodes that becomes one fused function."""

    __slots__ = ("parent", "pattern", "root_ref", "anchor_ref", "num_nodes")

    def __init__(self, pattern: OpPattern, root_ref: RelayExpr):
        self.parent: Group | None = None
        self.pattern = pattern
        self.root_ref = root_ref
        self.anchor_ref = root_ref if pattern == OUT_EWISE else None
        self.num_nodes = 1

    def find_root(self) -> Group:
        root = self
        while root.parent is not None:
            root = root.parent
        node = self
        while node is not root:  # path compression
            node.parent, node = root, node.parent
        return root


def _combine(lhs: OpPattern, rhs: OpPattern) -> OpPattern:
    if lhs > BROADCAST and rhs > BROADCAST:
        raise AssertionError(f"FuseOps: cannot merge two complex groups ({lhs.name}, {rhs.name})")
    return max(lhs, rhs)


class GraphPartitioner:
    """Runs the three fusion phases over the post-dominator tree."""

    def __init__(self, opt_level: int, max_depth: int):
        self.opt_level = opt_level
        self.max_depth = max_depth
        self.groups: list[Group] = []

    def partition(self, graph: list[GraphNode]) -> list[Group]:
        self.groups = [Group(g.pattern, g.ref) for g in graph]
        if self.opt_level == 0:
            return self.groups
        tree = post_dominator_tree(graph)
        for phase in range(3):
            self._run_fuse(graph, tree, phase)
        return self.groups

    def _reachable(self, src: GraphNode, sink: GraphNode,
                   limit: int | None = None) -> list[GraphNode]:
        """Nodes on paths from src's consumers up to and including sink (explicit DFS); with
        a limit, the walk stops once it found more than `limit` nodes."""
        seen: set = set()
        found = []
        stack = [out for out, _ in reversed(src.outputs)]
        while stack and (limit is None or len(found) <= limit):
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            found.append(node)
            if node is not sink:
                stack.extend(out for out, _ in reversed(node.outputs))
        return found

    def _check_path(self, src: GraphNode, sink: GraphNode, fcond) -> bool:
        assert not src.extern_ref and src is not sink
        for node in self._reachable(src, sink):
            if not fcond(self.groups[node.index].find_root().pattern, node is sink):
                return False
        return True

    def _merge(self, child: Group, parent: Group) -> None:
        child, parent = child.find_root(), parent.find_root()
        if child is parent:
            return
        parent.num_nodes += child.num_nodes
        child.parent = parent
        if child.anchor_ref is not None:
            assert parent.anchor_ref is None, "FuseOps: two anchors in one group"
            parent.anchor_ref = child.anchor_ref
            parent.pattern = _combine(child.pattern, parent.pattern)

    def _commit_fuse(self, src: GraphNode, sink: GraphNode) -> None:
        target = self.groups[sink.index]
        self._merge(self.groups[src.index], target)
        for node in self._reachable(src, sink):
            if node is not sink:
                self._merge(self.groups[node.index], target)

    def _count_fused_nodes(self, child: GraphNode, dom_parent: GraphNode) -> int:
        total = self.groups[dom_parent.index].find_root().num_nodes
        total += self.groups[child.index].num_nodes
        # every node adds at least 1: past max_depth nodes the answer is "too many" already, and
        # stopping there keeps far post-dominators (overlapping skip connections) from making
        # the pass quadratic
        for node in self._reachable(child, dom_parent, limit=self.max_depth):
            if node is not dom_parent:
                total += self.groups[node.index].num_nodes
        return total

    def _run_fuse(self, graph: list[GraphNode], tree: list[DomNode], phase: int) -> None:
        groups = self.groups
        for gnode in graph:
            nid = gnode.index
            group = groups[nid]
            dom = tree[nid]
            if group.pattern == OPAQUE or dom.parent is None:
                continue
            assert not gnode.extern_ref
            sink = dom.parent.gnode
            if self._count_fused_nodes(gnode, sink) > self.max_depth:
                continue
            sink_group = groups[sink.index]
            if phase == 2:
                # fuse injective ops into an intermediate tuple fused into its consumer
                if group.pattern > INJECTIVE:
                    continue
                root = sink_group.find_root()
                if root.pattern == TUPLE:
                    continue
                if sink_group.pattern == TUPLE and root.pattern <= INJECTIVE:
                    if self._check_path(gnode, sink, lambda k, s: k <= INJECTIVE):
                        self._commit_fuse(gnode, sink)
                continue
            if group.find_root() is sink_group.find_root():
                continue
            if sink_group.pattern == TUPLE:
                continue  # tuples are fused in phase 2
            if group.pattern == OUT_EWISE:
                if phase != 0 or dom.pattern != ELEMWISE:
                    continue
                if self._check_path(gnode, sink, lambda k, s: k <= BROADCAST):
                    self._commit_fuse(gnode, sink)
            elif group.pattern <= BROADCAST:
                if dom.pattern <= INJECTIVE or dom.pattern == COMM_REDUCE:
                    if self._check_path(gnode, sink, _broadcast_path_ok):
                        self._commit_fuse(gnode, sink)
            elif group.pattern in (INJECTIVE, TUPLE):
                if phase != 1:
                    continue  # after phase 0, so anchors finish fusing first
                if self._check_path(gnode, sink, lambda k, s: k <= INJECTIVE):
                    self._commit_fuse(gnode, sink)
            # COMM_REDUCE groups do not move into their consumers


def _broadcast_path_ok(kind: OpPattern, is_sink: bool) -> bool:
    if not is_sink:
        return kind <= INJECTIVE
    return kind <= BROADCAST or kind in (COMM_REDUCE, INJECTIVE, OUT_EWISE)


# ---- 4. rewrite --------------------------------------------------------------------------


class _GroupInfo:
    __slots__ = ("params", "arguments")

    def __init__(self):
        self.params: list[Var] = []
        self.arguments: list[RelayExpr] = []

    def param_for(self, expr: RelayExpr, ty: Type) -> Var:
        for i, arg in enumerate(self.arguments):  # groups have few inputs: linear scan
            if arg is expr:
                return self.params[i]
        var = Var(f"p{len(self.params)}", ty)
        self.params.append(var)
        self.arguments.append(expr)
        return var


class _FuseRewriter:
    """Builds the fused program; an explicit-stack version of TVM's FuseMutator."""

    def __init__(self, gmap: dict, link_params: bool):
        self.gmap = gmap  # id(expr) -> Group
        self.link_params = link_params
        self.ginfo: dict[int, _GroupInfo] = {}
        self.memo: dict = {}

    def _group_of(self, expr: RelayExpr) -> Group | None:
        g = self.gmap.get(id(expr))
        return g.find_root() if g is not None else None

    def _grouped(self, node: RelayExpr) -> Group | None:
        """The group whose arguments `node`'s children are, or None for plain rebuilding."""
        kind = type(node)
        if kind is Call:
            if isinstance(node.op, Op) and not is_non_computational(node.op) \
                    and node.op is not STOP_FUSION:
                return self._group_of(node)
            return None
        if kind is Tuple:
            group = self._group_of(node)
            return None if group is None or group.root_ref is node else group
        if kind is TupleGetItem:
            return self._group_of(node)
        return None

    def _kids(self, node: RelayExpr) -> tuple:
        if type(node) is Call and isinstance(node.op, Op):
            return node.args  # the op itself is not mutated
        if type(node) is Function and node.is_primitive:
            return ()
        return children(node)

    def _new_arg(self, child: RelayExpr, group: Group) -> RelayExpr:
        new = self.memo.get(child, child)
        if self._group_of(child) is group:
            return new
        if self.link_params and isinstance(new, Constant):
            return new
        info = self.ginfo.setdefault(id(group), _GroupInfo())
        return info.param_for(new, child.checked_type)

    def rewrite(self, root: RelayExpr) -> RelayExpr:
        memo = self.memo
        # frame: [node, its children, next child index, group (or None), new children]
        stack = [[root, self._kids(root), 0, self._grouped(root), []]]
        while stack:
            frame = stack[-1]
            node, kids, i, group, new = frame
            if i < len(kids):
                child = kids[i]
                if child not in memo and not isinstance(child, (Op, GlobalVar)):
                    # visit the child first; this frame resumes at the same index afterwards
                    stack.append([child, self._kids(child), 0, self._grouped(child), []])
                    continue
                new.append(self._new_arg(child, group) if group is not None
                           else memo.get(child, child))
                frame[2] = i + 1
                continue
            stack.pop()
            memo[node] = self._build(node, group, new)
        return memo[root]

    def _build(self, node: RelayExpr, group: Group | None, new: list) -> RelayExpr:
        kind = type(node)
        if kind is Call and group is not None:
            call = Call(node.op, new, node.attrs, node.type_args, node.span)
            if group.root_ref is node:
                return self._make_function(group, node.checked_type, call)
            return call
        if kind is Tuple and group is not None:
            return Tuple(new, node.span)
        if kind is TupleGetItem and group is not None:
            item = TupleGetItem(new[0], node.index, node.span)
            if group.root_ref is not node:
                return item
            if self._group_of(node.tuple_value) is not group:
                # isolated: the tuple comes from an opaque op (e.g. split's consumer elsewhere)
                value = self.memo.get(node.tuple_value, node.tuple_value)
                return with_children(node, [value])
            return self._make_function(group, node.checked_type, item)
        if kind is Call and node.op is STOP_FUSION:
            return new[0]  # the boundary has done its job: the fused program drops it
        if kind is Call:
            return with_children(node, [node.op, *new] if isinstance(node.op, Op) else new)
        if kind is Function and node.is_primitive:
            return node
        if not children(node):
            return node
        return with_children(node, new)

    def _make_function(self, group: Group, ret_type: Type, body: RelayExpr) -> RelayExpr:
        has_call, reshape_only = False, True
        for n in post_order(body, expand=lambda e: not isinstance(e, Function)):
            if isinstance(n, Call):
                has_call = True
                reshape_only = reshape_only and is_reshape_op(n.op)
            elif isinstance(n, Var):
                reshape_only = reshape_only and isinstance(n.type_annotation, TensorType)
        info = self.ginfo.setdefault(id(group), _GroupInfo())
        attrs = {"Primitive": int(has_call)}
        if has_call and reshape_only:
            attrs["relay.reshape_only"] = 1
        func = Function(info.params, body, ret_type, None, DictAttrs(attrs))
        return Call(func, list(info.arguments))


def fuse_ops(func: Function, opt_level: int, max_depth: int = DEFAULT_MAX_DEPTH,
             link_params: bool = False) -> Function:
    """Fuse the (type-checked) function's ops into primitive functions."""
    if func.is_primitive:
        return func
    graph = build_graph(func)
    groups = GraphPartitioner(opt_level, max_depth).partition(graph)
    gmap = {id(g.ref): groups[g.index] for g in graph}
    return _FuseRewriter(gmap, link_params).rewrite(func)


@register_pass
def FuseOps(fuse_opt_level: int = -1) -> FunctionPass:  # noqa: N802  (TVM's pass name)
    """Fuse operators into primitive functions; -1 means the PassContext's opt_level."""

    def transform(func: Function, mod, ctx) -> Function:
        level = ctx.opt_level if fuse_opt_level == -1 else fuse_opt_level
        max_depth = int(ctx.get_config("relay.FuseOps.max_depth", DEFAULT_MAX_DEPTH))
        link = bool(ctx.get_config("relay.FuseOps.link_params", False))
        return fuse_ops(func, level, max_depth, link)

    return function_pass(transform, opt_level=0, name="FuseOps", required=["InferType"])
