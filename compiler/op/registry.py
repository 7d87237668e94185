"""The operator registry: one OpDef per op holds everything the compiler knows about it.

Passes, the frontend, codegen lowering and tests all read this table; nothing else keeps a
list of ops. Op files (tensor.py, nn.py, ...) call `register(OpDef(...))` at import time and
define the user-facing constructors (relay.add, relay.nn.conv2d, ...) via `make_call`.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable

from compiler.errors import CompilerError
from compiler.ir.attrs import Attrs
from compiler.ir.expr import VARIADIC, Call, Constant, Op, RelayExpr, _to_expr
from .type_relations import broadcast_rel, identity_rel


class OpPattern(IntEnum):
    """TVM's fusion patterns, ordered so that combining two patterns is max()."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8


@dataclass(frozen=True)
class ShapeFuncDef:
    """A declared shape function: the runtime.shape_functions name a ShapeProgram calls, and
    per op input whether the function reads its value (True) or only its shape (False)."""

    name: str
    data_dependent: tuple | bool = ()  # one flag per input, or one for all

    def reads_value(self, index: int) -> bool:
        flags = self.data_dependent
        if isinstance(flags, bool):
            return flags
        return bool(flags[index] if index < len(flags) else False)


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()


@dataclass
class OpDef:
    """Everything about one operator.

    type_rel(arg_types, attrs) -> output Type (raise TypeInferenceError on bad input).
    reference(inputs, attrs) -> numpy result (tuple for multi-output); a tuple-typed argument
        arrives as a tuple of arrays.
    compute(inputs, attrs, out_type) -> te.Tensor or tuple of them (codegen.te); registered by
        compiler/op/compute/*.py through `register_compute`.
    attrs: the attribute schema, name -> default (REQUIRED when it has none), in print order.
    reshape_only: the output is the input's bytes under another shape (a fused group of only
        such ops becomes "__nop" in the graph and shares its input's storage).
    flops(arg_types, attrs, out_type) -> floating-point operations of one call, for the
        profiler's GFLOP/s; attached by compiler/op/cost.py through `register_flops`.
    solve_missing(arg_types, attrs) -> {index: Type} for arguments whose type is unknown (None
        in arg_types), deduced from the known ones and the attrs (TVM's type relations solve
        a conv2d weight from channels and kernel_size); InferType types unannotated params
        with it. Attached by compiler/op/type_solvers.py through `register_type_solver`.
    shape_func: how the output shape is computed at run time when it is dynamic (Any). None
        means "from type_rel": relations compute with symbolic dims, so the relation *is* the
        shape function (compiler.op.shape_func). A ShapeFuncDef names a runtime shape
        function instead, for ops whose output shape depends on input values (dyn.*,
        arange, argwhere) or custom ops (register_shape_func).
    """

    name: str
    num_inputs: int
    type_rel: Callable
    pattern: OpPattern
    reference: Callable
    attrs: dict = field(default_factory=dict)
    attrs_type_key: str = "Attrs"
    compute: Callable | None = None
    stateful: bool = False
    reshape_only: bool = False  # only reinterprets the shape (TVM's TReshapeOp): may alias
    non_computational: bool = False  # TVM's TNonComputational: FoldConstant leaves it alone
    # when the numpy reference gives exactly the compiled kernel's bits (FoldConstant may fold
    # through it): "values" for data movement (any dtype), "float" for correctly rounded IEEE
    # operations on float32/float64; "" otherwise (own approximations, C integer semantics)
    exact_reference: str = ""
    description: str = ""
    op: Op | None = None
    flops: Callable | None = None
    solve_missing: Callable | None = None
    support_level: int = 10
    arguments: list = field(default_factory=list)  # (name, type key, description), as TVM's
    extra_attrs: dict = field(default_factory=dict)  # TVM op attributes without a field here
    attr_levels: dict = field(default_factory=dict)  # attr key -> plevel it was set at
    shape_func: ShapeFuncDef | None = None

    def get_attr(self, key: str) -> Any:
        """TVM's Op.get_attr: the attribute under its TVM key (TOpPattern, FTVMCompute, ...)."""
        if key in _ATTR_FIELDS:
            return getattr(self, _ATTR_FIELDS[key])
        return self.extra_attrs.get(key)

    def set_attr(self, key: str, value: Any, plevel: int = 10) -> None:
        """TVM's register_op_attr: a higher plevel overrides, an equal one is an error."""
        old = self.attr_levels.get(key)
        if old is not None and plevel == old:
            raise CompilerError(f"attribute {key!r} of op {self.name!r} is already registered "
                                f"with plevel={plevel}; give a higher level to override it")
        if old is not None and plevel < old:
            return
        self.attr_levels[key] = plevel
        if key in _ATTR_FIELDS:
            setattr(self, _ATTR_FIELDS[key], OpPattern(value) if key == "TOpPattern" else value)
        else:
            self.extra_attrs[key] = value

    def reset_attr(self, key: str) -> None:
        """Forget an attribute set through set_attr (a field keeps its current value)."""
        self.attr_levels.pop(key, None)
        self.extra_attrs.pop(key, None)

    def make_call(self, args: list, **attrs: Any) -> Call:
        """A call of this op after checking arity and attributes (Python values among the
        arguments become constants)."""
        args = [_to_expr(a) if not isinstance(a, RelayExpr) else a for a in args]
        if self.num_inputs != VARIADIC and len(args) != self.num_inputs:
            raise CompilerError(f"{self.name} takes {self.num_inputs} argument(s), got "
                                f"{len(args)}")
        return Call(self.op, args, make_attrs(self, attrs) if self.attrs or attrs else None)

    def add_type_rel(self, rel_name: str, type_rel: Callable | None = None) -> None:
        """TVM's Op.add_type_rel: a function, or one of the named relations TVM provides."""
        if type_rel is None:
            if rel_name not in _NAMED_RELATIONS:
                raise CompilerError(f"op {self.name!r}: unknown type relation {rel_name!r}; "
                                    f"give a function or one of {sorted(_NAMED_RELATIONS)}")
            type_rel = _NAMED_RELATIONS[rel_name](self.name)
        self.type_rel = type_rel


