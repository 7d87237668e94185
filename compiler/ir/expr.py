"""Relay expression nodes: immutable, compared by identity (structural_equal compares by value)."""
from __future__ import annotations

import difflib
from itertools import count
from typing import Any, Sequence

import numpy as np

from compiler.errors import CompilerError
from runtime import ndarray as nd
from .attrs import Attrs, DictAttrs
from .types import FuncType, TensorType, Type

_var_ids = count()
# OpDef.num_inputs of an op that takes any number of arguments
VARIADIC = -1


class Node:
    """Immutable node; fields are set once through _set in __init__."""

    __slots__ = ()

    def _set(self, **fields: Any) -> None:
        for key, value in fields.items():
            object.__setattr__(self, key, value)

    def __setattr__(self, key, value):
        raise AttributeError(f"{type(self).__name__} nodes are immutable (tried to set {key!r})")

    def same_as(self, other) -> bool:
        return self is other

    def astext(self, show_meta_data: bool = True, annotate=None) -> str:
        return print_text(self, show_meta_data, annotate)

    def __str__(self) -> str:
        return print_text(self)

    def __repr__(self) -> str:
        return print_text(self)


# What TVM's astext() of a module or expression begins with (str() leaves it out).
VERSION_HEADER = '#[version = "0.0.5"]\n'


def print_text(node, show_meta_data: bool = True, annotate=None) -> str:
    """TVM's text form of a node or an IRModule (compiler.ir.printer), without the header."""
    from .printer import astext  # the printer imports every node class; nodes print through it
    return astext(node, show_meta_data, annotate)


class RelayExpr(Node):
    """Base of expressions: holds the type InferType fills in, and the arithmetic sugar."""

    def astext(self, show_meta_data: bool = True, annotate=None) -> str:
        """TVM's text form, with its version header first."""
        return VERSION_HEADER + print_text(self, show_meta_data, annotate)

    __slots__ = ("_checked_type", "span")

    def _set(self, **fields: Any) -> None:
        object.__setattr__(self, "_checked_type", None)
        object.__setattr__(self, "span", fields.pop("span", None))
        super()._set(**fields)

    @property
    def checked_type(self) -> Type:
        if self._checked_type is None:
            raise ValueError(f"The type of this {type(self).__name__} is not checked yet: "
                             "run InferType (relay.transform.InferType()) on the module first")
        return self._checked_type

    def _set_checked_type(self, ty: Type) -> None:
        object.__setattr__(self, "_checked_type", ty)

    # numeric sugar, as relay.Expr provides
    def _binary(self, name: str, other, reverse: bool = False):
        other = _to_expr(other, self)
        args = [other, self] if reverse else [self, other]
        return call_op(name, args)

    def __add__(self, other):
        return self._binary("add", other)

    def __radd__(self, other):
        return self._binary("add", other, True)

    def __sub__(self, other):
        return self._binary("subtract", other)

    def __rsub__(self, other):
        return self._binary("subtract", other, True)

    def __mul__(self, other):
        return self._binary("multiply", other)

    def __rmul__(self, other):
        return self._binary("multiply", other, True)

    def __truediv__(self, other):
        return self._binary("divide", other)

    def __rtruediv__(self, other):
        return self._binary("divide", other, True)

    def __neg__(self):
        return call_op("negative", [self])

    def __getitem__(self, index: int):
        if not isinstance(index, (int, np.integer)):
            raise TypeError(f"expr[{index!r}]: only integer indices (TupleGetItem) are supported")
        return TupleGetItem(self, int(index))

    def astype(self, dtype: str):
        return call_op("cast", [self], dtype=dtype)

    __hash__ = object.__hash__
    __eq__ = object.__eq__


def call_op(name: str, args: Sequence, **attrs: Any) -> "Call":
    """A call of the registered op `name`, its arity and attributes checked by the op's
    definition (OpDef.make_call)."""
    return Op.get(name).op_def.make_call(args, **attrs)


