"""Global pools in NCHW and NHWC are the reductions mean / max over H and W (compute/pool.py's
_global_reduce, the registry's COMM_REDUCE): the same kernel as mean / max (bit for bit), an
elementwise producer fused into it, against numpy over float16/32/64, NaN, H*W not a multiple
of the vector width, 1x1 planes and batch 2."""
from __future__ import annotations

import json

import numpy as np
import pytest

import runtime
from compiler import relay
from compiler.ir.module import IRModule
from compiler.transform import PassContext
from runtime import graph_executor

RNG = np.random.default_rng(37)
SHAPES = [(2, 5, 13, 13), (1, 3, 7, 7), (1, 4, 1, 1), (1, 2, 3, 50)]


def _build(body, d):
    with PassContext(opt_level=3):
        return relay.build(IRModule.from_expr(relay.Function([d], body)), target="llvm")


def _run(lib, data) -> np.ndarray:
    m = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    m.run(d=data)
    return m.get_output(0).numpy()


def _kernels(lib) -> list[str]:
    nodes = json.loads(lib.get_graph_json())["nodes"]
    return [n["attrs"]["func_name"] for n in nodes if n["op"] == "tvm_op"]


def _pool(kind: str, v, layout: str):
    return getattr(relay.nn, f"global_{kind}_pool2d")(v, layout=layout)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("shape", SHAPES)
def test_global_pool_matches_numpy(shape, kind, dtype, layout):
    data = RNG.standard_normal(shape).astype(dtype)
    axes = (2, 3) if layout == "NCHW" else (1, 2)
    if layout == "NHWC":
        data = np.ascontiguousarray(data.transpose(0, 2, 3, 1))
    d = relay.var("d", shape=data.shape, dtype=dtype)
    got = _run(_build(_pool(kind, d, layout), d), data)
    if kind == "max":
        np.testing.assert_array_equal(got, data.max(axis=axes, keepdims=True))
    else:
        want = data.astype(np.float64).mean(axis=axes, keepdims=True)
        if dtype == "float16":  # summed in float32, rounded to half once (as mean)
            np.testing.assert_array_equal(got, want.astype(np.float16))
        else:
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind,reduce", [("max", relay.max), ("avg", relay.mean)])
@pytest.mark.parametrize("shape", SHAPES)
def test_global_pool_is_the_reduction_with_its_producer_fused(shape, kind, reduce):
    """relu then a global pool: one kernel, equal to relu then mean / max over (2, 3)."""
    data = RNG.standard_normal(shape).astype("float32")
    d = relay.var("d", shape=shape)
    pool = _build(_pool(kind, relay.nn.relu(d), "NCHW"), d)
    assert _kernels(pool) == [f"tvmgen_default_fused_nn_relu_nn_global_{kind}_pool2d"]
    same = _build(reduce(relay.nn.relu(d), axis=[2, 3], keepdims=True), d)
    np.testing.assert_array_equal(_run(pool, data), _run(same, data))


def test_global_max_pool_propagates_nan():
    data = RNG.standard_normal((1, 3, 9, 9)).astype("float32")
    data[0, 1, 4, 7] = np.nan
    d = relay.var("d", shape=data.shape)
    got = _run(_build(_pool("max", d, "NCHW"), d), data)
    assert np.isnan(got[0, 1]).all() and not np.isnan(got[0, [0, 2]]).any()
    np.testing.assert_array_equal(got[0, [0, 2]], data[0, [0, 2]].max(axis=(1, 2),
                                                                      keepdims=True))
