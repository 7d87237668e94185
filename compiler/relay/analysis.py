"""relay.analysis: the facade over compiler.analysis, as tvm.relay.analysis."""
from compiler.analysis import (Feature, all_vars, bound_vars, detect_feature,  # noqa: F401
                               free_vars, get_total_mac_number, list_op_freqs,
                               post_order_visit, well_formed)
