"""relay.annotation: annotation ops (stop_fusion), as tvm.relay.annotation."""
from compiler.op.annotation import *  # noqa: F401,F403
from compiler.op.annotation import __all__  # noqa: F401
