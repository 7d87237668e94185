"""Structural equality and hashing of Relay IR (TVM's StructuralEqual / StructuralHash).

Equality walks both graphs together with an explicit stack and keeps a bijection between
lhs and rhs graph nodes (vars, calls, tuples, projections, lets, ifs, functions): once lhs
node a is matched with rhs node b, a must match b wherever it appears, so sharing is part of
the structure (`add(y, y)` with one y differs from two copies of y). Function params and let
vars are definition points and are matched there; a var met first at a use is free and
matches only itself, or any free var of the same annotation with map_free_vars=True.
Constants compare by dtype, shape and bytes; ops and global vars by name; attrs by value;
call type_args only when the callee is not an op; checked types and name hints never.

The hash serialises the graph in the order the equality walks it (see _Hasher): nodes met
again become back-references, vars are numbered at their definitions. It only mixes ints
with Python's deterministic tuple hash (strings and bytes go through blake2b), so the same
closed program hashes the same in every process: usable as an on-disk compilation cache key.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .expr import (Call, Constant, Function, GlobalVar, If, Let, Op, RelayExpr, Tuple,
                   TupleGetItem, Var)
from .module import IRModule
from .dims import Any as AnyDim
from .types import (FuncType, TupleType, Type, TypeVar, structurally_equal_types,
                    type_to_str)

_GRAPH_NODES = (Var, Call, Tuple, TupleGetItem, Let, If, Function)
_MAX_SHOWN = 3000


@dataclass
class Mismatch:
    """Where and why two structures differ."""

    reason: str
    path: tuple | None
    lhs: Any
    rhs: Any

    def path_text(self) -> str:
        steps = []
        node = self.path
        while node is not None:
            node, step = node
            steps.append(step)
        return "".join(reversed(steps)) or "<root>"


def structural_equal(lhs, rhs, map_free_vars: bool = False) -> bool:
    """True when lhs and rhs are the same program up to var names (and free vars if mapped)."""
    return _first_mismatch(lhs, rhs, map_free_vars) is None


def assert_structural_equal(lhs, rhs, map_free_vars: bool = False) -> None:
    """Raise ValueError naming the path to the first difference and showing both sides."""
    found = _first_mismatch(lhs, rhs, map_free_vars)
    if found is None:
        return
    where = found.path_text()
    raise ValueError(
        f"StructuralEqual check failed at {where}: {found.reason}\n"
        f"lhs at {where}:\n{_show(found.lhs)}\n"
        f"rhs at {where}:\n{_show(found.rhs)}\n"
        f"whole lhs:\n{_show(lhs)}\n"
        f"whole rhs:\n{_show(rhs)}")


def _show(value) -> str:
    try:
        text = value.astext() if hasattr(value, "astext") else repr(value)
    except Exception as err:  # noqa: BLE001 - a message must not fail on a malformed node
        text = f"<{type(value).__name__}: cannot print ({err})>"
    if len(text) > _MAX_SHOWN:
        text = text[:_MAX_SHOWN] + f"\n... ({len(text) - _MAX_SHOWN} more characters)"
    return text


def _first_mismatch(lhs, rhs, map_free_vars: bool) -> Mismatch | None:
    if isinstance(lhs, IRModule) or isinstance(rhs, IRModule):
        return _modules_mismatch(lhs, rhs, map_free_vars)
    if isinstance(lhs, RelayExpr) and isinstance(rhs, RelayExpr):
        return _Equal(map_free_vars).run(lhs, rhs, None)
    if type(lhs) is not type(rhs):
        return Mismatch(f"kinds differ: {type(lhs).__name__} vs {type(rhs).__name__}", None,
                        lhs, rhs)
    if not _values_equal(lhs, rhs):
        return Mismatch("values differ", None, lhs, rhs)
    return None


def _modules_mismatch(lhs, rhs, map_free_vars: bool) -> Mismatch | None:
    if not (isinstance(lhs, IRModule) and isinstance(rhs, IRModule)):
        return Mismatch(f"kinds differ: {type(lhs).__name__} vs {type(rhs).__name__}", None,
                        lhs, rhs)
    lfuncs = {gv.name_hint: f for gv, f in lhs.functions.items()}
    rfuncs = {gv.name_hint: f for gv, f in rhs.functions.items()}
    if sorted(lfuncs) != sorted(rfuncs):
        return Mismatch(f"global functions differ: {sorted(lfuncs)} vs {sorted(rfuncs)}", None,
                        lhs, rhs)
    if lhs.attrs != rhs.attrs:
        return Mismatch(f"module attrs differ: {lhs.attrs} vs {rhs.attrs}", None, lhs, rhs)
    equal = _Equal(map_free_vars)
    for name in sorted(lfuncs):
        found = equal.run(lfuncs[name], rfuncs[name], (None, f"[{name!r}]"))
        if found is not None:
            return found
    return None


def _values_equal(a, b) -> bool:
    if isinstance(a, (Type, AnyDim)) or isinstance(b, (Type, AnyDim)):
        return _types_equal(a, b)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - e.g. numpy arrays: compare by content instead
        return type(a) is type(b) and np.array_equal(a, b)


def _types_equal(a, b) -> bool:
    """Types (or tuples of them, or dims) as TVM compares them: any two Any dims match."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(map(_types_equal, a, b))
    if isinstance(a, AnyDim) or isinstance(b, AnyDim):
        return isinstance(a, AnyDim) and isinstance(b, AnyDim)
    if isinstance(a, Type) and isinstance(b, Type):
        return structurally_equal_types(a, b)
    return a == b


