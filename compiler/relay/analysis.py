"""relay.analysis: the facade over compiler.analysis, as tvm.relay.analysis."""
from compiler.analysis import (all_vars, bound_vars, free_vars, post_order_visit,  # noqa: F401
                               well_formed)