def _to_expr(value, like: RelayExpr | None = None) -> RelayExpr:
    """Python scalars in arithmetic sugar become constants (of the other side's dtype if known)."""
    if isinstance(value, RelayExpr):
        return value
    dtype = None
    if like is not None and like._checked_type is not None and hasattr(like._checked_type, "dtype"):
        dtype = like._checked_type.dtype
    return const(value, dtype)


class Var(RelayExpr):
    """A variable: a function parameter, a let binding or a free input."""

    __slots__ = ("name_hint", "type_annotation", "vid")

    def __init__(self, name_hint: str, type_annotation: Type | None = None, span=None):
        if not isinstance(name_hint, str):
            raise TypeError(f"Var name_hint must be a str, got {type(name_hint).__name__}")
        if type_annotation is not None and not isinstance(type_annotation, Type):
            raise TypeError(f"Var {name_hint!r}: type_annotation must be a Type, got "
                            f"{type(type_annotation).__name__}")
        self._set(name_hint=name_hint, type_annotation=type_annotation, vid=next(_var_ids),
                  span=span)


class Constant(RelayExpr):
    """A tensor constant; data is a runtime NDArray."""

    __slots__ = ("data",)

    def __init__(self, data, span=None):
        if isinstance(data, np.ndarray) or np.isscalar(data):
            data = nd.array(np.asarray(data))
        if not isinstance(data, nd.NDArray):
            raise TypeError(f"Constant data must be an NDArray or numpy array, got "
                            f"{type(data).__name__}")
        self._set(data=data, span=span)


