"""Compute rules (codegen.te lowering) for every registered op; importing registers them all.

elemwise: unary/binary/broadcast tables, clip, cast, where, fills, activations; reduce:
reductions; transform: injective index arithmetic; index: take/gather/scan/sort/init ops;
nn: conv2d/dense/matmul anchors; norm: softmax and normalisations; pool: pooling;
scatter: scatter_elements / scatter_nd.
"""
from . import elemwise, index, nn, norm, pool, reduce, scatter, transform  # noqa: F401
from . import select  # noqa: F401,E402
from . import image, nn3d, vision, vision_nms  # noqa: F401,E402
from . import bitcast  # noqa: F401,E402
from . import nn_deform  # noqa: F401,E402
from . import dyn  # noqa: F401,E402  (after the static rules it reuses)
from . import qnn  # noqa: F401,E402
