"""Relay types: small frozen values compared structurally."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import count

import numpy as np

from .dims import Any, IntImm  # noqa: F401  (IntImm is re-exported: types.IntImm)


class Type:
    """Base class of Relay types."""

    __slots__ = ()

    def __str__(self) -> str:
        return type_to_str(self)

    def same_as(self, other) -> bool:
        """Identity, as TVM's Object.same_as (== compares types by value)."""
        return self is other


# TVM spells the 1-bit boolean both ways; relayjit keeps "bool"
_DTYPE_ALIASES = {"uint1": "bool", "bool": "bool"}


def _check_dtype(dtype) -> str:
    text = str(dtype)
    name = _DTYPE_NAMES.get(text)
    if name is None:
        try:
            name = np.dtype(text).name
        except TypeError:
            raise TypeError(f"TensorType dtype: {dtype!r} is not a known data type") from None
        _DTYPE_NAMES[text] = name
    return name


# dtype spelling -> canonical name; numpy's parse cost about a tenth of a build's type
# inference (TensorTypes are made by the ten thousand)
_DTYPE_NAMES: dict[str, str] = dict(_DTYPE_ALIASES)


def _dims_with_any(shape) -> tuple:
    try:
        dims = tuple(d if isinstance(d, Any) else IntImm(d) for d in shape)
    except (TypeError, ValueError):
        raise TypeError(f"TensorType shape must be a sequence of ints or relay.Any(), got "
                        f"{shape!r}") from None
    if any(not isinstance(d, Any) and d < 0 for d in dims):
        raise ValueError(f"TensorType shape has a negative dimension: {dims}")
    return dims


@dataclass(frozen=True, slots=True)
class TensorType(Type):
    """A tensor of element dtype and a shape of ints and Any (dynamic) dims; () is a scalar.

    == is exact (dynamic dims equal when provably equal, compiler.ir.dims); TVM's
    structural equality, where any two Any dims match, is structurally_equal_types."""

    shape: tuple
    dtype: str = "float32"

    def __init__(self, shape=(), dtype="float32"):
        if isinstance(shape, (int, np.integer, Any)):
            shape = (shape,)
        try:
            dims = tuple(map(IntImm, shape))  # the common case: all static
        except (TypeError, ValueError):
            dims = _dims_with_any(shape)
        else:
            if dims and min(dims) < 0:
                raise ValueError(f"TensorType shape has a negative dimension: {dims}")
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "dtype", _check_dtype(dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_dynamic(self) -> bool:
        """Some dim is Any (known only at run time)."""
        return any(isinstance(d, Any) for d in self.shape)

    @property
    def concrete_shape(self) -> tuple:
        """The shape as ints; an error naming the type when a dim is dynamic."""
        if self.is_dynamic:
            raise TypeError(f"{type_to_str(self)} has dynamic dimensions (?): its shape is known "
                            "only at run time")
        return self.shape

    @property
    def size(self) -> int:
        return int(np.prod(self.concrete_shape, dtype=np.int64))


@dataclass(frozen=True, slots=True)
class TupleType(Type):
    """The type of a Relay tuple."""

    fields: tuple

    def __init__(self, fields=()):
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, Type):
                raise TypeError(f"TupleType field must be a Type, got {type(f).__name__}")
        object.__setattr__(self, "fields", fields)

    def __len__(self) -> int:
        return len(self.fields)


class TypeKind:
    """TVM's kinds of type variables."""

    Type = 0
    ShapeVar = 1
    Constraint = 4
    AdtHandle = 5
    TypeData = 6


class TypeVar(Type):
    """A type variable (the `t` of `fn <t>(t) -> t`); equal only to itself, except that
    FuncTypes binding type vars compare up to renaming."""

    __slots__ = ("name_hint", "kind")

    def __init__(self, name_hint: str, kind: int = TypeKind.Type):
        if not isinstance(name_hint, str):
            raise TypeError(f"TypeVar name_hint must be a str, got {type(name_hint).__name__}")
        self.name_hint, self.kind = name_hint, kind

    def __repr__(self) -> str:
        return self.name_hint


class GlobalTypeVar(TypeVar):
    """The name of a global type definition (an ADT) in a module."""

    __slots__ = ()

    def __init__(self, name_hint: str, kind: int = TypeKind.AdtHandle):
        super().__init__(name_hint, kind)


@dataclass(frozen=True, slots=True, eq=False)
class FuncType(Type):
    """The type of a Relay function; polymorphic over its type_params, so two FuncTypes are
    equal when they match after renaming their bound type vars."""

    arg_types: tuple
    ret_type: Type
    type_params: tuple = ()
    type_constraints: tuple = ()

    def __init__(self, arg_types, ret_type, type_params=(), type_constraints=()):
        type_params = tuple(type_params or ())
        for tp in type_params:
            if not isinstance(tp, TypeVar):
                raise TypeError(f"FuncType type_params must be TypeVars, got "
                                f"{type(tp).__name__}")
        object.__setattr__(self, "arg_types", tuple(arg_types))
        object.__setattr__(self, "ret_type", ret_type)
        object.__setattr__(self, "type_params", type_params)
        object.__setattr__(self, "type_constraints", tuple(type_constraints or ()))

    def _canonical(self) -> tuple:
        """The signature with bound type vars replaced by their position."""
        bound = {tp: ("type_param", i) for i, tp in enumerate(self.type_params)}

        def canon(ty):
            if isinstance(ty, TypeVar):
                return bound.get(ty, ty)
            if isinstance(ty, TupleType):
                return ("tuple", *(canon(f) for f in ty.fields))
            if isinstance(ty, FuncType) and not ty.type_params:
                return ("fn", tuple(canon(a) for a in ty.arg_types), canon(ty.ret_type))
            return ty
        return (len(self.type_params), tuple(canon(a) for a in self.arg_types),
                canon(self.ret_type), self.type_constraints)

    def __eq__(self, other) -> bool:
        if not isinstance(other, FuncType):
            return NotImplemented
        return self is other or self._canonical() == other._canonical()

    def __hash__(self) -> int:
        return hash(self._canonical())


