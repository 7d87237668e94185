"""compiler.ir: types, expressions, modules, type inference, printing and parsing, structural
equality, visitors."""
from .attrs import Attrs, DictAttrs  # noqa: F401
from .expr import (Call, Constant, Function, GlobalVar, If, Let, Op, RelayExpr, Tuple,  # noqa: F401
                   TupleGetItem, TupleWrapper, Var, const, var)
from .module import IRModule  # noqa: F401
from .dims import Any  # noqa: F401
from .types import (FuncType, GlobalTypeVar, IncompleteType, IntImm, TensorType,  # noqa: F401
                    TupleType, Type, TypeKind, TypeVar, scalar_type)
from .visitor import ExprFunctor, ExprMutator, ExprVisitor  # noqa: F401
from .structural import assert_structural_equal, structural_equal, structural_hash  # noqa: F401
from . import instrument  # noqa: F401
from .json_io import load_json, save_json  # noqa: F401

from runtime.unsupported import missing_names  # noqa: E402

__getattr__ = missing_names(__name__, {
    "EnvFunc": "pass Python callables directly; register names with compiler.register_func",
    "make_node": "construct IR nodes with their classes (relay.Var, relay.Call, ...)",
})
