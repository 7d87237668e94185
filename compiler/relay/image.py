"""relay.image: image op constructors (grid_sample)."""
from compiler.op.image import *  # noqa: F401,F403
from compiler.op.image import __all__  # noqa: F401