# TVM's attribute keys for the OpDef fields that hold them (compute has this registry's
# signature, compute(inputs, attrs, out_type); relay.op.register_compute adapts TVM's)
_ATTR_FIELDS = {"TOpPattern": "pattern", "TOpIsStateful": "stateful", "FTVMCompute": "compute",
                "TNonComputational": "non_computational", "TReshapeOp": "reshape_only",
                "FReference": "reference",  # relayjit's own key: the numpy reference
                "FShapeFunc": "shape_func"}  # a ShapeFuncDef (TVM's FShapeFunc and
# TShapeDataDependent in one)
_NAMED_RELATIONS = {"Identity": identity_rel, "Broadcast": broadcast_rel,
                    "BroadcastComp": lambda name: broadcast_rel(name, "bool")}


# The op attribute holding an op's decomposition into other ops (TVM's key, used by QNN):
# fn(attrs, args, arg_types) -> Expr. relay.qnn.transform.CanonicalizeOps applies it, and the
# lowering expands it for an op that has no compute rule.
CANONICALIZE = "FTVMQnnCanonicalize"

_REGISTRY: dict[str, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    if opdef.name in _REGISTRY:
        raise CompilerError(f"op {opdef.name!r} is registered twice")
    opdef.op = Op(opdef.name)
    opdef.op._define(opdef)
    _REGISTRY[opdef.name] = opdef
    return opdef


def _no_type_rel(name: str) -> Callable:
    def rel(types, attrs):
        raise CompilerError(f"op {name!r} has no type relation; add one with "
                            f"Op.get({name!r}).add_type_rel(name, function)")
    return rel


def _no_reference(name: str) -> Callable:
    def reference(inputs, attrs):
        raise CompilerError(f"op {name!r} has no numpy reference, so it cannot be evaluated "
                            "here; register one with register_op_attr(name, 'FReference', fn)")
    return reference


def register_op(name: str, description: str = "") -> Op:
    """TVM's relay.op.register: the Op of `name`, creating an empty op when it is new.

    A new op is variadic and OPAQUE until its num_inputs, type relation, pattern and compute
    are set (Op.set_num_inputs, Op.add_type_rel, register_pattern, register_compute)."""
    if name in _REGISTRY:
        return _REGISTRY[name].op
    return register(OpDef(name=name, num_inputs=VARIADIC, type_rel=_no_type_rel(name),
                          pattern=OpPattern.OPAQUE, reference=_no_reference(name),
                          description=description)).op


def register_op_attr(name: str, key: str, value: Any = None, level: int = 10):
    """TVM's register_op_attr: set an attribute of a registered op (a decorator without value)."""
    def set_value(v):
        get_def(name).set_attr(key, v, level)
        return v
    return set_value if value is None else set_value(value)


@contextmanager
def temporary_ops(*opdefs: OpDef):
    """Register throwaway ops (for tests) and remove them again on exit."""
    for opdef in opdefs:
        register(opdef)
    try:
        yield
    finally:
        for opdef in opdefs:
            _REGISTRY.pop(opdef.name, None)
            opdef.op._define(None)


def get_def(name: str) -> OpDef:
    """The OpDef of a registered op; a clear error for an unknown name."""
    return Op.get(name).op_def


def get_op(name: str) -> Op:
    """The unique Op node for a name (Op.get)."""
    return Op.get(name)


def list_ops() -> list[str]:
    return sorted(_REGISTRY)


def register_compute(name: str):
    """Decorator attaching a lowering rule (codegen.te compute) to a registered op."""
    def decorate(fn):
        opdef = get_def(name)
        if opdef.compute is not None:
            raise CompilerError(f"op {name!r} already has a compute rule")
        opdef.compute = fn
        return fn
    return decorate


def register_flops(name: str):
    """Decorator attaching a FLOP count (what the profiler's GFLOP/s divides) to an op."""
    def decorate(fn):
        get_def(name).flops = fn
        return fn
    return decorate


def register_type_solver(*names: str):
    """Decorator attaching a missing-argument type solver (OpDef.solve_missing) to ops."""
    def decorate(fn):
        for name in names:
            get_def(name).solve_missing = fn
        return fn
    return decorate


def make_attrs(opdef: OpDef, given: dict) -> Attrs:
    """Check attribute names against the schema and fill defaults."""
    unknown = [k for k in given if k not in opdef.attrs]
    if unknown:
        raise CompilerError(f"{opdef.name} has no attribute {unknown[0]!r}; its attributes are "
                            f"{list(opdef.attrs) or 'none'}")
    fields = {}
    for key, default in opdef.attrs.items():
        value = given.get(key, default)
        if value is REQUIRED:
            raise CompilerError(f"{opdef.name} needs the attribute {key!r}")
        fields[key] = value
    return Attrs(fields, opdef.attrs_type_key)


def static_or_expr(value: Any) -> tuple[Any, RelayExpr | None]:
    """(value, None) for a Python value or a Constant (as its numpy data); (None, expr) for a
    computed expression: TVM's constructors pick the dyn.* op for the latter."""
    if isinstance(value, Constant):
        return value.data.numpy(), None
    if isinstance(value, RelayExpr):
        return None, value
    return value, None


def make_call(name: str, args: list, **attrs: Any) -> Call:
    """Build a call of a registered op after checking arity and attributes."""
    return get_def(name).make_call(args, **attrs)
