"""FuseConvMaxPool + nn.contrib_conv2d_max_pool (codegen.schedules.conv_pool) against numpy
through relay.build: strips that do and do not divide the pool's rows, padded and unpadded
convs and pools, the _rows and _direct conv schedules, batch 2, epilogues, and convs whose
output has another reader (not fused)."""
from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.ir.expr import Call
from compiler.passes import fuse_conv_pool
from compiler.transform import PassContext
from runtime import cpu, graph_executor

RNG = np.random.default_rng(7)
FUSED = "conv2d_max_pool"


def conv_ref(x, w, strides, padding, dilation):
    """NCHW conv2d in numpy (float64)."""
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = strides, padding, dilation
    k, _, r, s = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (dh * (r - 1) + 1, dw * (s - 1) + 1),
                                                   axis=(2, 3))[..., ::dh, ::dw]
    return np.einsum("nchwrs,kcrs->nkhw", win[:, :, ::sh, ::sw], w.astype(np.float64))


def max_pool_ref(y, size, strides, padding):
    (kh, kw), (sh, sw), (pt, pl, pb, pr) = size, strides, padding
    yp = np.pad(y, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=-np.inf)
    win = np.lib.stride_tricks.sliding_window_view(yp, (kh, kw), axis=(2, 3))
    return win[:, :, ::sh, ::sw].max(axis=(4, 5))


def stem(x_shape, k, r, strides, padding, dilation, pool, pool_strides, pool_padding,
         epilogue="bias_relu", extra_reader=False):
    """The relay function, its params and the numpy result of a conv -> epilogue -> pool."""
    c = x_shape[1]
    x = relay.var("x", shape=x_shape)
    w = relay.var("w", shape=(k, c, r, r))
    wv = (RNG.standard_normal((k, c, r, r)) * 0.2).astype("float32")
    params = {"w": wv}
    y = relay.nn.conv2d(x, w, strides=strides, padding=padding, dilation=dilation, channels=k,
                        kernel_size=(r, r))
    args = [x, w]
    xv = RNG.standard_normal(x_shape).astype("float32")
    ref = conv_ref(xv, wv, strides, padding, dilation)
    if epilogue in ("bias_relu", "add_relu"):
        b = relay.var("b", shape=(k,) if epilogue == "bias_relu" else (k, 1, 1))
        bv = RNG.standard_normal(b.type_annotation.shape).astype("float32")
        params["b"] = bv
        args.append(b)
        y = relay.nn.relu(relay.nn.bias_add(y, b) if epilogue == "bias_relu" else y + b)
        ref = np.maximum(ref + bv.reshape(k, 1, 1), 0)
    pooled = relay.nn.max_pool2d(y, pool_size=pool, strides=pool_strides, padding=pool_padding)
    out = relay.Tuple([pooled, y]) if extra_reader else pooled
    refs = [max_pool_ref(ref, pool, pool_strides, pool_padding)] + ([ref] if extra_reader else [])
    return relay.Function(args, out), params, xv, refs


def run(func, params, xv, strips=None):
    """Build and run; strips: fields of conv2d_max_pool.strips' configuration."""
    config = {"relayjit.schedule_config": {"conv2d_max_pool.strips": strips}} if strips else {}
    with PassContext(opt_level=3, config=config):
        lib = relay.build(func, params=params)
    gm = graph_executor.GraphModule(lib["default"](cpu()))
    gm.run(x=xv)
    return lib.get_graph_json(), [gm.get_output(i).numpy() for i in range(gm.get_num_outputs())]


