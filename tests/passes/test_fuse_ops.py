"""FuseOps: TVM's groupings (ported from tests/python/relay/test_pass_fuse_ops.py)."""
from __future__ import annotations

import sys

import pytest

import compiler as tvm
from compiler import relay
from compiler.relay import transform
from compiler.op.nn_norm import lrn
from compiler.relay.analysis import free_vars


def run_opt_pass(expr, opt_pass):
    mod = tvm.IRModule.from_expr(expr)
    mod = tvm.transform.Sequential([opt_pass])(mod)
    return mod["main"]


def prim(func):
    return func.with_attr("Primitive", 1)


def fused_functions(func):
    """The primitive functions called from func's body, in post order."""
    from compiler.ir.traversal import post_order
    return [n.op for n in post_order(func.body)
            if isinstance(n, relay.Call) and isinstance(n.op, relay.Function)]


def upsample(x):
    """Injective 2x nearest upsampling (stands in for nn.upsampling in TVM's tests)."""
    return relay.repeat(relay.repeat(x, 2, axis=2), 2, axis=3)


def test_fuse_simple():
    def before():
        x = relay.var("x", shape=(10, 20))
        y = relay.add(x, relay.const(1, "float32"))
        z = relay.exp(y)
        w = relay.squeeze(z)
        return relay.Function([x], w)

    def expected():
        x = relay.var("p", shape=(10, 20))
        y = relay.add(x, relay.const(1, "float32"))
        z = relay.exp(y)
        w = relay.squeeze(z)
        f1 = prim(relay.Function([x], w))
        x = relay.var("x", shape=(10, 20))
        y = relay.Call(f1, [x])
        return relay.Function([x], y)

    zz = run_opt_pass(before(), transform.FuseOps())
    after = run_opt_pass(expected(), transform.InferType())
    tvm.assert_structural_equal(zz, after)


def test_fuse_level0_one_function_per_op():
    x = relay.var("x", shape=(10, 20))
    y = relay.exp(relay.add(x, relay.const(1, "float32")))
    zz = run_opt_pass(relay.Function([x], y), transform.FuseOps(fuse_opt_level=0))
    funcs = fused_functions(zz)
    assert [f.body.op.name for f in funcs] == ["add", "exp"]
    assert all(f.is_primitive for f in funcs)
    # at level 0 even the scalar constant is an input of the add function
    assert len(funcs[0].params) == 2


def test_conv2d_fuse():
    # weights are annotated: InferType here solves types forwards only
    W1 = relay.var("w1", shape=(16, 16, 3, 3))
    W2 = relay.var("w2", shape=(16, 16, 1, 1))
    W3 = relay.var("w3", shape=(16, 16, 3, 3))

    def before(dshape):
        x = relay.var("x", shape=dshape)
        x = relay.add(x, relay.const(1, "float32"))
        y = relay.nn.conv2d(x, W1, kernel_size=(3, 3), padding=(1, 1), channels=16)
        y1 = relay.add(relay.const(1, "float32"), y)
        y = relay.add(y, y1)
        z2 = relay.nn.conv2d(y, W2, kernel_size=(1, 1), padding=(0, 0), channels=16)
        z3 = relay.nn.conv2d(y, W3, kernel_size=(3, 3), padding=(1, 1), channels=16)
        z = relay.add(z2, z3)
        return relay.Function(free_vars(z), z)

    def expected(dshape):
        x = relay.var("p0", shape=dshape)
        y = relay.add(x, relay.const(1, "float32"))
        f0 = prim(relay.Function([x], y))

        x = relay.var("p0", shape=dshape)
        w = relay.var("p1", shape=(16, 16, 3, 3))
        y = relay.nn.conv2d(x, w, kernel_size=(3, 3), padding=(1, 1), channels=16)
        y1 = relay.add(relay.const(1, "float32"), y)
        y = relay.add(y, y1)
        f1 = prim(relay.Function([x, w], y))

        x = relay.var("p0", shape=dshape)
        w = relay.var("p1", shape=(16, 16, 3, 3))
        z2 = relay.nn.conv2d(x, w, kernel_size=(3, 3), padding=(1, 1), channels=16)
        f2 = prim(relay.Function([x, w], z2))

        x = relay.var("p0", shape=dshape)
        w = relay.var("p1", shape=(16, 16, 1, 1))
        offset = relay.var("p2", shape=dshape)
        z3 = relay.nn.conv2d(x, w, kernel_size=(1, 1), padding=(0, 0), channels=16)
        z3 = relay.add(z3, offset)
        f3 = prim(relay.Function([x, w, offset], z3))

        x = relay.var("x", shape=dshape)
        y = relay.Call(f0, [x])
        y = relay.Call(f1, [y, W1])
        z2 = relay.Call(f2, [y, W3])
        z3 = relay.Call(f3, [y, W2, z2])
        return relay.Function(free_vars(z3), z3)

    dshape = (1, 16, 64, 64)
    zz = run_opt_pass(before(dshape), transform.FuseOps(fuse_opt_level=2))
    after = run_opt_pass(expected(dshape), transform.InferType())
    tvm.assert_structural_equal(zz, after)


