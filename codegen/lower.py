"""Lowering of tensor expressions to one PrimFunc: one loop nest per materialized stage.

Algorithm: starting from the outputs, collect the materialized tensors they read (loads
of StageBuffers; extern inputs) with an explicit-stack DFS, giving a topological order.
Each stage becomes a loop nest over its shape (row-major, innermost loop `vectorized`
when the stage has no reduction, outer loops parallel when it has work enough: parallel.py's
ParallelPolicy); reductions inside a body are lifted into accumulators
(a one-element local Allocate that mem2reg turns into a register) filled by a loop nest
over the reduce axes before the store. Non-output stages live in Allocate'd scratch.
Outputs that are placeholders or repeat an earlier output are copied. Index expressions
are simplified with the loop bounds so reshapes/transposes index without div/mod.
"""
from __future__ import annotations

from .errors import LoweringError
from .parallel import ParallelPolicy, serial_nest, stage_nest
from .simplify import simplify
from .te import StageBuffer, Tensor
from .tir.dtype import INDEX_DTYPE, is_float, max_value, min_value
from .tir.expr import BinaryOp, Expr, IntImm, Load, Reduce, Var
from .tir.functor import post_order, rewrite
from .tir.ops import cast, const, logical_and, logical_not, logical_or, ne
from .tir.ops import max as tmax
from .tir.ops import min as tmin
from .tir.stmt import Allocate, Buffer, ConstantBuffer, IfThenElse, PrimFunc, Stmt, Store, seq


# tensors that are read, never computed: kernel parameters and embedded constants
SOURCE_KINDS = ("placeholder", "constant")


def lower(name: str, inputs: list[Tensor], outputs: list[Tensor],
          parallel: ParallelPolicy | None = None, vectorize: bool = True) -> PrimFunc:
    """Lower the computation of `outputs` from placeholder `inputs` to a PrimFunc; the stages'
    loop nests go parallel by `parallel` (the build's CodegenOptions.parallel; None: the
    default policy). vectorize False (CodegenOptions.vectorize): no loop is marked
    vectorized, and the kernel's attrs say "vectorize": False (codegen.optimise turns LLVM's
    vectorisers off for it)."""
    return _Lowering(name, list(inputs), list(outputs),
                     parallel if parallel is not None else ParallelPolicy(), vectorize).run()


