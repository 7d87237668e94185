"""Operators: importing this package registers every op (tensor, nn, reduce, transform)."""
from . import registry  # noqa: F401
from .registry import OpDef, OpPattern, get_def, get_op, list_ops, make_call, register  # noqa: F401
