"""The user-facing facade: `from compiler import relay` mirrors tvm.relay."""
from compiler.ir import (Call, Constant, Function, GlobalVar, If, IRModule, Let, Op,  # noqa: F401
                         Tuple, TupleGetItem, TupleWrapper, Var, const, var)
from compiler.ir import ExprFunctor, ExprMutator, ExprVisitor  # noqa: F401
from compiler.ir.dims import Any  # noqa: F401
from compiler.ir.types import (FuncType, GlobalTypeVar, IncompleteType, TensorType,  # noqa: F401
                               TupleType, TypeKind, TypeVar, scalar_type)
from compiler.op.tensor import *  # noqa: F401,F403
from compiler.op.transform import *  # noqa: F401,F403
from compiler.op.reduce import *  # noqa: F401,F403
from compiler.op.scatter import *  # noqa: F401,F403
from compiler.op.bitcast import *  # noqa: F401,F403
from . import nn  # noqa: F401
from . import image, vision  # noqa: F401
from . import annotation  # noqa: F401
from . import op  # noqa: F401
from . import analysis, transform, build_module  # noqa: F401
from . import vm  # noqa: F401
from . import qnn, quantize  # noqa: F401
from .build_module import build, create_executor  # noqa: F401
from .scope_builder import ScopeBuilder  # noqa: F401
from compiler.passes.bind import bind  # noqa: F401
from . import frontend  # noqa: F401

from compiler.ir.expr import RelayExpr as Expr  # noqa: E402,F401
from . import testing  # noqa: F401,E402
from compiler.ir.parser import fromtext, parse, parse_expr  # noqa: E402,F401
from runtime.params import load_param_dict, save_param_dict  # noqa: E402,F401
from compiler.ir.span import SourceName, Span  # noqa: E402,F401
from . import backend  # noqa: E402,F401
from runtime.unsupported import missing_names as _missing_names  # noqa: E402

_ADT = ("algebraic data types are not supported: use Tuple/TupleGetItem for fixed-size "
        "records and If with relay.vm.compile for control flow")
__getattr__ = _missing_names(__name__, {
    **{name: _ADT for name in ("TypeData", "Constructor", "Match", "Clause", "TypeCall",
                               "PatternConstructor", "PatternVar", "PatternWildcard",
                               "PatternTuple", "Pattern", "prelude", "Prelude", "adt")},
    "RefCreate": "references (mutable cells) are not supported: pass values functionally",
    "RefRead": "references (mutable cells) are not supported: pass values functionally",
    "RefWrite": "references (mutable cells) are not supported: pass values functionally",
})
