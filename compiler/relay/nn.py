"""relay.nn: the neural-network op constructors (conv2d, dense, pooling, norms, ...)."""
from compiler.op.nn import *  # noqa: F401,F403
from compiler.op.nn import __all__  # noqa: F401
from compiler.op.nn1d import *  # noqa: F401,F403,E402
from compiler.op.nn3d import *  # noqa: F401,F403,E402
from compiler.op.nn_deform import *  # noqa: F401,F403,E402

from runtime.unsupported import missing_names  # noqa: E402

__getattr__ = missing_names(__name__, {
    "bitpack": "bit-serial (binarised) networks are not supported: quantize to int8 with "
               "relay.quantize",
    "bitserial_conv2d": "bit-serial networks are not supported: quantize with relay.quantize",
    "bitserial_dense": "bit-serial networks are not supported: quantize with relay.quantize",
    "correlation": "the FlowNet correlation op is not implemented; express it with "
                   "nn.conv2d over shifted windows or run the model with onnxruntime",
})