class Op(RelayExpr):
    """A primitive operator; one instance per name (`Op("add") is Op.get("add")`).

    Passes compare ops by identity (`call.op is batch_norm`, memo keys), so Op(name) returns
    the interned node; an unregistered name is an error only when its OpDef is asked for.
    Registering an op (compiler.op.registry) attaches its OpDef to the node, as TVM's Op
    carries its attributes: the IR reads the definition without importing the op layer."""

    __slots__ = ("name", "_definition")
    _instances: dict = {}

    def __new__(cls, name: str):
        if not isinstance(name, str):
            raise TypeError(f"Op name must be a str, got {type(name).__name__}")
        inst = Op._instances.get(name)
        if inst is None:
            inst = Op._instances[name] = super().__new__(cls)
            inst._set(name=name, _definition=None)
        return inst

    def __init__(self, name: str):
        pass  # set up once in __new__

    def __reduce__(self):
        return (Op, (self.name,))  # copy/pickle give back the interned node

    @staticmethod
    def get(name: str) -> "Op":
        """The registered op `name`; an unknown name is an error naming the close ones."""
        inst = Op._instances.get(name)
        if inst is None or inst._definition is None:
            known = [n for n, op in Op._instances.items() if op._definition is not None]
            close = difflib.get_close_matches(name, known, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise CompilerError(f"unknown op {name!r}{hint}")
        return inst

    @property
    def op_def(self):
        """The op's OpDef (type relation, attrs schema, reference, ...)."""
        if self._definition is None:
            Op.get(self.name)  # an unknown op: the error names the close ones
        return self._definition

    def _define(self, definition) -> None:
        """Attach (or, with None, detach) the op's definition: the registry's business."""
        object.__setattr__(self, "_definition", definition)

    # TVM's Op registration methods (relay.op.register(...).set_num_inputs(2), ...): the
    # state lives in the op's OpDef, so these only forward to it.
    @property
    def num_inputs(self) -> int:
        return self.op_def.num_inputs

    @property
    def support_level(self) -> int:
        return self.op_def.support_level

    def set_num_inputs(self, n: int) -> None:
        self.op_def.num_inputs = int(n)

    def add_argument(self, name: str, type_key: str, description: str) -> None:
        self.op_def.arguments.append((name, type_key, description))

    def add_type_rel(self, rel_name: str, type_rel_func=None) -> None:
        self.op_def.add_type_rel(rel_name, type_rel_func)

    def set_support_level(self, level: int) -> None:
        self.op_def.support_level = int(level)

    def set_attrs_type_key(self, key: str) -> None:
        self.op_def.attrs_type_key = key

    def get_attr(self, key: str):
        return self.op_def.get_attr(key)

    def set_attr(self, key: str, value, plevel: int = 10) -> None:
        self.op_def.set_attr(key, value, plevel)

    def reset_attr(self, key: str) -> None:
        self.op_def.reset_attr(key)


class GlobalVar(RelayExpr):
    """The name of a function in an IRModule."""

    __slots__ = ("name_hint",)

    def __init__(self, name_hint: str, span=None):
        if not isinstance(name_hint, str):
            raise TypeError(f"GlobalVar name must be a str, got {type(name_hint).__name__}")
        self._set(name_hint=name_hint, span=span)

    def __call__(self, *args: RelayExpr) -> "Call":
        """@f(x, y): a call of the module function this names."""
        return Call(self, args)


def _check_exprs(what: str, items: Sequence) -> tuple:
    items = tuple(items)
    for i, item in enumerate(items):
        if not isinstance(item, RelayExpr):
            raise TypeError(f"{what}[{i}] must be a relay expression, got {type(item).__name__}: "
                            f"{item!r:.60}")
    return items


class Call(RelayExpr):
    """Application of an Op or a function to arguments."""

    __slots__ = ("op", "args", "attrs", "type_args")

    def __init__(self, op: RelayExpr, args: Sequence[RelayExpr], attrs: Attrs | None = None,
                 type_args: Sequence[Type] | None = None, span=None):
        if not isinstance(op, RelayExpr):
            raise TypeError(f"Call op must be an Op or a function expression, got "
                            f"{type(op).__name__}")
        name = op.name if isinstance(op, Op) else "call"
        args = _check_exprs(f"{name} args", args)
        if attrs is not None and not isinstance(attrs, Attrs):
            attrs = Attrs(attrs)
        self._set(op=op, args=args, attrs=attrs, type_args=tuple(type_args or ()), span=span)


class Tuple(RelayExpr):
    """A tuple of expressions."""

    __slots__ = ("fields",)

    def __init__(self, fields: Sequence[RelayExpr], span=None):
        self._set(fields=_check_exprs("Tuple fields", fields), span=span)

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, index: int):
        return self.fields[index]

    def astuple(self) -> "Tuple":
        return self


class TupleGetItem(RelayExpr):
    """Field `index` of a tuple-valued expression."""

    __slots__ = ("tuple_value", "index")

    def __init__(self, tuple_value: RelayExpr, index: int, span=None):
        _check_exprs("TupleGetItem tuple_value", [tuple_value])
        if not isinstance(index, (int, np.integer)) or index < 0:
            raise TypeError(f"TupleGetItem index must be a non-negative int, got {index!r}")
        self._set(tuple_value=tuple_value, index=int(index), span=span)


class Let(RelayExpr):
    """let var = value; body."""

    __slots__ = ("var", "value", "body")

    def __init__(self, var: Var, value: RelayExpr, body: RelayExpr, span=None):
        if not isinstance(var, Var):
            raise TypeError(f"Let var must be a Var, got {type(var).__name__}")
        _check_exprs("Let value/body", [value, body])
        self._set(var=var, value=value, body=body, span=span)


class If(RelayExpr):
    """if (cond) { true_branch } else { false_branch }."""

    __slots__ = ("cond", "true_branch", "false_branch")

    def __init__(self, cond: RelayExpr, true_branch: RelayExpr, false_branch: RelayExpr,
                 span=None):
        _check_exprs("If operands", [cond, true_branch, false_branch])
        self._set(cond=cond, true_branch=true_branch, false_branch=false_branch, span=span)


