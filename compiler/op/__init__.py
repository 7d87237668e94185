"""Operators: importing this package registers every op (tensor, nn, reduce, transform)."""
from . import registry  # noqa: F401
from .registry import (OpDef, OpPattern, get_def, get_op, list_ops, make_call,  # noqa: F401
                       register, register_compute)
from . import tensor, nn, reduce, transform  # noqa: F401,E402
from . import scatter  # noqa: F401,E402
from . import nn_packed  # noqa: F401,E402
from . import nn_recurrent  # noqa: F401,E402
from . import nn_int8  # noqa: F401,E402
from . import nn_conv_pool  # noqa: F401,E402
from . import nn_batch_matmul_axes  # noqa: F401,E402
from . import nn_nchwc  # noqa: F401,E402
from . import nn_depthwise_nchwc  # noqa: F401,E402
from . import nn_winograd  # noqa: F401,E402
from . import nn3d, image, vision, vision_nms  # noqa: F401,E402
from . import bitcast  # noqa: F401,E402
from . import nn_deform  # noqa: F401,E402
from . import annotation  # noqa: F401,E402
from . import nn1d  # noqa: F401,E402
from . import qnn, qnn_contract, qnn_composite, qnn_canonical  # noqa: F401,E402
from . import cost  # noqa: F401,E402
from . import type_solvers  # noqa: F401,E402
from . import shape_func  # noqa: F401,E402
from . import dyn  # noqa: F401,E402
