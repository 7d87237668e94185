"""The channel-blocked (NCHW[x]c) conv path, at both micro-kernel widths (x = 8 and 16): the
schedule (codegen.schedules.conv2d_nchwc) against numpy over its edges (stride 2, padding, 1x1
and 3x3, batch 2, output size 1, channel blocks KB not dividing the output channels, residual
add in the epilogue, several input-channel blocks); the ConvertBlockedLayout pass on a
ResNet-style graph (layout transforms left at the input and output only, output against the
interpreter), on channels not in whole blocks, and an exported blocked module."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
import runtime
from codegen import te
from codegen.jit import build_te
from codegen.options import CodegenOptions
from codegen.schedules import Conv2dConfig, conv2d_pack_geometry
from codegen.schedules.conv2d_config import channel_block
from codegen.schedules.conv2d_nchwc import conv2d_nchwc_packed, nchwc_applicable
from codegen.tir.ops import max as tir_max
from compiler import relay
from compiler.driver.build import DISABLE_DISK_CACHE as NO_DISK
from compiler.driver.build import optimize
from compiler.errors import CompilerError
from compiler.op.interpreter import evaluate
from compiler.ir.expr import Call, Op
from compiler.ir.traversal import post_order
from compiler.op.nn_packed import _conv_pack_ref
from compiler.passes.convert_blocked_layout import BLOCKED_LAYOUT, BLOCKED_LAYOUT_GUARD
from compiler.transform import PassContext
from runtime import graph_executor

RNG = np.random.default_rng(61)


def blocked(a: np.ndarray, x: int) -> np.ndarray:
    n, c, h, w = a.shape
    return np.ascontiguousarray(a.reshape(n, c // x, x, h, w).transpose(0, 1, 3, 4, 2))


def conv_reference(x, w, stride, pad, dilation=1):
    """NCHW conv2d in float64, padding (top, left, bottom, right)."""
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    oh = (xp.shape[2] - dilation * (r - 1) - 1) // stride + 1
    ow = (xp.shape[3] - dilation * (s - 1) - 1) // stride + 1
    out = np.zeros((n, k, oh, ow))
    for i in range(r):
        for j in range(s):
            patch = xp[:, :, i * dilation:i * dilation + stride * oh:stride,
                       j * dilation:j * dilation + stride * ow:stride]
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j].astype(np.float64))
    return out


class Attrs:
    def __init__(self, **kw):
        self.__dict__.update(kw)


# (N, C, H, W), K, R, stride, padding (t, l, b, r), dilation; C and K are in units of the
# block x (the width), so every case is valid at both widths
CASES = [
    ((1, 2, 9, 9), 4, 3, 1, (1, 1, 1, 1), 1),     # 3x3 same padding, row tiles (9 a row)
    ((2, 1, 7, 5), 2, 1, 1, (0, 0, 0, 0), 1),     # 1x1, batch 2, 35 pixels
    ((1, 4, 14, 14), 3, 3, 2, (1, 1, 1, 1), 1),   # 3x3 stride 2; KB may not divide K
    ((1, 4, 8, 8), 10, 1, 2, (0, 0, 0, 0), 1),    # strided 1x1 (subsampled copy)
    ((2, 2, 9, 7), 2, 1, 2, (0, 0, 0, 0), 1),     # strided 1x1, odd sizes, batch 2
    ((1, 2, 10, 11), 2, 1, 3, (0, 0, 0, 0), 1),   # strided 1x1, stride 3
    ((1, 2, 1, 1), 1, 1, 1, (0, 0, 0, 0), 1),     # output size 1
    ((1, 2, 3, 3), 2, 3, 1, (0, 0, 0, 0), 1),     # 3x3 valid: one output pixel
    ((1, 2, 9, 10), 2, 3, 1, (2, 1, 0, 3), 2),    # asymmetric padding, dilation 2
    ((1, 64, 6, 6), 4, 3, 1, (1, 1, 1, 1), 1),    # several input-channel blocks
]


def build_conv(xs, k, r, stride, pad, dilation, x, residual, config=None):
    n, c, h, w = xs
    geo = conv2d_pack_geometry(k, c, r, r, 1, channel_block(k, x))
    data = te.placeholder((n, c // x, h, w, x), name="x")
    wp = te.placeholder(geo, name="wp")
    y = conv2d_nchwc_packed(data, wp, (stride, stride), pad, (dilation, dilation), channels=k,
                            options=CodegenOptions.host(vector_width=x), config=config)
    bias = te.placeholder((k // x, 1, 1, x), name="b")
    res = te.placeholder(y.shape, name="res")

    def value(i, kb, oh, ow, v):
        s = y[i, kb, oh, ow, v] + bias[kb, 0, 0, v]
        return tir_max(s + res[i, kb, oh, ow, v] if residual else s, 0.0)
    z = te.compute(y.shape, value, name="z")
    inputs = [data, wp, bias] + ([res] if residual else [])
    return build_te(inputs, [z], "conv_nchwc"), geo


@pytest.mark.parametrize("residual", [False, True], ids=["bias_relu", "bias_add_relu"])
@pytest.mark.parametrize("xs,kblocks,r,stride,pad,dilation", CASES)
def test_nchwc_conv_matches_numpy(xs, kblocks, r, stride, pad, dilation, residual, width):
    x = width
    xs = (xs[0], xs[1] * x, xs[2], xs[3])
    k = kblocks * x
    run, geo = build_conv(xs, k, r, stride, pad, dilation, x, residual)
    assert "relayjit.ukr.convb_" in str(run.primfunc)
    data = RNG.standard_normal(xs).astype(np.float32)
    w = (RNG.standard_normal((k, xs[1], r, r)) / np.sqrt(xs[1] * r * r)).astype(np.float32)
    b = RNG.standard_normal(k).astype(np.float32)
    expected = conv_reference(data, w, stride, pad, dilation) + b[None, :, None, None]
    args = [blocked(data, x), _conv_pack_ref([w], Attrs(groups=1, block=geo[-1])),
            b.reshape(k // x, 1, 1, x)]
    if residual:
        res = RNG.standard_normal(expected.shape).astype(np.float32)
        expected = expected + res
        args.append(blocked(res, x))
    (got,) = run(*args)
    np.testing.assert_allclose(got, blocked(np.maximum(expected, 0).astype(np.float32), x),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("subsample", [True, False], ids=["subsampled", "in_place"])
@pytest.mark.parametrize("xs,kblocks", [((1, 4, 8, 8), 10), ((2, 2, 9, 7), 2)])
def test_strided_1x1_subsample_switch(xs, kblocks, subsample, width):
    """Both ways of reading a strided 1x1 conv's input (a dense subsampled copy, or in
    place at stride s) give the numpy result, and the switch picks the copy."""
    x = width
    xs = (xs[0], xs[1] * x, xs[2], xs[3])
    k = kblocks * x
    run, geo = build_conv(xs, k, 1, 2, (0, 0, 0, 0), 1, x, False,
                          Conv2dConfig(subsample_strided=subsample))
    assert ("_xsub" in str(run.primfunc)) == subsample
    data = RNG.standard_normal(xs).astype(np.float32)
    w = (RNG.standard_normal((k, xs[1], 1, 1)) / np.sqrt(xs[1])).astype(np.float32)
    b = RNG.standard_normal(k).astype(np.float32)
    expected = conv_reference(data, w, 2, (0, 0, 0, 0)) + b[None, :, None, None]
    (got,) = run(blocked(data, x), _conv_pack_ref([w], Attrs(groups=1, block=geo[-1])),
                 b.reshape(k // x, 1, 1, x))
    np.testing.assert_allclose(got, blocked(np.maximum(expected, 0).astype(np.float32), x),
                               rtol=1e-4, atol=1e-4)


def test_nchwc_rejects_channels_not_in_whole_blocks(width):
    x = width
    assert not nchwc_applicable(x + 1, 2 * x, 1, 2 * x, x)
    assert not nchwc_applicable(2 * x, 2 * x + 3, 1, 2 * x, x)
    assert not nchwc_applicable(2 * x, 2 * x, 2, 2 * x, x)
    data = te.placeholder((1, 1, 5, 5, x + 1), name="x")
    wp = te.placeholder(conv2d_pack_geometry(2 * x, x + 1, 1, 1, 1, 2 * x), name="wp")
    with pytest.raises(ValueError, match="blocks of"):
        conv2d_nchwc_packed(data, wp, channels=2 * x, options=CodegenOptions.host(
            vector_width=x))


# --- the ConvertBlockedLayout pass and relay.build ------------------------------------------

def _const(rng, *shape):
    fan_in = np.prod(shape[1:]) if len(shape) > 1 else 1
    return relay.const((rng.standard_normal(shape) / np.sqrt(fan_in)).astype("float32"))


def _conv(rng, data, c, k, r, stride=1, relu=True):
    """conv2d + bias + per-channel scale (a folded batch norm) (+ relu), as ONNX CNNs give."""
    y = relay.nn.conv2d(data, _const(rng, k, c, r, r), strides=(stride, stride),
                        padding=(r // 2, r // 2), channels=k, kernel_size=(r, r))
    y = relay.multiply(relay.nn.bias_add(y, _const(rng, k)), _const(rng, k, 1, 1))
    return relay.nn.relu(y) if relu else y


def resnet_style(x: int, batch: int = 2, size: int = 24):
    """A stem, a Winograd 3x3 (F(4x4): 64+ channels, 36 tiles), a max pool, two bottlenecks
    (one strided, with a projection shortcut), a concat of two branches, an average pool, a
    global pool, flatten and dense: every activation has whole blocks of x channels, so only
    the input and the output need NCHW."""
    rng = np.random.default_rng(5)
    data = relay.var("x", shape=(batch, 2 * x, size, size))
    y = _conv(rng, _conv(rng, data, 2 * x, 8 * x, 3), 8 * x, 8 * x, 3)
    y = relay.nn.max_pool2d(y, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    b = _conv(rng, _conv(rng, _conv(rng, y, 8 * x, 2 * x, 1), 2 * x, 2 * x, 3), 2 * x, 8 * x,
              1, relu=False)
    y = relay.nn.relu(relay.add(b, y))
    b = _conv(rng, _conv(rng, _conv(rng, y, 8 * x, 4 * x, 1), 4 * x, 4 * x, 3, stride=2),
              4 * x, 8 * x, 1, relu=False)
    y = relay.nn.relu(relay.add(b, _conv(rng, y, 8 * x, 8 * x, 1, stride=2, relu=False)))
    y = relay.concatenate([_conv(rng, y, 8 * x, 2 * x, 1), _conv(rng, y, 8 * x, 4 * x, 3)], 1)
    y = relay.nn.avg_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    y = relay.nn.dense(y, _const(rng, 10, 6 * x))
    return relay.Function([data], y), (batch, 2 * x, size, size)


# the guard against transforms that would not pay lifted: small test graphs go blocked
LIFTED = {"max_transform_elements_per_flop": 1.0}


def _config(blocked: bool | dict) -> dict:
    """The blocked layout on or off, or on under these BlockedLayoutGuard fields."""
    if isinstance(blocked, dict):
        return {BLOCKED_LAYOUT: True, BLOCKED_LAYOUT_GUARD: blocked}
    return {BLOCKED_LAYOUT: blocked}


def _optimized(func, blocked: bool | dict, opt_level: int = 3):
    with PassContext(opt_level=opt_level, config=_config(blocked)):
        return optimize(tvm.IRModule.from_expr(func))["main"]


def _ops(func) -> list:
    """Op names of every call in the function, fused functions' bodies included."""
    return [node.op.name for node in post_order(func.body)
            if type(node) is Call and isinstance(node.op, Op)]


