"""nn.contrib_conv2d_max_pool: type relation, numpy reference, the compiled op called directly."""
from __future__ import annotations

import numpy as np
import pytest

import runtime
from compiler import relay
from compiler.errors import TypeInferenceError
from compiler.ir.module import IRModule
from compiler.op import nn_conv_pool, nn_packed
from compiler.op.registry import get_def
from runtime import graph_executor
from tests.build.test_conv_max_pool_fusion import conv_ref, max_pool_ref
from tests.op._opcheck import infer

# compiled through relay.build and compared with the numpy reference below
OPS_TESTED = {"nn.contrib_conv2d_max_pool"}

RNG = np.random.default_rng(11)


def _call(x, w, block, pool_padding=(1, 1, 1, 1)):
    wp = nn_packed.contrib_conv2d_weight_pack(relay.const(w), block=block)
    conv = dict(strides=(2, 2), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1,
                channels=w.shape[0], kernel_size=w.shape[2:])
    return nn_conv_pool.contrib_conv2d_max_pool(x, wp, conv, (3, 3), (2, 2), pool_padding)


@pytest.mark.parametrize("block", [16, 32])
def test_type_reference_and_kernel(block):
    xv = RNG.standard_normal((2, 5, 19, 17)).astype("float32")
    w = RNG.standard_normal((20, 5, 3, 3)).astype("float32")
    x = relay.var("x", shape=xv.shape)
    call = _call(x, w, block)
    # conv 10x9, pool (10 + 2 - 3) // 2 + 1 = 5 by 5
    assert infer(call).shape == (2, 20, 5, 5)
    want = max_pool_ref(conv_ref(xv, w, (2, 2), (1, 1, 1, 1), (1, 1)), (3, 3), (2, 2),
                        (1, 1, 1, 1))
    wp = get_def("nn.contrib_conv2d_weight_pack").reference([w], call.args[1].attrs)
    ref = get_def("nn.contrib_conv2d_max_pool").reference([xv, wp], call.attrs)
    np.testing.assert_allclose(ref, want, rtol=1e-4, atol=1e-4)
    lib = relay.build(IRModule.from_expr(relay.Function([x], call)), target="llvm")
    gm = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    gm.run(x=xv)
    np.testing.assert_allclose(gm.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


def test_padding_as_wide_as_the_window_is_a_type_error():
    x = relay.var("x", shape=(1, 3, 9, 9))
    call = _call(x, np.ones((16, 3, 3, 3), "float32"), 16, pool_padding=(3, 0, 0, 0))
    with pytest.raises(TypeInferenceError, match="pool_padding"):
        infer(call)
