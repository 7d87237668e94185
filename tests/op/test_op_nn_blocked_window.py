"""Pools and depthwise conv in the channel-blocked layout NCHW<x>c (codegen.schedules.
window_nchwc): through relay.build and the graph executor against the numpy references (and
the depthwise reference against the NCHW conv2d's), over stride 2, asymmetric padding, ceil
mode, count_include_pad, dilation, batch 2, output size 1, windows over padding alone, a fused
epilogue and export/load, at both vector widths (the block x is the width)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import runtime
from compiler import relay
from compiler.errors import TypeInferenceError
from compiler.ir.module import IRModule
from compiler.op.blocked_layout import block_ref
from compiler.op.nn_depthwise_nchwc import (blocked_depthwise, contrib_depthwise_conv2d_NCHWc,
                                            depthwise_blockable, depthwise_weight_pack)
from compiler.op.registry import get_def
from runtime import graph_executor
from tests.op._opcheck import infer

# compiled through relay.build and compared with the numpy reference below
OPS_TESTED = {"nn.contrib_depthwise_conv2d_NCHWc"}

RNG = np.random.default_rng(29)


def _build(expr, params: list):
    mod = IRModule.from_expr(relay.Function(params, expr))
    return relay.build(mod, target="llvm")


def _run(lib, **inputs) -> np.ndarray:
    m = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    m.run(**inputs)
    return m.get_output(0).numpy()


def _kernels(lib) -> list[str]:
    graph = json.loads(lib.get_graph_json())
    return [n["attrs"]["func_name"] for n in graph["nodes"] if n["op"] == "tvm_op"]


def _reference(call, *inputs):
    return get_def(call.op.name).reference(list(inputs), call.attrs)


# (N, C/x, H, W), pool size, strides, padding (t, l, b, r), dilation, extra attrs
POOLS = [
    ((2, 2, 13, 11), 3, 2, (1, 1, 1, 1), 1, {}),                       # batch 2, stride 2
    ((1, 1, 9, 10), 3, 1, (0, 1, 2, 0), 1, {}),                        # asymmetric padding
    ((1, 2, 12, 12), 3, 2, (1, 1, 1, 1), 1, {"ceil_mode": True}),
    ((1, 1, 11, 9), 3, 2, (1, 0, 1, 2), 1, {"ceil_mode": True, "count_include_pad": True}),
    ((1, 1, 3, 3), 3, 2, (0, 0, 0, 0), 1, {}),                         # output size 1
    ((1, 1, 10, 10), 3, 1, (2, 2, 2, 2), 2, {"count_include_pad": True}),  # dilation 2
    ((1, 1, 4, 4), 2, 2, (3, 3, 0, 0), 1, {}),                         # windows over padding only
    ((1, 3, 30, 31), 2, 2, (0, 0, 0, 0), 1, {}),                       # tiles and a remainder
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("shape,k,stride,pad,dil,extra", POOLS)
def test_blocked_pool_matches_reference(kind, shape, k, stride, pad, dil, extra, width):
    x = width
    n, cb, h, w = shape
    data = RNG.standard_normal((n, cb * x, h, w)).astype("float32")
    d = relay.var("d", shape=(n, cb, h, w, x))
    if kind == "max":
        extra = {key: v for key, v in extra.items() if key != "count_include_pad"}
    call = getattr(relay.nn, f"{kind}_pool2d")(d, pool_size=(k, k), strides=(stride, stride),
                                               dilation=(dil, dil), padding=pad,
                                               layout=f"NCHW{x}c", **extra)
    nchw = getattr(relay.nn, f"{kind}_pool2d")(relay.var("e", shape=data.shape),
                                               pool_size=(k, k), strides=(stride, stride),
                                               dilation=(dil, dil), padding=pad, **extra)
    want = block_ref(_reference(nchw, data), x)
    assert infer(call).shape == want.shape
    np.testing.assert_array_equal(_reference(call, block_ref(data, x)), want)
    got = _run(_build(call, [d]), d=block_ref(data, x))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_blocked_max_pool_propagates_nan(width):
    x = width
    data = RNG.standard_normal((1, 1, 6, 6, x)).astype("float32")
    data[0, 0, 2, 3, 1] = np.nan
    d = relay.var("d", shape=data.shape)
    call = relay.nn.max_pool2d(d, (3, 3), (1, 1), padding=(1, 1), layout=f"NCHW{x}c")
    got = _run(_build(call, [d]), d=data)
    np.testing.assert_array_equal(got, _reference(call, data))
    assert np.isnan(got[0, 0, 1:4, 2:5, 1]).all() and not np.isnan(got[..., 0]).any()


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("shape", [(2, 3, 7, 7), (1, 1, 1, 1), (1, 2, 5, 19)])
def test_blocked_global_pool_fuses_its_producer(kind, shape, width):
    """relu(x + bias) then a global pool: one kernel (a global pool is a reduction, as mean:
    the registry's COMM_REDUCE takes elementwise producers); an add after it is a second."""
    x = width
    n, cb, h, w = shape
    data = RNG.standard_normal((n, cb, h, w, x)).astype("float32")
    bias = RNG.standard_normal((1, cb, 1, 1, x)).astype("float32")
    d = relay.var("d", shape=data.shape)
    pool = getattr(relay.nn, f"global_{kind}_pool2d")
    call = pool(relay.nn.relu(relay.add(d, relay.const(bias))), layout=f"NCHW{x}c")
    lib = _build(relay.add(call, relay.const(bias)), [d])
    assert _kernels(lib) == [f"tvmgen_default_fused_add_nn_relu_nn_global_{kind}_pool2d",
                             "tvmgen_default_fused_add"]
    want = _reference(pool(d, layout=f"NCHW{x}c"), np.maximum(data + bias, 0)) + bias
    np.testing.assert_allclose(_run(lib, d=data), want, rtol=1e-5, atol=1e-5)


def test_blocked_adaptive_pool(width):
    """Adaptive pools take NCHW<x>c through the generic rule."""
    x = width
    data = RNG.standard_normal((1, 2, 9, 7, x)).astype("float32")
    d = relay.var("d", shape=data.shape)
    call = relay.nn.adaptive_avg_pool2d(d, (4, 3), layout=f"NCHW{x}c")
    np.testing.assert_allclose(_run(_build(call, [d]), d=data), _reference(call, data),
                               rtol=1e-5, atol=1e-5)


def _depthwise(d, w: np.ndarray, x: int, stride, pad, dil):
    c, _, r, s = w.shape
    return contrib_depthwise_conv2d_NCHWc(
        d, depthwise_weight_pack(relay.const(w), x), strides=stride, padding=pad,
        dilation=dil, groups=c, channels=c, kernel_size=(r, s), data_layout=f"NCHW{x}c",
        kernel_layout=f"OIHW1i{x}o")


def _depthwise_nchw_ref(data, w, stride, pad, dil):
    call = relay.nn.conv2d(relay.var("a", shape=data.shape), relay.var("b", shape=w.shape),
                           strides=stride, padding=pad, dilation=dil, groups=w.shape[0])
    return _reference(call, data, w)


# (N, C/x, H, W), kernel, stride, padding (t, l, b, r), dilation
DEPTHWISE = [
    ((2, 2, 13, 11), 3, 2, (1, 1, 1, 1), 1),   # batch 2, stride 2
    ((1, 1, 9, 10), 3, 1, (0, 1, 2, 0), 1),    # asymmetric padding
    ((1, 1, 11, 12), 3, 1, (2, 2, 2, 2), 2),   # dilation 2
    ((1, 1, 3, 3), 3, 1, (0, 0, 0, 0), 1),     # output size 1
    ((1, 2, 14, 15), 5, 2, (2, 2, 2, 2), 1),   # 5x5 stride 2
    ((1, 3, 20, 21), 3, 1, (1, 1, 1, 1), 1),   # tiles and a remainder, several row groups
    ((1, 1, 2, 2), 3, 1, (2, 2, 2, 2), 1),     # outputs whose windows miss the input
]


@pytest.mark.parametrize("shape,k,stride,pad,dil", DEPTHWISE)
def test_blocked_depthwise_bias_relu6(shape, k, stride, pad, dil, width):
    """depthwise + bias + clip(0, 6) (MobileNet's): one kernel, the packed weight folded at
    compile time, against the NCHW conv2d reference."""
    x = width
    n, cb, h, w = shape
    c = cb * x
    data = RNG.standard_normal((n, c, h, w)).astype("float32")
    wv = RNG.standard_normal((c, 1, k, k)).astype("float32")
    bias = RNG.standard_normal(c).astype("float32")
    d = relay.var("d", shape=(n, cb, h, w, x))
    call = _depthwise(d, wv, x, (stride, stride), pad, (dil, dil))
    bias_b = relay.const(bias.reshape(1, cb, 1, 1, x))
    lib = _build(relay.clip(relay.add(call, bias_b), 0.0, 6.0), [d])
    assert len(_kernels(lib)) == 1
    conv = _depthwise_nchw_ref(data, wv, (stride, stride), pad, (dil, dil))
    want = block_ref(np.clip(conv + bias[None, :, None, None], 0, 6), x)
    assert infer(call).shape == want.shape
    np.testing.assert_allclose(got := _run(lib, d=block_ref(data, x)), want, rtol=1e-5,
                               atol=1e-5)
    assert got.dtype == np.float32


def test_blocked_depthwise_residual_add_and_export(tmp_path, width):
    """A residual add in the epilogue (in place over the residual's storage where the plan
    allows), and the module exported, loaded and run again."""
    x = width
    c, h = 2 * x, 10
    data = RNG.standard_normal((1, c, h, h)).astype("float32")
    res = RNG.standard_normal((1, c, h, h)).astype("float32")
    wv = RNG.standard_normal((c, 1, 3, 3)).astype("float32")
    d = relay.var("d", shape=(1, 2, h, h, x))
    r = relay.var("r", shape=(1, 2, h, h, x))
    out = relay.add(_depthwise(d, wv, x, (1, 1), (1, 1, 1, 1), (1, 1)), relay.exp(r))
    lib = _build(out, [d, r])
    want = block_ref(_depthwise_nchw_ref(data, wv, (1, 1), (1, 1, 1, 1), (1, 1)) + np.exp(res), x)
    inputs = {"d": block_ref(data, x), "r": block_ref(res, x)}
    np.testing.assert_allclose(_run(lib, **inputs), want, rtol=1e-5, atol=1e-5)
    path = tmp_path / "depthwise.so"
    lib.export_library(str(path))
    loaded = runtime.load_module(str(path))
    np.testing.assert_allclose(_run(loaded, **inputs), want, rtol=1e-5, atol=1e-5)


def test_depthwise_weight_pack_layout():
    w = np.arange(32 * 9, dtype="float32").reshape(32, 1, 3, 3)
    call = depthwise_weight_pack(relay.const(w), 16)
    packed = _reference(call, w)
    assert packed.shape == (2, 1, 3, 3, 1, 16)
    assert packed[1, 0, 2, 1, 0, 5] == w[16 + 5, 0, 2, 1]


@pytest.mark.parametrize("case,match", [
    ("groups", "groups=16"),
    ("weight", "weight must be"),
    ("layout", "kernel_layout"),
])
def test_blocked_depthwise_rejects(case, match):
    d = relay.var("d", shape=(1, 2, 8, 8, 16))
    w = relay.var("w", shape=(2, 1, 3, 3, 1, 16))
    kw = dict(groups=32, kernel_layout="OIHW1i16o")
    if case == "groups":
        kw["groups"] = 16
    elif case == "weight":
        w = relay.var("w", shape=(2, 1, 3, 3, 16, 1))
    else:
        kw["kernel_layout"] = "OIHW"
    call = contrib_depthwise_conv2d_NCHWc(d, w, **kw)
    with pytest.raises(TypeInferenceError, match=match):
        infer(call)


def test_depthwise_conv2d_rewritten_blocked_computes_the_same(width):
    """depthwise_blockable / blocked_depthwise (ConvertBlockedLayout's rewrite): a depthwise
    nn.conv2d + bias + relu6 rewritten over NCHW<x>c between two layout_transforms gives the
    NCHW graph's output."""
    x = width
    c, h = 3 * x, 9
    data = RNG.standard_normal((2, c, h, h)).astype("float32")
    wv = RNG.standard_normal((c, 1, 3, 3)).astype("float32")
    bias = RNG.standard_normal((c, 1, 1)).astype("float32")
    d = relay.var("d", shape=data.shape)
    conv = relay.nn.conv2d(d, relay.const(wv), strides=(2, 2), padding=(1, 0, 2, 1), groups=c,
                           channels=c, kernel_size=(3, 3))
    assert depthwise_blockable(conv.attrs, relay.TensorType(data.shape),
                               relay.TensorType(wv.shape), x)
    blocked = blocked_depthwise(conv.attrs, relay.layout_transform(d, "NCHW", f"NCHW{x}c"),
                                relay.const(wv), x)
    bias_b = relay.const(block_ref(bias[None], x))
    out = relay.layout_transform(relay.clip(relay.add(blocked, bias_b), 0.0, 6.0),
                                 f"NCHW{x}c", "NCHW")
    want = _run(_build(relay.clip(relay.add(conv, relay.const(bias)), 0.0, 6.0), [d]), d=data)
    np.testing.assert_allclose(_run(_build(out, [d]), d=data), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["groups 1", "channels not whole blocks", "multiplier 2",
                                  "NHWC", "float64"])
def test_depthwise_blockable_rejects(case, width):
    x = width
    c, groups, k, layout, dtype = 2 * x, 2 * x, 2 * x, "NCHW", "float32"
    if case == "groups 1":
        groups = 1
    elif case == "channels not whole blocks":
        c = groups = k = x + 4
    elif case == "multiplier 2":
        k = 2 * c
    elif case == "NHWC":
        layout = "NHWC"
    else:
        dtype = "float64"
    shape = (1, c, 8, 8) if layout == "NCHW" else (1, 8, 8, c)
    d = relay.var("d", shape=shape, dtype=dtype)
    w = relay.var("w", shape=(k, c // groups, 3, 3), dtype=dtype)
    conv = relay.nn.conv2d(d, w, groups=groups, data_layout=layout,
                           kernel_layout="OIHW")
    assert not depthwise_blockable(conv.attrs, relay.TensorType(shape, dtype),
                                   relay.TensorType((k, c // groups, 3, 3), dtype), x)


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32"])
@pytest.mark.parametrize("kind", ["max", "avg", "global_max", "global_avg"])
def test_blocked_pool_dtypes(kind, dtype):
    """Other floats through the blocked schedule, integers through the generic rule."""
    data = (RNG.standard_normal((1, 2, 9, 9, 8)) * 50).astype(dtype)
    d = relay.var("d", shape=data.shape, dtype=dtype)
    if kind.startswith("global"):
        call = getattr(relay.nn, f"{kind}_pool2d")(d, layout="NCHW8c")
    else:
        call = getattr(relay.nn, f"{kind}_pool2d")(d, (3, 3), (2, 2), padding=(1, 1),
                                                   layout="NCHW8c")
    got = _run(_build(call, [d]), d=data)
    want = _reference(call, data)
    assert got.dtype == want.dtype
    tol = {"float16": 1e-3, "float64": 1e-12}.get(dtype, 0)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 50)