def _run(func, data, blocked: bool | dict, opt_level: int = 3):
    with PassContext(opt_level=opt_level, config={**_config(blocked), NO_DISK: True}):
        lib = relay.build(func, target="llvm")
    gmod = graph_executor.GraphModule(lib["default"](runtime.cpu()))
    gmod.run(x=data)
    return gmod.get_output(0).numpy(), lib


@pytest.mark.parametrize("opt_level", [2, 3])
def test_resnet_style_graph_keeps_one_transform_at_the_input(width, opt_level):
    """The global pool's blocked [N, C/x, 1, 1, x] is NCHW's order already: the flatten reads
    it through a reshape, so the input's transform is the only one left."""
    func, shape = resnet_style(width)
    after = _optimized(func, True, opt_level)
    ops = _ops(after)
    assert ops.count("layout_transform") == 1
    transform = next(n for n in post_order(after.body) if type(n) is Call
                     and isinstance(n.op, Op) and n.op.name == "layout_transform")
    assert (transform.attrs.src_layout, transform.attrs.dst_layout) == ("NCHW", f"NCHW{width}c")
    assert "reshape" in ops  # the pooled [N, C/x, 1, 1, x] to the flatten
    assert ops.count("nn.contrib_conv2d_NCHWc") == 10
    assert "nn.contrib_conv2d_packed" not in ops
    winograd = [n for n in post_order(after.body) if type(n) is Call and isinstance(n.op, Op)
                and n.op.name == "nn.contrib_conv2d_winograd_without_weight_transform"]
    assert len(winograd) == 1
    assert all(w.attrs.data_layout == f"NCHW{width}c" for w in winograd)
    assert all(op in ops for op in ("nn.max_pool2d", "nn.avg_pool2d", "nn.global_avg_pool2d",
                                     "concatenate"))
    off = _ops(_optimized(func, False, opt_level))
    assert "layout_transform" not in off and "nn.contrib_conv2d_NCHWc" not in off


