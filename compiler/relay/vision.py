"""relay.vision: vision op constructors (roi_align)."""
from compiler.op.vision import *  # noqa: F401,F403
from compiler.op.vision import __all__  # noqa: F401
