"""relay.op: op lookup (`relay.op.get("nn.conv2d")`) and the op constructors, as tvm.relay.op."""
from compiler.op.registry import OpPattern, get_op as get  # noqa: F401
from compiler.op.tensor import *  # noqa: F401,F403
from compiler.op.transform import *  # noqa: F401,F403
from compiler.op.reduce import *  # noqa: F401,F403
from compiler.op.scatter import *  # noqa: F401,F403
from . import image, nn, vision  # noqa: F401,E402