def test_resnet_style_graph_matches_the_interpreter(width):
    func, shape = resnet_style(width)
    data = RNG.standard_normal(shape).astype("float32")
    expected = evaluate(func, [data])
    got, _ = _run(func, data, True)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("config,blocked", [({}, True), ({BLOCKED_LAYOUT: False}, False)])
def test_pass_is_on_by_default_and_can_be_turned_off(config, blocked):
    func, _ = resnet_style(CodegenOptions.host().vector_width, batch=1)
    with PassContext(opt_level=3, config=config):
        ops = _ops(optimize(tvm.IRModule.from_expr(func))["main"])
    assert ("nn.contrib_conv2d_NCHWc" in ops) == blocked


@pytest.mark.parametrize("channels,converted", [(None, True), (12, False)])
def test_channels_not_in_whole_blocks_stay_nchw(width, channels, converted):
    """Two small convs over whole blocks convert (the cost guard lifted: they would not pay
    for their edge transforms); with 12 channels (padded blocks) the default guard keeps the
    function NCHW, neighbours included: no transform is made for nothing."""
    guard = LIFTED if converted else True
    x = width
    rng = np.random.default_rng(3)
    c = channels or 2 * x
    data = relay.var("x", shape=(1, c, 7, 7))
    y = _conv(rng, _conv(rng, data, c, 3 * x, 3, stride=2), 3 * x, x + 3 if channels else x, 1)
    ops = _ops(_optimized(relay.Function([data], y), guard))
    assert ops.count("nn.contrib_conv2d_NCHWc") == (2 if converted else 0)
    assert ops.count("layout_transform") == (2 if converted else 0)


