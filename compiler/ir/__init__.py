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