CASES = [
    # x shape, K, window, conv strides, padding (t, l, b, r), dilation, pool, pool strides,
    # pool padding
    ((1, 3, 23, 23), 16, 3, (2, 2), (0, 0, 0, 0), (1, 1), (3, 3), (2, 2), (0, 0, 0, 0)),
    ((1, 3, 30, 30), 64, 7, (2, 2), (3, 3, 3, 3), (1, 1), (3, 3), (2, 2), (1, 1, 1, 1)),
    ((2, 8, 21, 19), 32, 3, (1, 1), (1, 1, 1, 1), (1, 1), (2, 2), (2, 2), (0, 0, 0, 0)),
    ((1, 4, 17, 20), 24, 5, (1, 1), (2, 2, 2, 2), (1, 1), (3, 3), (1, 1), (1, 1, 1, 1)),
    ((1, 5, 16, 16), 48, 3, (2, 2), (1, 1, 1, 1), (1, 1), (3, 3), (2, 2), (0, 0, 1, 1)),
    ((2, 6, 19, 25), 40, 3, (1, 2), (1, 0, 2, 1), (2, 2), (3, 2), (2, 3), (1, 0, 2, 1)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-k{c[1]}-{c[2]}x{c[2]}")
@pytest.mark.parametrize("strip_rows", [1, 2, 1000])
@pytest.mark.parametrize("epilogue", ["bias_relu", "add_relu", "none"])
@pytest.mark.parametrize("carry", [True, False])
def test_fused_matches_numpy(case, strip_rows, epilogue, carry, monkeypatch):
    x_shape, k, r, strides, padding, dilation, pool, pool_strides, pool_padding = case
    monkeypatch.setattr(fuse_conv_pool, "FUSE_MIN_BYTES", 0)
    func, params, xv, refs = stem(x_shape, k, r, strides, padding, dilation, pool, pool_strides,
                                  pool_padding, epilogue)
    # strips of strip_rows pool rows: (strip_rows - 1) * stride + window conv rows of K x OWc
    wp = x_shape[3] + padding[1] + padding[3]
    owc = (wp - dilation[1] * (r - 1) - 1) // strides[1] + 1
    conv_rows = (strip_rows - 1) * pool_strides[0] + pool[0]
    graph, (out,) = run(func, params, xv, {"carry_rows": carry,
                                           "scratch_bytes": 4 * k * owc * conv_rows})
    assert FUSED in graph
    np.testing.assert_allclose(out, refs[0], rtol=1e-4, atol=1e-4)


def test_second_reader_keeps_the_pair(monkeypatch):
    """The relu's output is also a graph output: the conv's output is needed whole."""
    monkeypatch.setattr(fuse_conv_pool, "FUSE_MIN_BYTES", 0)
    func, params, xv, refs = stem((1, 3, 23, 23), 16, 3, (2, 2), (0, 0, 0, 0), (1, 1), (3, 3),
                                  (2, 2), (0, 0, 0, 0), extra_reader=True)
    graph, outs = run(func, params, xv)
    assert FUSED not in graph
    for out, ref in zip(outs, refs):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name, x_shape, r, padding, pool_padding", [
    ("squeezenet", (1, 3, 224, 224), 3, (0, 0, 0, 0), (0, 0, 0, 0)),
    ("resnet50", (1, 3, 224, 224), 7, (3, 3, 3, 3), (1, 1, 1, 1)),
])
def test_stems_fuse_by_default(name, x_shape, r, padding, pool_padding):
    """The two stems the fusion is for: fused at the default threshold, several strips."""
    func, params, xv, refs = stem(x_shape, 64, r, (2, 2), padding, (1, 1), (3, 3), (2, 2),
                                  pool_padding)
    graph, (out,) = run(func, params, xv)
    assert FUSED in graph
    np.testing.assert_allclose(out, refs[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels, fused", [(77, True), (78, False)])
def test_large_reader_of_the_pool_keeps_the_pair(channels, fused, monkeypatch):
    """A reader of the pool that writes as much as the conv (16@11x11: 1936 floats; a 1x1 conv
    of the 5x5 pool onto 78 channels writes 1950) would land in cold storage: not fused."""
    monkeypatch.setattr(fuse_conv_pool, "FUSE_MIN_BYTES", 0)
    func, params, xv, refs = stem((1, 3, 23, 23), 16, 3, (2, 2), (0, 0, 0, 0), (1, 1), (3, 3),
                                  (2, 2), (0, 0, 0, 0))
    w2 = relay.var("w2", shape=(channels, 16, 1, 1))
    params["w2"] = (RNG.standard_normal((channels, 16, 1, 1)) * 0.2).astype("float32")
    body = relay.nn.conv2d(func.body, w2, channels=channels, kernel_size=(1, 1))
    graph, (out,) = run(relay.Function([*func.params, w2], body), params, xv)
    assert (FUSED in graph) == fused
    want = np.einsum("nchw,kc->nkhw", refs[0], params["w2"][:, :, 0, 0].astype(np.float64))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_small_conv_keeps_the_pair():
    """Below FUSE_MIN_BYTES the conv's output stays in L2 anyway."""
    func, params, xv, refs = stem((1, 3, 23, 23), 16, 3, (2, 2), (0, 0, 0, 0), (1, 1), (3, 3),
                                  (2, 2), (0, 0, 0, 0))
    graph, (out,) = run(func, params, xv)
    assert FUSED not in graph
    np.testing.assert_allclose(out, refs[0], rtol=1e-4, atol=1e-4)


def _ops(expr) -> list[str]:
    names = []
    while isinstance(expr, Call):
        names.append(expr.op.name)
        expr = expr.args[0]
    return names


def _rewritten(body_of, monkeypatch):
    from compiler import IRModule
    from compiler.passes.alter_op_layout import alter_op_layout
    from compiler.transform.pass_infra import InferType
    monkeypatch.setattr(fuse_conv_pool, "FUSE_MIN_BYTES", 0)
    x = relay.var("x", shape=(1, 3, 20, 20))
    w = relay.const(RNG.standard_normal((16, 3, 3, 3)).astype("float32"))
    conv = relay.nn.conv2d(x, w, channels=16, kernel_size=(3, 3))
    mod = InferType()(IRModule.from_expr(relay.Function([x], body_of(conv))))
    mod = InferType()(IRModule.from_expr(alter_op_layout(mod["main"])))
    return _ops(fuse_conv_pool.fuse_conv_max_pool(mod["main"]).body)


def _pool(y):
    return relay.nn.max_pool2d(y, pool_size=(3, 3), strides=(2, 2))


def test_pass_moves_commuting_ops_after_the_pool(monkeypatch):
    bias = relay.const(np.ones((16, 1, 1), "float32"))
    assert _rewritten(lambda c: _pool(relay.nn.relu(c + bias)), monkeypatch) == \
        ["nn.relu", "add", "nn.contrib_conv2d_max_pool"]


@pytest.mark.parametrize("body_of", [
    # a scale may be negative: max does not commute with it (no MAX_COMMUTES attribute)
    lambda c: _pool(c * relay.const(np.ones((16, 1, 1), "float32"))),
    # an add that varies over the pooled rows and columns
    lambda c: _pool(c + relay.const(np.ones((16, 18, 18), "float32"))),
], ids=["multiply", "add_per_pixel"])
def test_pass_leaves_non_commuting_ops(body_of, monkeypatch):
    assert "nn.contrib_conv2d_max_pool" not in _rewritten(body_of, monkeypatch)


@pytest.mark.parametrize("group_strips", [1, 3, 1000])
@pytest.mark.parametrize("case", CASES[1:3], ids=lambda c: f"{c[0]}-k{c[1]}-{c[2]}x{c[2]}")
def test_strip_groups(case, group_strips, monkeypatch):
    """Parallel tasks of 1 or 3 strips (each task's bottom strip computes all its conv rows),
    or one serial group, with one-row strips and carried rows."""
    x_shape, k, r, strides, padding, dilation, pool, pool_strides, pool_padding = case
    monkeypatch.setattr(fuse_conv_pool, "FUSE_MIN_BYTES", 0)
    func, params, xv, refs = stem(x_shape, k, r, strides, padding, dilation, pool, pool_strides,
                                  pool_padding, "bias_relu")
    wp = x_shape[3] + padding[1] + padding[3]
    owc = (wp - dilation[1] * (r - 1) - 1) // strides[1] + 1
    graph, (out,) = run(func, params, xv, {"group_strips": group_strips,
                                           "scratch_bytes": 4 * k * owc * pool[0]})
    assert FUSED in graph
    np.testing.assert_allclose(out, refs[0], rtol=1e-4, atol=1e-4)