class _Lowering:
    """State of one lower() call."""

    def __init__(self, name: str, inputs: list[Tensor], outputs: list[Tensor],
                 parallel: ParallelPolicy, vectorize: bool) -> None:
        self.name, self.inputs, self.outputs = name, inputs, outputs
        self.parallel, self.vectorize = parallel, vectorize
        self.acc_ids = 0

    def fail(self, msg: str) -> LoweringError:
        return LoweringError(f"lowering {self.name}: {msg}")

    def run(self) -> PrimFunc:
        for t in self.inputs:
            if not isinstance(t, Tensor) or t.kind != "placeholder":
                raise self.fail(f"inputs must be te.placeholder tensors, got {t!r}")
        for t in self.outputs:
            if not isinstance(t, Tensor):
                raise self.fail(f"outputs must be te.Tensor, got {type(t).__name__}")
        if not self.outputs:
            raise self.fail("no outputs")
        input_bufs = {t.buffer for t in self.inputs}
        if len(input_bufs) != len(self.inputs):
            raise self.fail("the same input tensor is listed twice")
        # output buffers: a computed output is written in place, others are copied
        out_params: list[Buffer] = []
        copies: list[tuple[Buffer, Tensor]] = []
        claimed: set[int] = set()
        for k, t in enumerate(self.outputs):
            if t.kind not in SOURCE_KINDS and id(t) not in claimed:
                claimed.add(id(t))
                out_params.append(t.buffer)
            else:
                buf = Buffer(f"{t.name}_out{k}", t.shape, t.dtype)
                out_params.append(buf)
                copies.append((buf, t))
        stages = self.topo_stages([t for t in self.outputs if t.kind not in SOURCE_KINDS])
        stages = self.fuse_epilogues(stages, out_params)
        for t in stages:
            for n in (post_order(t.body) if t.body is not None else ()):
                if type(n) is Load and not isinstance(n.buffer, (StageBuffer, ConstantBuffer)) \
                        and n.buffer not in input_bufs:
                    raise self.fail(f"stage {t.name} reads buffer {n.buffer.name} that is not "
                                    f"among the inputs {[x.name for x in self.inputs]}")
            for x in t.extern_inputs:
                if x.kind == "placeholder" and x.buffer not in input_bufs:
                    raise self.fail(f"extern {t.name} reads {x.name}, not among the inputs")
        body = seq(*(self.stage(t) for t in stages),
                   *(self.copy(buf, t) for buf, t in copies))
        outs = set(out_params)
        for t in reversed(stages):
            if t.buffer not in outs:
                body = Allocate(t.buffer, body)
        params = [t.buffer for t in self.inputs] + out_params
        fused = getattr(self, "fused", {})  # an extern's attrs stay with its fused epilogue
        attrs = {k: v for t in stages for src in (t, fused.get(id(t))) if src is not None
                 for k, v in src.kernel_attrs.items()}
        in_place = self.in_place_pairs(stages, out_params, [t.buffer for _, t in copies])
        if in_place:
            attrs["in_place"] = in_place
        if not self.vectorize:
            attrs["vectorize"] = False
        return PrimFunc(self.name, params, body, attrs)

    def in_place_pairs(self, stages: list[Tensor], out_params: list[Buffer],
                       copied: list[Buffer]) -> tuple[tuple[int, int], ...]:
        """(output param, input param) pairs that may share storage (runtime.library's
        InPlace): the output is a fused epilogue of an extern that writes each element once
        (mark_epilogue in_place), and the input, of its shape and dtype, is read nowhere but
        in that epilogue, at the output's own index (not by another stage, nor `copied` to
        another output)."""
        readers: dict[Buffer, int] = {b: 1 for b in copied}
        for t in stages:
            e = self.fused.get(id(t))
            # the extern's own inputs and its epilogue's loads count apart: a residual that is
            # also the extern's input (a depthwise conv adding its own input) is read twice
            groups = [[x.buffer for x in t.extern_inputs]] if t.kind == "extern" else \
                [[n.buffer for n in post_order(t.body) if type(n) is Load],
                 [x.buffer for x in e.extern_inputs] if e is not None else []]
            for read in groups:
                for b in set(read):
                    readers[b] = readers.get(b, 0) + 1
        pairs = []
        for t in stages:
            e = self.fused.get(id(t))
            if e is None or not getattr(e.extern_fn, "epilogue_in_place", False) \
                    or t.buffer not in out_params:
                continue
            loads = [n for n in post_order(t.body) if type(n) is Load]
            for q, x in enumerate(self.inputs):
                mine = [n for n in loads if n.buffer is x.buffer]
                if mine and x.shape == t.shape and x.dtype == t.dtype \
                        and readers.get(x.buffer) == 1 \
                        and all(len(n.indices) == len(t.axis)
                                and all(i is a for i, a in zip(n.indices, t.axis))
                                for n in mine):
                    pairs.append((len(self.inputs) + out_params.index(t.buffer), q))
                    break
        return tuple(pairs)

    def topo_stages(self, roots: list[Tensor]) -> list[Tensor]:
        """Materialized tensors needed by roots, producers first (explicit-stack DFS)."""
        order: list[Tensor] = []
        state: dict[int, int] = {}
        stack: list[tuple[Tensor, bool]] = [(t, False) for t in reversed(roots)]
        while stack:
            t, done = stack.pop()
            if done:
                if state[id(t)] == 1:
                    state[id(t)] = 2
                    order.append(t)
                continue
            if id(t) in state:
                continue
            state[id(t)] = 1
            stack.append((t, True))
            for dep in self.deps(t):
                if id(dep) not in state:
                    stack.append((dep, False))
        return order

    @staticmethod
    def deps(t: Tensor) -> list[Tensor]:
        if t.kind == "extern":
            return [x for x in t.extern_inputs if x.kind not in SOURCE_KINDS]
        out = []
        for n in post_order(t.body):
            if type(n) is Load and isinstance(n.buffer, StageBuffer) and n.buffer.producer is not t:
                out.append(n.buffer.producer)
        return out

    def fuse_epilogues(self, stages: list[Tensor], out_params: list[Buffer]) -> list[Tensor]:
        """Fold an elementwise consumer into an extern that accepts `epilogue=` (schedules).

        A compute stage without reductions whose only materialized read is the extern e, at
        exactly its own axis (same shape), with e read by nothing else and not an output, is
        emitted as e's fcompute writing the consumer's buffer with the consumer's body as
        epilogue(value, indices); e's own stage and scratch buffer disappear. The consumer's
        dtype may differ from e's where e's fcompute says its epilogue may cast
        (mark_epilogue's casts: it then never keeps its own values in the output buffer).
        """
        self.fused: dict[int, Tensor] = {}
        readers: dict[int, int] = {}
        for t in stages:
            deps = t.extern_inputs if t.kind == "extern" else [
                n.buffer.producer for n in post_order(t.body)
                if type(n) is Load and isinstance(n.buffer, StageBuffer)]
            for d in deps:
                readers[id(d)] = readers.get(id(d), 0) + 1
        outs = set(out_params)
        drop: set[int] = set()
        for t in stages:
            if t.kind != "compute" or t.body is None:
                continue
            nodes = post_order(t.body)
            if any(type(n) is Reduce for n in nodes):
                continue
            loads = [n for n in nodes if type(n) is Load and isinstance(n.buffer, StageBuffer)]
            if not loads:
                continue
            e = loads[0].buffer.producer
            if (e.kind != "extern" or not getattr(e.extern_fn, "supports_epilogue", False)
                    or e.buffer in outs or e.shape != t.shape
                    or (e.dtype != t.dtype and not getattr(e.extern_fn, "epilogue_casts",
                                                           False))
                    or readers.get(id(e), 0) != len(loads)
                    or any(n.buffer is not e.buffer or len(n.indices) != len(t.axis)
                           or any(i is not a for i, a in zip(n.indices, t.axis))
                           for n in loads)):
                continue
            self.fused[id(t)] = e
            drop.add(id(e))
        return [t for t in stages if id(t) not in drop]

    def fused_stage(self, t: Tensor, e: Tensor) -> Stmt:
        """e's extern statement writing t.buffer, with t's body as the epilogue."""
        def epilogue(value: Expr, idx: tuple) -> Expr:
            mapping = dict(zip(t.axis, idx))
            return rewrite(t.body, lambda n: value if type(n) is Load and n.buffer is e.buffer
                           else mapping.get(n) if type(n) is Var else None)

        stmt = e.extern_fn([x.buffer for x in e.extern_inputs], [t.buffer], epilogue=epilogue)
        if not isinstance(stmt, Stmt):
            raise self.fail(f"extern {e.name}: fcompute must return a tir Stmt, "
                            f"got {type(stmt).__name__}")
        return stmt

    # ------------------------------------------------------------------ stages
    def stage(self, t: Tensor) -> Stmt:
        """The loop nest computing t into t.buffer."""
        fused = getattr(self, "fused", {}).get(id(t))
        if fused is not None:
            return self.fused_stage(t, fused)
        if t.kind == "extern":
            stmt = t.extern_fn([x.buffer for x in t.extern_inputs], [t.buffer])
            if not isinstance(stmt, Stmt):
                raise self.fail(f"extern {t.name}: fcompute must return a tir Stmt, "
                                f"got {type(stmt).__name__}")
            return stmt
        bounds = {v: (0, n - 1) for v, n in zip(t.axis, t.shape)}
        value = t.body
        reduces = [n for n in post_order(value) if type(n) is Reduce]
        pre: list[Stmt] = []
        accs: list[Buffer] = []
        if reduces:
            replace: dict[int, Expr] = {}
            for r in reduces:
                if any(type(n) is Reduce for n in post_order(r.source)):
                    raise self.fail(f"stage {t.name}: nested reductions are not supported")
                stmt, result, bufs = self.reduction(t, r, bounds)
                pre.append(stmt)
                accs.extend(bufs)
                replace[id(r)] = result
            value = rewrite(value, lambda n: replace.get(id(n)))
        value = simplify(value, bounds)
        body: Stmt = seq(*pre, Store(t.buffer, t.axis, value))
        for buf in reversed(accs):  # one-element locals: the emitter allocas them once
            body = Allocate(buf, body)
        per_point = 1
        for r in reduces:
            for v in r.axis:
                per_point *= max(1, v.dom[1])
        return stage_nest(t.axis, t.shape, body, self.vectorize and not reduces, self.parallel,
                          work_per_point=per_point)

    def reduction(self, t: Tensor, r: Reduce, bounds: dict) -> tuple[Stmt, Expr, list[Buffer]]:
        """Accumulator init + update loop nest for r; returns (stmt, accumulator value)."""
        self.acc_ids += 1
        src_dtype = r.source.dtype
        acc = Buffer(f"{t.name}_acc{self.acc_ids}", (1,), src_dtype)
        zero = (IntImm(0, INDEX_DTYPE),)
        cur = Load(acc, zero, src_dtype)
        # reduce vars k run over [0, extent); the source sees start + k
        loop_vars = tuple(Var(v.name, INDEX_DTYPE) for v in r.axis)
        shifted = {v: (lv if v.dom[0] == 0 else lv + v.dom[0]) for v, lv in zip(r.axis, loop_vars)}
        inner_bounds = dict(bounds)
        inner_bounds.update({lv: (0, v.dom[1] - 1) for v, lv in zip(r.axis, loop_vars)})
        src = simplify(_subst(r.source, shifted), inner_bounds)
        where = None if r.where is None else simplify(_subst(r.where, shifted), inner_bounds)
        k = r.kind
        updates: list[Stmt]
        init: list[Stmt]
        if k.startswith("arg"):
            idx_buf = Buffer(f"{t.name}_idx{self.acc_ids}", (1,), r.dtype)
            cur_idx = Load(idx_buf, zero, r.dtype)
            flat: Expr = IntImm(0, INDEX_DTYPE)
            for v, lv in zip(r.axis, loop_vars):
                flat = lv if isinstance(flat, IntImm) and flat.value == 0 else \
                    flat * v.dom[1] + lv
            if len(r.axis) == 1 and r.axis[0].dom[0] != 0:
                flat = shifted[r.axis[0]]
            better = _arg_better(k, src, cur)
            init_val = min_value(src_dtype) if k.startswith("argmax") else max_value(src_dtype)
            init = [Store(acc, zero, const(init_val, src_dtype)),
                    Store(idx_buf, zero, const(0, r.dtype))]
            updates = [IfThenElse(better, seq(Store(acc, zero, src),
                                              Store(idx_buf, zero, cast(flat, r.dtype))))]
            result: Expr = cur_idx
            bufs = [acc, idx_buf]
        else:
            ident = {"sum": 0, "prod": 1, "max": min_value(src_dtype),
                     "min": max_value(src_dtype)}[k]
            init = [Store(acc, zero, const(ident, src_dtype))]
            if k == "sum":
                new = BinaryOp("add", cur, src, src_dtype)
            elif k == "prod":
                new = BinaryOp("mul", cur, src, src_dtype)
            elif k == "max":  # NaN propagates (the emitter's max of an accumulator)
                new = tmax(cur, src)
            else:
                new = tmin(cur, src)
            updates = [Store(acc, zero, new)]
            result = cur
            bufs = [acc]
        update: Stmt = seq(*updates)
        if where is not None:
            update = IfThenElse(where, update)
        nest = serial_nest(loop_vars, tuple(v.dom[1] for v in r.axis), update)
        return seq(*init, nest), result, bufs

    def copy(self, buf: Buffer, t: Tensor) -> Stmt:
        """buf[...] = t[...] for placeholder or repeated outputs."""
        axis = tuple(Var(f"{buf.name}_c{d}", INDEX_DTYPE) for d in range(t.ndim))
        return stage_nest(axis, t.shape, Store(buf, axis, Load(t.buffer, axis, t.dtype)),
                          self.vectorize, self.parallel)


def _subst(e: Expr, mapping: dict[Var, Expr]) -> Expr:
    return rewrite(e, lambda n: mapping.get(n) if type(n) is Var else None)


def _arg_better(kind: str, v: Expr, cur: Expr) -> Expr:
    """Condition to take a new candidate: strict for first index, non-strict for last."""
    last = kind.endswith("_last")
    is_max = kind.startswith("argmax")
    if is_max:
        cmp = BinaryOp("ge" if last else "gt", v, cur, "bool")
    else:
        cmp = BinaryOp("le" if last else "lt", v, cur, "bool")
    if not is_float(v.dtype):
        return cmp
    # NaN wins (first NaN for first-index, last NaN for last-index), like numpy
    v_nan, cur_nan = ne(v, v), ne(cur, cur)
    if last:
        return logical_or(logical_and(cmp, logical_not(cur_nan)), v_nan)
    return logical_or(cmp, logical_and(v_nan, logical_not(cur_nan)))