@pytest.mark.parametrize("size,transforms", [(5, 3), (3, 1)])
def test_readers_in_nchw_share_one_transform_back(width, size, transforms):
    """A conv read by a blocked conv and by a flatten, and that conv by a tile: each blocked
    value goes back to NCHW once, shared; as a reshape where it is one pixel (size 3: 1x1).
    The guard against transforms inside the graph is off (2 of them for 3 small convs)."""
    x = width
    rng = np.random.default_rng(4)
    data = relay.var("x", shape=(2, x, size, size))
    a = _conv(rng, data, x, 2 * x, 3, stride=2)
    a = _conv(rng, a, 2 * x, 2 * x, 3, stride=2)
    b = _conv(rng, a, 2 * x, x, 1)
    out = relay.add(relay.nn.batch_flatten(a), relay.nn.batch_flatten(relay.tile(b, (1, 2, 1,
                                                                                      1))))
    func = relay.Function([data], out)
    ops = _ops(_optimized(func, LIFTED))
    assert ops.count("layout_transform") == transforms  # the input (and a, b back to NCHW)
    sample = RNG.standard_normal((2, x, size, size)).astype("float32")
    got, _ = _run(func, sample, LIFTED)
    np.testing.assert_allclose(got, evaluate(func, [sample]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("reduce,axis,keepdims,transforms,op", [
    ("mean", (2, 3), False, 1, "nn.global_avg_pool2d"),
    ("mean", (2, 3), True, 1, "nn.global_avg_pool2d"),
    ("max", (-1, -2), True, 1, "nn.global_max_pool2d"),
    ("max", (2, 3), False, 1, "nn.global_max_pool2d"),
    ("sum", (2, 3), False, 1, "sum"), ("sum", (1,), True, 2, "sum"),
    ("mean", (3,), False, 2, "mean")])
def test_reductions_over_h_and_w_stay_blocked(width, reduce, axis, keepdims,
                                              transforms, op):
    """A reduction over exactly H and W reduces the blocks (mean / max as the blocked global
    pools, whose schedule loads whole blocks); over channels or one spatial axis it needs
    NCHW."""
    rng = np.random.default_rng(6)
    data = relay.var("x", shape=(2, width, 5, 4))
    y = _conv(rng, _conv(rng, data, width, 2 * width, 3), 2 * width, 2 * width, 1)
    func = relay.Function([data], getattr(relay, reduce)(y, axis=axis, keepdims=keepdims))
    ops = _ops(_optimized(func, LIFTED))
    assert ops.count("layout_transform") == transforms and op in ops
    if op != reduce:
        assert reduce not in ops
    sample = RNG.standard_normal((2, width, 5, 4)).astype("float32")
    got, _ = _run(func, sample, LIFTED)
    np.testing.assert_allclose(got, evaluate(func, [sample]), rtol=1e-4, atol=1e-4)


def inverted_residuals(x: int, groups: int | None = None):
    """Inverted residual blocks: 1x1 expand, a 3x3 over groups (depthwise when None), 1x1
    project + add, as MobileNet-v2's."""
    rng = np.random.default_rng(8)
    data = relay.var("x", shape=(1, 2 * x, 8, 8))
    y = data
    g = groups or 6 * x
    for _ in range(3):
        e = _conv(rng, y, 2 * x, 6 * x, 1)
        e = relay.nn.conv2d(e, _const(rng, 6 * x, 6 * x // g, 3, 3), padding=(1, 1), groups=g,
                            channels=6 * x, kernel_size=(3, 3))
        y = relay.add(y, _conv(rng, relay.nn.relu(e), 6 * x, 2 * x, 1, relu=False))
    return relay.Function([data], y)


def test_depthwise_convs_stay_blocked(width):
    func = inverted_residuals(width)
    ops = _ops(_optimized(func, LIFTED))
    assert ops.count("nn.contrib_depthwise_conv2d_NCHWc") == 3
    assert ops.count("nn.contrib_conv2d_NCHWc") == 6
    assert ops.count("layout_transform") == 2
    sample = RNG.standard_normal((1, 2 * width, 8, 8)).astype("float32")
    got, _ = _run(func, sample, LIFTED)
    np.testing.assert_allclose(got, evaluate(func, [sample]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("limit,blocked", [(None, False), (10.0, True)])
def test_functions_with_many_inner_transforms_stay_nchw(width, limit, blocked):
    """Each grouped (not depthwise) conv would need a transform pair: with more transformed
    elements than max_transform_elements_per_flop per FLOP of the blocked convs the pass leaves
    the function as it is."""
    guard = {"max_transform_elements_per_flop": limit} if limit is not None else True
    ops = _ops(_optimized(inverted_residuals(width, groups=2), guard))
    assert ops.count("nn.contrib_conv2d_NCHWc") == (6 if blocked else 0)
    assert ops.count("layout_transform") == (8 if blocked else 0)


def test_exported_blocked_module_loads_and_runs(tmp_path):
    func, shape = resnet_style(CodegenOptions.host().vector_width, batch=1, size=8)
    data = RNG.standard_normal(shape).astype("float32")
    got, lib = _run(func, data, True)
    path = tmp_path / "blocked.so"
    lib.export_library(str(path))
    gmod = graph_executor.GraphModule(runtime.load_module(str(path))["default"](runtime.cpu()))
    gmod.run(x=data)
    np.testing.assert_allclose(gmod.get_output(0).numpy(), got, rtol=0, atol=0)


def channels_not_in_blocks(x: int, epilogue=None):
    """MobileNet-v2's 24-channel stage at width x (C = 1.5 x, not whole blocks): a 1x1 expand,
    a depthwise 3x3, a 1x1 project (+ epilogue) and a residual add, then a 1x1 expand."""
    rng = np.random.default_rng(8)
    c = 3 * x // 2
    data = relay.var("x", shape=(1, c, 8, 8))
    e = _conv(rng, data, c, 6 * x, 1)
    e = relay.nn.conv2d(e, _const(rng, 6 * x, 1, 3, 3), padding=(1, 1), groups=6 * x,
                        channels=6 * x, kernel_size=(3, 3))
    p = _conv(rng, relay.nn.relu(e), 6 * x, c, 1, relu=False)
    p = epilogue(p) if epilogue is not None else p
    y = relay.add(p, _conv(rng, data, c, c, 1, relu=False))
    return relay.Function([data], _conv(rng, y, c, 6 * x, 1))


@pytest.mark.parametrize("epilogue", [
    None, relay.sigmoid, lambda p: relay.add(p, relay.const(np.float32(3.0))),
    lambda p: relay.clip(p, 0.0, 6.0)], ids=["none", "sigmoid", "add_3", "relu6"])
def test_channels_padded_to_whole_blocks(width, epilogue):
    """C = 1.5 x stays blocked with its channels zero-padded to whole blocks: only the input
    (padded there) and the result are transformed, and padding channels an epilogue maps to
    non-zero (sigmoid 0.5, + 3) are read by the next conv with zero weights."""
    func = channels_not_in_blocks(width, epilogue)
    ops = _ops(_optimized(func, LIFTED))
    assert ops.count("layout_transform") == 2
    assert ops.count("nn.contrib_conv2d_NCHWc") == 4
    assert ops.count("nn.contrib_depthwise_conv2d_NCHWc") == 1
    sample = RNG.standard_normal((1, 3 * width // 2, 8, 8)).astype("float32")
    got, _ = _run(func, sample, LIFTED)
    np.testing.assert_allclose(got, evaluate(func, [sample]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tail", ["softmax", "flatten_dense", "sum_over_c", "log", "divide",
                                  "mean_dense", "max_pool"])
def test_padded_channels_unpadded_before_reading_across_them(width, tail):
    """A C = 1.5 x tensor whose padding holds 0.5 (a sigmoid) is transformed back, and the
    padding dropped, before an op reads across channels (softmax over C, flatten + dense, a sum
    over C) and before an op whose padding would not be finite (log, 1 / x of the zeros: a
    conv would read them, and -inf * 0 is NaN); a global average / max pool stays blocked."""
    rng = np.random.default_rng(3)
    c = 3 * width // 2
    data = relay.var("x", shape=(1, width, 6, 6))
    y = relay.sigmoid(_conv(rng, data, width, c, 1, relu=False))
    y = relay.add(y, _conv(rng, y, c, c, 1, relu=False))
    tails = {
        "softmax": lambda: relay.nn.softmax(y, axis=1),
        "flatten_dense": lambda: relay.nn.dense(relay.nn.batch_flatten(y),
                                                _const(rng, 10, c * 36)),
        "sum_over_c": lambda: relay.sum(y, axis=1),
        "log": lambda: _conv(rng, relay.log(relay.abs(_conv(rng, y, c, c, 1, relu=False))),
                             c, c, 1),
        # 1 / (|conv| + 1 per channel): the ones are padded with zeros, so 1 / 0 there
        "divide": lambda: _conv(rng, relay.divide(relay.const(np.float32(1.0)), relay.add(
            relay.abs(_conv(rng, y, c, c, 1, relu=False)),
            relay.const(np.ones((c, 1, 1), "float32")))), c, c, 1),
        "mean_dense": lambda: relay.nn.dense(relay.reshape(
            relay.mean(y, axis=(2, 3), keepdims=True), (1, c)), _const(rng, 10, c)),
        "max_pool": lambda: relay.nn.max_pool2d(y, pool_size=(3, 3), padding=(1, 1)),
    }
    func = relay.Function([data], tails[tail]())
    ops = _ops(_optimized(func, LIFTED))
    assert "strided_slice" in ops  # the padding channels dropped
    if tail in ("mean_dense", "max_pool"):
        assert ("nn.global_avg_pool2d" if tail == "mean_dense" else "nn.max_pool2d") in ops
    sample = RNG.standard_normal((1, width, 6, 6)).astype("float32")
    got, _ = _run(func, sample, LIFTED)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, evaluate(func, [sample]), rtol=1e-4, atol=1e-4)


def test_rgb_stem_is_not_padded_to_a_block(width):
    """A 3-channel graph input is not padded to a block (x / 3 times the stem's FLOPs): the stem
    stays NCHW and its output is transformed; the next conv is blocked."""
    rng = np.random.default_rng(4)
    data = relay.var("x", shape=(1, 3, 10, 10))
    func = relay.Function([data], _conv(rng, _conv(rng, data, 3, width, 3), width, width, 1))
    ops = _ops(_optimized(func, LIFTED))
    assert ops.count("nn.contrib_conv2d_packed") == 1 and "nn.pad" not in ops
    assert ops.count("nn.contrib_conv2d_NCHWc") == 1
    sample = RNG.standard_normal((1, 3, 10, 10)).astype("float32")
    got, _ = _run(func, sample, LIFTED)
    np.testing.assert_allclose(got, evaluate(func, [sample]), rtol=1e-4, atol=1e-4)


def test_conv_reading_an_nchw_concat_of_part_blocks(width):
    """A concat whose fields are not whole blocks stays NCHW (its blocked field transformed
    back); the conv reading its 1.5 x channels pads them on the way in (as UNet's skips)."""
    rng = np.random.default_rng(5)
    data = relay.var("x", shape=(1, width // 2, 6, 6))
    y = _conv(rng, data, width // 2, width, 3)
    cat = relay.concatenate([y, data], axis=1)
    func = relay.Function([data], _conv(rng, cat, 3 * width // 2, width, 1))
    ops = _ops(_optimized(func, LIFTED))
    assert "concatenate" in ops and "nn.pad" in ops
    sample = RNG.standard_normal((1, width // 2, 6, 6)).astype("float32")
    got, _ = _run(func, sample, LIFTED)
    np.testing.assert_allclose(got, evaluate(func, [sample]), rtol=1e-4, atol=1e-4)


def narrowing_then_inverted_residuals(x: int, size: int = 16):
    """MobileNet-v2's first stages at width x: a narrowing 1x1 (2x -> x) at the large plane,
    then inverted residuals (1x1 expand, a depthwise 3x3 (the first strided), 1x1 project, the
    second with its residual add)."""
    rng = np.random.default_rng(9)
    data = relay.var("x", shape=(1, 2 * x, size, size))
    y = _conv(rng, data, 2 * x, x, 1, relu=False)
    for stride, residual in ((2, False), (1, True)):
        c = y
        e = _conv(rng, y, x if stride == 2 else 2 * x, 6 * x, 1)
        e = relay.nn.conv2d(e, _const(rng, 6 * x, 1, 3, 3), strides=(stride, stride),
                            padding=(1, 1), groups=6 * x, channels=6 * x, kernel_size=(3, 3))
        y = _conv(rng, relay.nn.relu(e), 6 * x, 2 * x, 1, relu=False)
        y = relay.add(y, c) if residual else y
    return relay.Function([data], y), (1, 2 * x, size, size)


@pytest.mark.parametrize("start_plane,narrow_blocked", [(None, True), (8 * 8, False)])
def test_blocked_region_starts_where_the_network_narrows(width, start_plane,
                                                         narrow_blocked):
    """A narrowing conv (K < C) over an NCHW input at a plane larger than
    max_region_start_plane stays NCHW: the blocked region starts at the expand after it, whose
    input (x channels, not the graph's 2x) is the one tensor transformed in."""
    guard = dict(LIFTED)
    if start_plane is not None:  # 16x16 counts as a large plane
        guard["max_region_start_plane"] = start_plane
    x = width
    func, shape = narrowing_then_inverted_residuals(x)
    after = _optimized(func, guard)
    ops = _ops(after)
    transforms = [n for n in post_order(after.body) if type(n) is Call
                  and isinstance(n.op, Op) and n.op.name == "layout_transform"]
    into = [t for t in transforms if t.attrs.dst_layout == f"NCHW{x}c"]
    assert len(transforms) == 2 and len(into) == 1
    assert into[0].args[0].checked_type.shape[1] == (2 * x if narrow_blocked else x)
    assert ops.count("nn.contrib_conv2d_NCHWc") == (5 if narrow_blocked else 4)
    assert ops.count("nn.contrib_conv2d_packed") == (0 if narrow_blocked else 1)
    assert ops.count("nn.contrib_depthwise_conv2d_NCHWc") == 2
    sample = RNG.standard_normal(shape).astype("float32")
    got, _ = _run(func, sample, guard)
    np.testing.assert_allclose(got, evaluate(func, [sample]), rtol=1e-4, atol=1e-4)


def test_a_lone_conv_pays_for_its_edge_transforms(width):
    """One 256 -> 64 1x1 conv at 56x56 (a graph input, a graph output): its two transforms
    would cost more than the blocked kernel saves (0.95 vs 0.83 ms measured), so the guard
    counts them and the conv stays NCHW; with the guard lifted it goes blocked."""
    rng = np.random.default_rng(9)
    data = relay.var("x", shape=(1, 256, 56, 56))
    func = relay.Function([data], _conv(rng, data, 256, 64, 1))
    ops = _ops(_optimized(func, True))
    assert "nn.contrib_conv2d_NCHWc" not in ops and "layout_transform" not in ops


def test_guard_fields_are_checked():
    func, _ = resnet_style(CodegenOptions.host().vector_width, batch=1, size=8)
    with pytest.raises(CompilerError, match="takes a dict of"):
        _optimized(func, {"max_transform_elements": 1.0})
    with pytest.raises(CompilerError, match="must be a number >= 0"):
        _optimized(func, {"max_region_start_plane": -1})
