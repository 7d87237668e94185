"""Compute rules (codegen.te lowering) for every registered op; importing registers them all."""
from . import elemwise  # noqa: F401