def _rename_type_vars(ty, mapping: dict):
    """ty (a type, or a tuple of them) with the TypeVars in mapping replaced (types are
    shallow trees, so this recursion is bounded by a type's nesting, not a program's size)."""
    if isinstance(ty, tuple):
        return tuple(_rename_type_vars(t, mapping) for t in ty)
    if isinstance(ty, TypeVar):
        return mapping.get(ty, ty)
    if isinstance(ty, TupleType):
        return TupleType([_rename_type_vars(f, mapping) for f in ty.fields])
    if isinstance(ty, FuncType):
        return FuncType([_rename_type_vars(a, mapping) for a in ty.arg_types],
                        _rename_type_vars(ty.ret_type, mapping),
                        [mapping.get(tp, tp) for tp in ty.type_params])
    return ty


def _attrs_equal(a, b) -> bool:
    """None and empty attrs are the same; otherwise compare field values."""
    if not a or not b:
        return not a and not b
    return a == b


def _constants_equal(a: Constant, b: Constant) -> bool:
    x, y = a.data, b.data
    if x.dtype != y.dtype or tuple(x.shape) != tuple(y.shape):
        return False
    return a is b or x.numpy().tobytes() == y.numpy().tobytes()


class _Equal:
    """One comparison: the lhs<->rhs node bijection lives as long as the comparer."""

    def __init__(self, map_free_vars: bool):
        self.map_free_vars = map_free_vars
        self.lmap: dict = {}
        self.rmap: dict = {}
        self.type_vars: dict = {}  # lhs function type params -> the rhs ones at that place

    def _types_eq(self, a, b) -> bool:
        """_types_equal with the lhs's bound type params renamed to the rhs's (so functions
        that differ only in their type params' names or objects compare equal, as TVM's)."""
        if self.type_vars:
            a = _rename_type_vars(a, self.type_vars)
        return _types_equal(a, b)

    def run(self, lhs: RelayExpr, rhs: RelayExpr, path) -> Mismatch | None:
        stack = [(lhs, rhs, path)]
        while stack:
            a, b, path = stack.pop()
            found = self._step(a, b, path, stack)
            if found is not None:
                return found
        return None

    def _bind(self, a, b, path) -> Mismatch | None:
        """Match a with b for good; a conflict means the sharing differs."""
        mapped = self.lmap.get(a)
        if mapped is not None:
            if mapped is b:
                return None
            return Mismatch("the lhs node is already matched with another rhs node (the two "
                            "sides share sub-expressions differently)", path, a, b)
        if b in self.rmap:
            return Mismatch("the rhs node is already matched with another lhs node (the two "
                            "sides share sub-expressions differently)", path, a, b)
        self.lmap[a] = b
        self.rmap[b] = a
        return None

    def _define(self, a: Var, b: Var, path) -> Mismatch | None:
        """Match two vars at their definition points (params, let vars)."""
        if not self._types_eq(a.type_annotation, b.type_annotation):
            return Mismatch(f"var type annotations differ: {a.type_annotation} vs "
                            f"{b.type_annotation}", path, a, b)
        return self._bind(a, b, path)

    def _step(self, a, b, path, stack: list) -> Mismatch | None:
        kind = type(a)
        if kind is not type(b):
            return Mismatch(f"kinds differ: {kind.__name__} vs {type(b).__name__}", path, a, b)
        if kind in _GRAPH_NODES:
            mapped = self.lmap.get(a)
            if mapped is b:
                return None  # compared already (or being compared): a shared node
            if mapped is not None or b in self.rmap:
                return self._bind(a, b, path)
        handler = _STEPS.get(kind)
        if handler is None:
            return None if _values_equal(a, b) else Mismatch("values differ", path, a, b)
        return handler(self, a, b, path, stack)

    def _var(self, a: Var, b: Var, path, stack) -> Mismatch | None:
        if a is not b and not self.map_free_vars:
            return Mismatch(f"free vars %{a.name_hint} and %{b.name_hint} are different vars "
                            "(map_free_vars=True matches free vars)", path, a, b)
        return self._define(a, b, path)

    def _constant(self, a: Constant, b: Constant, path, stack) -> Mismatch | None:
        if _constants_equal(a, b):
            return None
        x, y = a.data, b.data
        what = ("values" if x.dtype == y.dtype and tuple(x.shape) == tuple(y.shape)
                else "dtypes or shapes")
        return Mismatch(f"constant {what} differ: {x.dtype}{tuple(x.shape)} vs "
                        f"{y.dtype}{tuple(y.shape)}", path, a, b)

    def _op(self, a: Op, b: Op, path, stack) -> Mismatch | None:
        return None if a.name == b.name else Mismatch(f"ops differ: {a.name} vs {b.name}",
                                                      path, a, b)

    def _global_var(self, a: GlobalVar, b: GlobalVar, path, stack) -> Mismatch | None:
        if a.name_hint == b.name_hint:
            return None
        return Mismatch(f"global vars differ: @{a.name_hint} vs @{b.name_hint}", path, a, b)

    def _call(self, a: Call, b: Call, path, stack) -> Mismatch | None:
        if len(a.args) != len(b.args):
            return Mismatch(f"calls have {len(a.args)} vs {len(b.args)} arguments", path, a, b)
        if not _attrs_equal(a.attrs, b.attrs):
            return Mismatch(f"call attrs differ: {a.attrs!r} vs {b.attrs!r}", path, a, b)
        if not isinstance(a.op, Op) and not self._types_eq(tuple(a.type_args),
                                                         tuple(b.type_args)):
            return Mismatch("call type_args differ", path, a, b)
        found = self._bind(a, b, path)
        for i in range(len(a.args) - 1, -1, -1):
            stack.append((a.args[i], b.args[i], (path, f".args[{i}]")))
        stack.append((a.op, b.op, (path, ".op")))
        return found

    def _tuple(self, a: Tuple, b: Tuple, path, stack) -> Mismatch | None:
        if len(a.fields) != len(b.fields):
            return Mismatch(f"tuples have {len(a.fields)} vs {len(b.fields)} fields", path, a, b)
        for i in range(len(a.fields) - 1, -1, -1):
            stack.append((a.fields[i], b.fields[i], (path, f".fields[{i}]")))
        return self._bind(a, b, path)

    def _getitem(self, a: TupleGetItem, b: TupleGetItem, path, stack) -> Mismatch | None:
        if a.index != b.index:
            return Mismatch(f"tuple indices differ: {a.index} vs {b.index}", path, a, b)
        stack.append((a.tuple_value, b.tuple_value, (path, ".tuple_value")))
        return self._bind(a, b, path)

    def _let(self, a: Let, b: Let, path, stack) -> Mismatch | None:
        found = self._bind(a, b, path) or self._define(a.var, b.var, (path, ".var"))
        stack.append((a.body, b.body, (path, ".body")))
        stack.append((a.value, b.value, (path, ".value")))
        return found

    def _if(self, a: If, b: If, path, stack) -> Mismatch | None:
        stack.append((a.false_branch, b.false_branch, (path, ".false_branch")))
        stack.append((a.true_branch, b.true_branch, (path, ".true_branch")))
        stack.append((a.cond, b.cond, (path, ".cond")))
        return self._bind(a, b, path)

    def _function(self, a: Function, b: Function, path, stack) -> Mismatch | None:
        if len(a.params) != len(b.params):
            return Mismatch(f"functions have {len(a.params)} vs {len(b.params)} params",
                            path, a, b)
        if len(a.type_params) != len(b.type_params):
            return Mismatch("function type params differ", path, a, b)
        self.type_vars.update((x, y) for x, y in zip(a.type_params, b.type_params) if x is not y)
        if not self._types_eq(a.ret_type, b.ret_type):
            return Mismatch(f"return types differ: {a.ret_type} vs {b.ret_type}", path, a, b)
        found = self._bind(a, b, path)
        for i, (x, y) in enumerate(zip(a.params, b.params)):
            found = found or self._define(x, y, (path, f".params[{i}]"))
        if found is None and not self._function_attrs_equal(a.attrs, b.attrs):
            return Mismatch(f"function attrs differ: {a.attrs!r} vs {b.attrs!r}", path, a, b)
        stack.append((a.body, b.body, (path, ".body")))
        return found

    def _function_attrs_equal(self, a, b) -> bool:
        """Attrs by value, except that a var held in an attribute (e.g. a param it refers to)
        matches the var it is mapped to, as TVM compares a Var's vid under the mapping."""
        if not a or not b:
            return not a and not b
        if sorted(a) != sorted(b):
            return False
        return all(self._attr_value_equal(a[key], b[key]) for key in a)

    def _attr_value_equal(self, x, y) -> bool:
        if isinstance(x, Var) or isinstance(y, Var):
            return isinstance(x, Var) and isinstance(y, Var) and (
                x is y or self.lmap.get(x) is y)
        if isinstance(x, (tuple, list)) and isinstance(y, (tuple, list)):
            return len(x) == len(y) and all(map(self._attr_value_equal, x, y))
        return _values_equal(x, y)