class Function(RelayExpr):
    """fn (params) -> ret_type { body }, with attributes such as Primitive=1."""

    __slots__ = ("params", "body", "ret_type", "type_params", "attrs")

    def __init__(self, params: Sequence[Var], body: RelayExpr, ret_type: Type | None = None,
                 type_params=None, attrs: DictAttrs | dict | None = None, span=None):
        params = tuple(params)
        for i, p in enumerate(params):
            if not isinstance(p, Var):
                raise TypeError(f"Function params[{i}] must be a Var, got {type(p).__name__}")
        _check_exprs("Function body", [body])
        if ret_type is not None and not isinstance(ret_type, Type):
            raise TypeError(f"Function ret_type must be a Type, got {type(ret_type).__name__}")
        if attrs is not None and not isinstance(attrs, DictAttrs):
            attrs = DictAttrs(attrs)
        self._set(params=params, body=body, ret_type=ret_type,
                  type_params=tuple(type_params or ()), attrs=attrs, span=span)

    def __call__(self, *args: RelayExpr) -> Call:
        """f(x, y): a call of this function."""
        return Call(self, args)

    def with_attr(self, key: str, value: Any) -> "Function":
        """A copy of this function with one attribute set."""
        fields = dict(self.attrs or {})
        fields[key] = value
        return Function(self.params, self.body, self.ret_type, self.type_params,
                        DictAttrs(fields), self.span)

    def get_attr(self, key: str, default=None):
        return (self.attrs or {}).get(key, default)

    @property
    def is_primitive(self) -> bool:
        return int(self.get_attr("Primitive", 0) or 0) == 1

    @property
    def func_type_annotation(self) -> FuncType | None:
        if self.ret_type is None or any(p.type_annotation is None for p in self.params):
            return None
        return FuncType([p.type_annotation for p in self.params], self.ret_type)


def const(value, dtype: str | None = None, span=None) -> Constant:
    """relay.const: Python int -> int32, float -> float32, int64/float64 arrays narrowed unless
    dtype is given, bool stays bool."""
    if isinstance(value, nd.NDArray):
        return Constant(value if dtype is None else nd.array(value.numpy().astype(dtype)), span)
    if isinstance(value, RelayExpr):
        raise TypeError(f"relay.const expects a value, got the expression {value!r:.60}")
    array = np.array(value, dtype=dtype)
    if dtype is None:
        narrowed = {np.dtype("int64"): "int32", np.dtype("float64"): "float32"}.get(array.dtype)
        if narrowed:
            array = array.astype(narrowed)
    if array.dtype.kind in "OUS" or (array.dtype.kind == "V" and array.dtype.name != "bfloat16"):
        raise TypeError(f"relay.const: cannot make a tensor constant from {value!r:.60}")
    return Constant(nd.array(array), span)


def var(name_hint: str, type_annotation: Type | str | None = None, shape=None,
        dtype: str = "float32", span=None) -> Var:
    """relay.var: a string annotation is a scalar of that dtype; shape= gives a tensor type."""
    if type_annotation is not None and shape is not None:
        raise ValueError(f"relay.var({name_hint!r}): give either type_annotation or shape")
    if isinstance(type_annotation, str):
        type_annotation = TensorType((), type_annotation)
    elif shape is not None:
        type_annotation = TensorType(shape, dtype)
    return Var(name_hint, type_annotation, span)


class TupleWrapper:
    """The result of a multi-output op (split, batch_norm): supports [i], len() and astuple()."""

    def __init__(self, tuple_value: RelayExpr, size: int):
        self.tuple_value = tuple_value
        self.size = size

    def astuple(self) -> RelayExpr:
        return self.tuple_value

    def astext(self) -> str:
        return self.tuple_value.astext()

    def __getitem__(self, index: int) -> TupleGetItem:
        if not -self.size <= index < self.size:
            raise IndexError(f"TupleWrapper index {index} out of range for {self.size} fields")
        return TupleGetItem(self.tuple_value, index % self.size)

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        return (self[i] for i in range(self.size))


