"""tvm.instrument (TVM's alias of tvm.ir.instrument): pass instruments."""
from .ir.instrument import (PassInstrument, PassProfile, PassTimingInstrument,  # noqa: F401
                            PrintAfterAll, PrintBeforeAll, pass_instrument)
