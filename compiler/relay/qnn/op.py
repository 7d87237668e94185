"""relay.qnn.op: the quantized operators with TVM's names, arguments and attributes."""
from compiler.op.qnn import (RequantizeConfig, SQNN_DTYPE_TO_CODE,  # noqa: F401
                             current_requantize_config, dequantize, quantize, requantize,
                             requantize_config, simulated_dequantize, simulated_quantize)
from compiler.op.qnn_composite import (abs, add, avg_pool2d, concatenate, erf, exp,  # noqa: F401
                                       hardswish, leaky_relu, log, mul, rsqrt, sigmoid,
                                       softmax, sqrt, subtract, tanh)
from compiler.op.qnn_contract import batch_matmul, conv2d, conv2d_transpose, dense  # noqa: F401
