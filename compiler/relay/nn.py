"""relay.nn: the neural-network op constructors (conv2d, dense, pooling, norms, ...)."""
from compiler.op.nn import *  # noqa: F401,F403
from compiler.op.nn import __all__  # noqa: F401
from compiler.op.nn1d import *  # noqa: F401,F403,E402
from compiler.op.nn3d import *  # noqa: F401,F403,E402
from compiler.op.nn_deform import *  # noqa: F401,F403,E402
