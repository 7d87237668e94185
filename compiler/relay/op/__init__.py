"""relay.op: op lookup (`relay.op.get("nn.conv2d")`), the op constructors and the registration
of new ops (relay.op.op), as tvm.relay.op."""
from compiler.op.tensor import *  # noqa: F401,F403
from compiler.op.transform import *  # noqa: F401,F403
from compiler.op.reduce import *  # noqa: F401,F403
from compiler.op.scatter import *  # noqa: F401,F403
from . import op  # noqa: F401,E402
from .op import (OpPattern, get, register, register_compute, register_op_attr,  # noqa: F401
                 register_fake_quantization_to_integer, register_pattern,
                 register_shape_func, register_stateful)
from .. import annotation, image, nn, vision  # noqa: F401,E402
from . import dyn  # noqa: F401,E402