def test_concatenate():
    def before(dshape):
        x = relay.var("x", shape=dshape)
        pooled = relay.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2), padding=(0, 0))
        upsampled = upsample(pooled)
        concat = relay.concatenate((upsampled, x), axis=1)
        out = relay.add(concat, relay.const(1, "float32"))
        return relay.Function(free_vars(out), out)

    def expected(dshape):
        x = relay.var("x", shape=dshape)
        pooled = relay.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2), padding=(0, 0))
        f0 = prim(relay.Function([x], pooled))

        p0 = relay.var("p0", shape=(dshape[0], dshape[1], dshape[2] // 2, dshape[3] // 2))
        p1 = relay.var("p1", shape=dshape)
        upsampled = upsample(p0)
        concat = relay.concatenate((upsampled, p1), axis=1)
        out = relay.add(concat, relay.const(1, "float32"))
        f1 = prim(relay.Function([p0, p1], out))

        x = relay.var("x", shape=dshape)
        y = relay.Call(f0, [x])
        z = relay.Call(f1, [y, x])
        return relay.Function([x], z)

    dshape = (1, 16, 64, 64)
    zz = run_opt_pass(before(dshape), transform.FuseOps(fuse_opt_level=0))
    assert not free_vars(zz)
    zz = run_opt_pass(before(dshape), transform.FuseOps(fuse_opt_level=2))
    assert not free_vars(zz)
    after = run_opt_pass(expected(dshape), transform.InferType())
    tvm.assert_structural_equal(zz, after)


def test_tuple_root():
    def before(dshape):
        x = relay.var("x", shape=dshape)
        pooled = relay.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2), padding=(0, 0))
        upsampled = upsample(pooled)
        out = relay.Tuple((upsampled, x))
        return relay.Function(free_vars(out), out)

    def expected(dshape):
        x = relay.var("x", shape=dshape)
        pooled = relay.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2), padding=(0, 0))
        f0 = prim(relay.Function([x], pooled))

        p0 = relay.var("p0", shape=(dshape[0], dshape[1], dshape[2] // 2, dshape[3] // 2))
        upsampled = upsample(p0)
        f1 = prim(relay.Function([p0], upsampled))

        x = relay.var("x", shape=dshape)
        y = relay.Call(f0, [x])
        z = relay.Call(f1, [y])
        return relay.Function([x], relay.Tuple((z, x)))

    dshape = (1, 16, 64, 64)
    zz = run_opt_pass(before(dshape), transform.FuseOps(fuse_opt_level=2))
    after = run_opt_pass(expected(dshape), transform.InferType())
    tvm.assert_structural_equal(zz, after)


def test_fuse_tuple_get_elemwise():
    def before(dim):
        X = relay.var("X", shape=(1, dim))
        W = relay.var("W", shape=(3 * dim, dim))
        matmul = relay.nn.dense(X, W)
        splitted = relay.split(matmul, indices_or_sections=3, axis=1)
        out = relay.sigmoid(splitted[0]) + relay.tanh(splitted[1]) * relay.exp(splitted[2])
        return relay.Function([X, W], out)

    def expected(dim):
        p0 = relay.var("p0", shape=(1, dim))
        p1 = relay.var("p1", shape=(3 * dim, dim))
        matmul = relay.nn.dense(p0, p1)
        f0 = prim(relay.Function([p0, p1], matmul))

        p01 = relay.var("p01", shape=(1, 3 * dim))
        splitted = relay.split(p01, indices_or_sections=3, axis=1)
        out = relay.sigmoid(splitted[0]) + relay.tanh(splitted[1]) * relay.exp(splitted[2])
        f1 = prim(relay.Function([p01], out))

        X = relay.var("X", shape=(1, dim))
        W = relay.var("W", shape=(3 * dim, dim))
        y = relay.Call(f0, [X, W])
        z = relay.Call(f1, [y])
        return relay.Function([X, W], z)

    zz = run_opt_pass(before(10), transform.FuseOps(fuse_opt_level=2))
    after = run_opt_pass(expected(10), transform.InferType())
    tvm.assert_structural_equal(zz, after)


def test_tuple_get_root():
    def before(dim):
        X = relay.var("X", shape=(1, 3 * dim))
        W = relay.var("W", shape=(dim, dim))
        splitted = relay.split(X, indices_or_sections=3, axis=1)
        out = relay.nn.dense(splitted[0], W)
        return relay.Function([X, W], out)

    def expected(dim):
        p0 = relay.var("p0", shape=(1, 3 * dim))
        splitted = relay.split(p0, indices_or_sections=3, axis=1)
        f0 = prim(relay.Function([p0], splitted[0]))

        p01 = relay.var("p01", shape=(1, dim))
        p1 = relay.var("p1", shape=(dim, dim))
        f1 = prim(relay.Function([p01, p1], relay.nn.dense(p01, p1)))

        X = relay.var("X", shape=(1, 3 * dim))
        W = relay.var("W", shape=(dim, dim))
        y = relay.Call(f0, [X])
        z = relay.Call(f1, [y, W])
        return relay.Function([X, W], z)

    zz = run_opt_pass(before(10), transform.FuseOps(fuse_opt_level=2))
    after = run_opt_pass(expected(10), transform.InferType())
    tvm.assert_structural_equal(zz, after)


def test_tuple_intermediate():
    def before(x):
        inj = relay.squeeze(x)
        y1 = relay.add(inj, relay.const(1, "float32"))
        tmp = relay.squeeze(inj)
        tmp = relay.add(tmp, relay.const(1, "float32"))
        y2 = relay.add(tmp, relay.const(1, "float32"))
        y3 = relay.add(inj, relay.const(1, "float32"))
        concat = relay.concatenate((y1, y2, y3), axis=1)
        out_inj = relay.squeeze(concat)
        out = relay.add(out_inj, relay.const(1, "float32"))
        return relay.Function(free_vars(out), out)

    def expected(p0):
        f1 = prim(before(p0))
        x = relay.var("x", shape=dshape)
        return relay.Function([x], relay.Call(f1, [x]))

    dshape = (1, 16, 64, 64)
    x = relay.var("x", shape=dshape)
    zz = run_opt_pass(before(x), transform.FuseOps(fuse_opt_level=2))
    after = run_opt_pass(expected(relay.var("p0", shape=dshape)), transform.InferType())
    tvm.assert_structural_equal(zz, after)


def test_inception_like():
    def conv(data, w=None):
        w = w or relay.var("w", shape=(16, data.type_annotation.shape[1]
                                       if isinstance(data, relay.Var) else 32, 3, 3))
        y = relay.nn.conv2d(data, w, kernel_size=(3, 3), padding=(1, 1), channels=16)
        return relay.nn.relu(data=y)

    ws = [relay.var(f"w{i}", shape=(16, 16 if i < 2 else 32, 3, 3)) for i in range(4)]

    def inception_like(data, w0, w1):
        return relay.concatenate((conv(data, w0), conv(data, w1)), axis=1)

    def before(dshape):
        x = relay.var("x", shape=dshape)
        out = inception_like(inception_like(x, ws[0], ws[1]), ws[2], ws[3])
        return relay.Function(free_vars(out), out)

    def expected(dshape):
        def conv_fn(shape):
            p = relay.var("p0", shape=shape)
            c = conv(p)
            return prim(relay.Function(free_vars(c), c))

        def concat_fn():
            a, b = relay.var("p0", shape=dshape), relay.var("p1", shape=dshape)
            return prim(relay.Function([a, b], relay.concatenate((a, b), axis=1)))

        dshape2 = (dshape[0], dshape[1] * 2, dshape[2], dshape[3])
        x = relay.var("x", shape=dshape)
        c1 = relay.Call(conv_fn(dshape), [x, ws[0]])
        c2 = relay.Call(conv_fn(dshape), [x, ws[1]])
        concat = relay.Call(concat_fn(), [c1, c2])
        c3 = relay.Call(conv_fn(dshape2), [concat, ws[2]])
        c4 = relay.Call(conv_fn(dshape2), [concat, ws[3]])
        out = relay.Call(concat_fn(), [c3, c4])
        return relay.Function(free_vars(out), out)

    dshape = (1, 16, 64, 64)
    zz = run_opt_pass(before(dshape), transform.FuseOps(fuse_opt_level=2))
    after = run_opt_pass(expected(dshape), transform.InferType())
    tvm.assert_structural_equal(zz, after)


def test_fuse_parallel_injective():
    """Diamond: parallel injective ops fuse into the elementwise op where they meet."""
    def before():
        x = relay.var("x", shape=(10, 20), dtype="int32")
        y = relay.add(x, relay.const(1, "int32"))
        z = relay.squeeze(y)
        u = relay.transpose(y, axes=[0, 1])
        w = relay.left_shift(z, u)
        return relay.Function([x], w)

    def expected():
        x = relay.var("p", shape=(10, 20), dtype="int32")
        y = relay.add(x, relay.const(1, "int32"))
        z = relay.squeeze(y)
        u = relay.transpose(y, axes=[0, 1])
        w = relay.left_shift(z, u)
        f1 = prim(relay.Function([x], w))
        x = relay.var("x", shape=(10, 20), dtype="int32")
        return relay.Function([x], relay.Call(f1, [x]))

    zz = run_opt_pass(before(), transform.FuseOps(fuse_opt_level=2))
    after = run_opt_pass(expected(), transform.InferType())
    tvm.assert_structural_equal(zz, after)


def _op_names(func):
    from compiler.ir.traversal import post_order
    return [[n.op.name for n in post_order(f.body) if isinstance(n, relay.Call)]
            for f in fused_functions(func)]


def test_stop_at_opaque():
    """An opaque op (nn.lrn) stands alone; the chains around it fuse."""
    x = relay.var("x", shape=(1, 4, 8, 8))
    y = relay.exp(relay.add(x, relay.const(1.0)))
    y = lrn(y)  # registered op (not yet re-exported by relay.nn)
    y = relay.nn.relu(relay.multiply(y, relay.const(2.0)))
    zz = run_opt_pass(relay.Function([x], y), transform.FuseOps(fuse_opt_level=2))
    assert _op_names(zz) == [["add", "exp"], ["nn.lrn"], ["multiply", "nn.relu"]]


def test_pool_absorbs_elementwise_epilogue():
    """max_pool2d is OUT_ELEMWISE_FUSABLE in TVM: the ops after it join it, not those before."""
    x = relay.var("x", shape=(1, 4, 8, 8))
    y = relay.exp(relay.add(x, relay.const(1.0)))
    y = relay.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    y = relay.nn.relu(relay.multiply(y, relay.const(2.0)))
    zz = run_opt_pass(relay.Function([x], y), transform.FuseOps(fuse_opt_level=2))
    assert _op_names(zz) == [["add", "exp"], ["nn.max_pool2d", "multiply", "nn.relu"]]


def test_diamond_into_conv_epilogue():
    """conv2d -> (relu, exp) -> add: the anchor absorbs the whole elementwise diamond."""
    x = relay.var("x", shape=(1, 4, 8, 8))
    w = relay.var("w", shape=(4, 4, 3, 3))
    c = relay.nn.conv2d(x, w, padding=(1, 1))
    out = relay.add(relay.nn.relu(c), relay.exp(c))
    zz = run_opt_pass(relay.Function([x, w], out), transform.FuseOps(fuse_opt_level=2))
    funcs = fused_functions(zz)
    assert len(funcs) == 1
    assert [p.checked_type.shape for p in funcs[0].params] == [(1, 4, 8, 8), (4, 4, 3, 3)]


def test_reduce_takes_elementwise_inputs():
    x = relay.var("x", shape=(8, 16))
    out = relay.sum(relay.exp(x), axis=[1])
    out = relay.sqrt(out)  # comm_reduce does not fuse into its consumer
    zz = run_opt_pass(relay.Function([x], out), transform.FuseOps(fuse_opt_level=2))
    assert [len(f.params) for f in fused_functions(zz)] == [1, 1]
    from compiler.ir.traversal import post_order
    names = [[n.op.name for n in post_order(f.body) if isinstance(n, relay.Call)]
             for f in fused_functions(zz)]
    assert names == [["exp", "sum"], ["sqrt"]]


def test_reshape_only_group_is_marked():
    x = relay.var("x", shape=(2, 3, 4))
    y = relay.nn.max_pool2d(relay.reshape(x, (1, 2, 3, 4)), pool_size=(1, 1))
    zz = run_opt_pass(relay.Function([x], y), transform.FuseOps(fuse_opt_level=2))
    first = fused_functions(zz)[0]
    assert first.get_attr("relay.reshape_only") == 1
    assert fused_functions(zz)[1].get_attr("relay.reshape_only") is None


def _exp_chain(n):
    x = relay.var("x", shape=(10, 20))
    y = x
    for _ in range(n):
        y = relay.exp(y)
    return relay.Function([x], y)


def _exp_chain_expected(n, max_fused_ops):
    x = relay.var("p", shape=(10, 20))
    y = x
    for _ in range(max_fused_ops):
        y = relay.exp(y)
    f1 = prim(relay.Function([x], y))
    x = relay.var("x", shape=(10, 20))
    z = relay.Call(f1, [x])
    xx = relay.var("pp", shape=(10, 20))
    yy = xx
    for _ in range(n - max_fused_ops):
        yy = relay.exp(yy)
    f2 = prim(relay.Function([xx], yy))
    return relay.Function([x], relay.Call(f2, [z]))


def test_fuse_max():
    zz = run_opt_pass(_exp_chain(300), transform.FuseOps())
    after = run_opt_pass(_exp_chain_expected(300, 256), transform.InferType())
    tvm.assert_structural_equal(zz, after)

    with tvm.transform.PassContext(config={"relay.FuseOps.max_depth": 10}):
        zz = run_opt_pass(_exp_chain(20), transform.FuseOps())
    after = run_opt_pass(_exp_chain_expected(20, 10), transform.InferType())
    tvm.assert_structural_equal(zz, after)


def test_link_params_keeps_constants_inline():
    import numpy as np
    x = relay.var("x", shape=(4,))
    c = relay.const(np.arange(4, dtype="float32"))
    f = relay.Function([x], relay.exp(relay.add(x, c)))
    off = fused_functions(run_opt_pass(f, transform.FuseOps(fuse_opt_level=2)))
    assert len(off) == 1 and len(off[0].params) == 2  # the tensor constant is an input
    with tvm.transform.PassContext(config={"relay.FuseOps.link_params": True}):
        on = fused_functions(run_opt_pass(f, transform.FuseOps(fuse_opt_level=2)))
    assert len(on[0].params) == 1


def test_opt_level_from_context():
    f = _exp_chain(3)
    with tvm.transform.PassContext(opt_level=0):
        zz = run_opt_pass(f, transform.FuseOps())
    assert len(fused_functions(zz)) == 3
    with tvm.transform.PassContext(opt_level=2):
        zz = run_opt_pass(f, transform.FuseOps())
    assert len(fused_functions(zz)) == 1


def test_long_chain_no_recursion():
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        zz = run_opt_pass(_exp_chain(10000), transform.FuseOps())
    finally:
        sys.setrecursionlimit(limit)
    assert len(fused_functions(zz)) == (10000 + 255) // 256


def test_immutable():
    x = relay.var("x", shape=(10, 20))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.exp(relay.add(x, relay.const(1.0)))))
    mod = transform.InferType()(mod)
    before_text = mod.astext()
    new_mod = transform.FuseOps(fuse_opt_level=2)(mod)
    assert mod.astext() == before_text
    assert len(fused_functions(new_mod["main"])) == 1


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_no_free_vars_after_fusion(level):
    x = relay.var("x", shape=(1, 16, 8, 8))
    y = relay.concatenate((relay.nn.relu(x), x), axis=1)
    zz = run_opt_pass(relay.Function([x], y), transform.FuseOps(fuse_opt_level=level))
    assert not free_vars(zz)
    for f in fused_functions(zz):
        assert f.is_primitive and not free_vars(f)
