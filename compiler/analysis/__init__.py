"""compiler.analysis: questions about expressions (which vars are free, is it well formed)."""
from compiler.ir.traversal import post_order_visit  # noqa: F401
from compiler.ir.vars import all_vars, bound_vars, free_vars  # noqa: F401

from .well_formed import well_formed  # noqa: F401
from .feature import Feature, detect_feature  # noqa: F401
from .op_counts import get_total_mac_number, list_op_freqs  # noqa: F401