_STEPS = {Var: _Equal._var, Constant: _Equal._constant, Op: _Equal._op,
          GlobalVar: _Equal._global_var, Call: _Equal._call, Tuple: _Equal._tuple,
          TupleGetItem: _Equal._getitem, Let: _Equal._let, If: _Equal._if,
          Function: _Equal._function}


# hashing ------------------------------------------------------------------------------------
_STR_HASHES: dict[str, int] = {}
_TYPE_HASHES: dict = {}


def _bytes_hash(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)


def _str_hash(text: str) -> int:
    """A process-independent hash of a string (Python's str hash is salted per process)."""
    value = _STR_HASHES.get(text)
    if value is None:
        value = _STR_HASHES[text] = _bytes_hash(text.encode())
    return value


def _type_hash(ty: Type | None) -> int:
    if ty is None:
        return 0
    value = _TYPE_HASHES.get(ty)
    if value is None:
        # type variables hash alike whatever their names: equality matches them by position
        value = _TYPE_HASHES[ty] = _str_hash(type_to_str(_rename_type_vars(ty, _AnyTypeVar())))
    return value


class _AnyTypeVar(dict):
    """A mapping that sends every TypeVar to one, for hashing."""

    _ONE = TypeVar("T")

    def get(self, key, default=None):
        return self._ONE