_incomplete_ids = count()


class IncompleteType(Type):
    """A placeholder to be solved by InferType; equal only to itself."""

    __slots__ = ("kind", "_id")

    def __init__(self, kind: str = "Type"):
        self.kind = kind
        self._id = next(_incomplete_ids)

    def __repr__(self) -> str:
        return f"IncompleteType({self._id})"


def instantiate(fty: FuncType, arg_types) -> FuncType:
    """fty's signature for a call with arg_types: each type param is bound to the type its
    first occurrence meets (types are shallow trees: recursion is fine); TypeError when an
    argument does not fit."""
    bound: dict = {tp: None for tp in fty.type_params}

    def unify(want, got) -> bool:
        if isinstance(want, TypeVar) and want in bound:
            if bound[want] is None:
                bound[want] = got
                return True
            return bound[want] == got
        if isinstance(want, TupleType) and isinstance(got, TupleType):
            return len(want.fields) == len(got.fields) and all(map(unify, want.fields,
                                                                   got.fields))
        return True  # not polymorphic here: the caller compares as usual

    def substitute(ty):
        if isinstance(ty, TypeVar) and bound.get(ty) is not None:
            return bound[ty]
        if isinstance(ty, TupleType):
            return TupleType([substitute(f) for f in ty.fields])
        if isinstance(ty, FuncType) and not ty.type_params:
            return FuncType([substitute(a) for a in ty.arg_types], substitute(ty.ret_type))
        return ty

    for i, (want, got) in enumerate(zip(fty.arg_types, arg_types)):
        if not unify(want, got):
            raise TypeError(f"argument {i} has type {got}, but {want} is already bound to "
                            f"{substitute(want)} by an earlier argument (callee type {fty})")
    return FuncType([substitute(a) for a in fty.arg_types], substitute(fty.ret_type))


def is_dynamic_type(ty: Type) -> bool:
    """ty (a tensor, or tuples of them) has an Any dim somewhere."""
    if isinstance(ty, TensorType):
        return ty.is_dynamic
    if isinstance(ty, TupleType):
        return any(is_dynamic_type(f) for f in ty.fields)
    if isinstance(ty, FuncType):
        return any(is_dynamic_type(a) for a in ty.arg_types) or is_dynamic_type(ty.ret_type)
    return False


def _dims_match(a, b) -> bool:
    return a == b or (isinstance(a, Any) and isinstance(b, Any))


def structurally_equal_types(a: Type, b: Type) -> bool:
    """TVM's structural equality of types: as ==, except that any two Any dims match."""
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return a.dtype == b.dtype and len(a.shape) == len(b.shape) and \
            all(map(_dims_match, a.shape, b.shape))
    if isinstance(a, TupleType) and isinstance(b, TupleType):
        return len(a.fields) == len(b.fields) and \
            all(map(structurally_equal_types, a.fields, b.fields))
    if isinstance(a, FuncType) and isinstance(b, FuncType) and \
            (is_dynamic_type(a) or is_dynamic_type(b)):
        return len(a.arg_types) == len(b.arg_types) and \
            len(a.type_params) == len(b.type_params) and \
            all(map(structurally_equal_types, a.arg_types, b.arg_types)) and \
            structurally_equal_types(a.ret_type, b.ret_type)
    return a == b


def scalar_type(dtype: str) -> TensorType:
    """The type of a scalar of dtype (relay.scalar_type)."""
    return TensorType((), dtype)


def _dim_str(shape: tuple) -> str:
    if len(shape) == 1:
        return f"({shape[0]})"
    return "(" + ", ".join(str(d) for d in shape) + ")"


def type_to_str(t: Type) -> str:
    """Print a type as TVM's text format does: Tensor[(1, 3), float32], (T1, T2), fn (T) -> T."""
    if isinstance(t, TensorType):
        if not t.shape:
            return t.dtype
        return f"Tensor[{_dim_str(t.shape)}, {t.dtype}]"
    if isinstance(t, TupleType):
        if len(t.fields) == 1:
            return f"({type_to_str(t.fields[0])},)"
        return "(" + ", ".join(type_to_str(f) for f in t.fields) + ")"
    if isinstance(t, FuncType):
        args = ", ".join(type_to_str(a) for a in t.arg_types)
        params = ""
        if t.type_params:
            params = "<" + ", ".join(type_to_str(p) for p in t.type_params) + ">"
        return f"fn {params}({args}) -> {type_to_str(t.ret_type)}"
    if isinstance(t, TypeVar):
        return t.name_hint
    if isinstance(t, IncompleteType):
        return "?"
    return repr(t)
