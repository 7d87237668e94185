"""Loop-nest IR (TIR): typed expressions, statements, buffers, PrimFunc. Indices are int64."""
from __future__ import annotations

from .buffer import Buffer
from .dtype import (
    INDEX_DTYPE, as_dtype, bits, is_bool, is_float, is_int, is_integer, is_uint, itemsize,
)
from .expr import (
    BinaryOp, Call, Cast, Expr, FloatImm, IfThenElseExpr, IntImm, Load, Not, Reduce, Reinterpret,
    Select, Var,
)
from .functor import children, post_order, rewrite, substitute
from .ops import (
    INTRINSICS, abs, acos, acosh, add, all, any, asin, asinh, atan, atan2, atanh, binary,
    bitwise_and, bitwise_not, bitwise_or, bitwise_xor, call, checked_index,
    cast, ceil, const, convert, cos, cosh, div, eq, erf, exp, exp2, expm1, fabs, floor, floordiv,
    floormod, ge, gt, if_then_else, reinterpret, is_const, isfinite, isinf, isnan, le, log, log1p, log2, log10,
    logical_and, logical_not, logical_or, lt, max, min, mul, ne, neg, pow, power, round, rsqrt,
    select, shift_left, shift_right, sigmoid, sign, sin, sinh, softplus, sqrt, sub, tan, tanh,
    trunc, truncdiv, truncmod,
)
from .stmt import (
    Allocate, ConstantBuffer, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt, Store, seq,
)