def _value_hash(value: Any) -> int:
    """Stable hash of an attribute value, consistent with == (1 == 1.0 == True hash alike)."""
    if value is None:
        return 0x5EED
    if isinstance(value, str):
        return _str_hash(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, int, float)):
        return hash(value)
    if isinstance(value, (tuple, list)):
        return hash((7, *(_value_hash(v) for v in value)))
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: str(kv[0]))
        return hash((8, *((_value_hash(k), _value_hash(v)) for k, v in items)))
    if isinstance(value, Type):
        return _type_hash(value)
    return _str_hash(repr(value))


def _constant_hash(const: Constant) -> int:
    data = const.data
    return hash((2, _str_hash(data.dtype), tuple(data.shape), _bytes_hash(data.numpy().tobytes())))


class _Hasher:
    """Hashes expressions as a canonical serialisation of their graph, so it agrees with
    structural_equal: graph nodes are numbered in the order the equality meets them, a node
    met again is written as a back-reference to its number (so sharing is part of the hash,
    `add(%0, %0)` differs from two equal copies), vars are numbered where they are defined,
    and a free var is written as its identity unless free vars are mapped. The numbering
    is shared by everything this hasher sees (a module's functions)."""

    def __init__(self, map_free_vars: bool):
        self.map_free_vars = map_free_vars
        self.index: dict = {}

    def hash(self, root: RelayExpr) -> int:
        stream: list = []
        index = self.index
        stack = [root]
        while stack:
            node = stack.pop()
            if type(node) in _GRAPH_NODES:
                seen = index.get(node)
                if seen is not None:
                    stream.append((0, seen))
                    continue
                index[node] = len(index)
            stream.append(self._node_record(node, stack))
        return hash(tuple(stream))

    def _define(self, var: Var) -> int:
        self.index.setdefault(var, len(self.index))
        return _type_hash(var.type_annotation)

    def _attr_hash(self, value) -> int:
        if isinstance(value, Var):
            number = self.index.get(value)
            return hash((12, number)) if number is not None else hash((13, value.vid))
        if isinstance(value, (tuple, list)) and any(isinstance(v, Var) for v in value):
            return hash((7, *(self._attr_hash(v) for v in value)))
        return _value_hash(value)

    def _node_record(self, node: RelayExpr, stack: list) -> tuple:
        """The node without its children (pushed so the first child is popped first)."""
        kind = type(node)
        if kind is Var:  # met at a use before any definition: a free var
            identity = 0 if self.map_free_vars else node.vid
            return (1, _type_hash(node.type_annotation), identity)
        if kind is Constant:
            return (2, _constant_hash(node))
        if kind is Op:
            return (3, _str_hash(node.name))
        if kind is GlobalVar:
            return (4, _str_hash(node.name_hint))
        if kind is Call:
            type_args = (0 if isinstance(node.op, Op)
                         else hash(tuple(_type_hash(t) for t in node.type_args)))
            stack.extend(reversed(node.args))
            stack.append(node.op)
            return (5, _value_hash(dict(node.attrs or {})), type_args, len(node.args))
        if kind is Tuple:
            stack.extend(reversed(node.fields))
            return (6, len(node.fields))
        if kind is TupleGetItem:
            stack.append(node.tuple_value)
            return (7, node.index)
        if kind is Let:
            var_type = self._define(node.var)
            stack.append(node.body)
            stack.append(node.value)
            return (8, var_type)
        if kind is If:
            stack.extend((node.false_branch, node.true_branch, node.cond))
            return (9,)
        if kind is Function:
            param_types = tuple(self._define(p) for p in node.params)
            attrs = sorted((node.attrs or {}).items(), key=lambda kv: str(kv[0]))
            attrs_hash = hash(tuple((_str_hash(str(k)), self._attr_hash(v)) for k, v in attrs))
            stack.append(node.body)
            return (10, _type_hash(node.ret_type), attrs_hash, param_types)
        raise TypeError(f"structural_hash: unknown expression kind {kind.__name__}")


def structural_hash(node, map_free_vars: bool = False) -> int:
    """A hash consistent with structural_equal, stable across processes for programs without
    free vars; linear time. Free vars hash by identity unless map_free_vars is set."""
    if isinstance(node, IRModule):
        hasher = _Hasher(map_free_vars)
        funcs = sorted(((gv.name_hint, f) for gv, f in node.functions.items()),
                       key=lambda item: item[0])
        return hash((11, _value_hash(node.attrs),
                     *((_str_hash(name), hasher.hash(f)) for name, f in funcs)))
    if isinstance(node, RelayExpr):
        return _Hasher(map_free_vars).hash(node)
    if isinstance(node, Type):
        return _type_hash(node)
    return _value_hash(node)
