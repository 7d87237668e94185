"""float16 kernels: half storage, float32 arithmetic rounded per op, numpy's casts and results."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import te, tir
from codegen.jit import build_te
from compiler.ir.attrs import Attrs
from compiler.op.registry import get_def

RNG = np.random.default_rng(16)
N = 257
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 65504.0, -65504.0, 6.1e-5, 6e-8, 1.0,
                    -2.5, 0.5, 1.5, 2.5, 255.5, -128.5, 70000.0], np.float64)
with np.errstate(over="ignore"):
    SPECIAL16 = SPECIAL.astype(np.float16)  # 70000 overflows to inf


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


def _data(n: int = N, scale: float = 4.0) -> np.ndarray:
    return (RNG.standard_normal(n) * scale).astype(np.float16)


def test_chain_rounds_after_every_op() -> None:
    """A fused chain of stages rounds each stage's result to half, as numpy's per-op float16."""
    A = te.placeholder((N,), "float16", "A")
    B = te.placeholder((N,), "float16", "B")
    mul = te.compute((N,), lambda i: A[i] * B[i], name="mul")
    add = te.compute((N,), lambda i: mul[i] + A[i], name="add")
    sub = te.compute((N,), lambda i: add[i] - tir.const(0.1, "float16"), name="sub")
    div = te.compute((N,), lambda i: sub[i] / B[i], name="div")
    run = build_te([A, B], [div])
    a, b = _data(), _data() + np.float16(9)
    with np.errstate(all="ignore"):
        want = (a * b + a - np.float16(0.1)) / b
    _same(run(a, b)[0], want)
    assert "float16" in str(run.primfunc)  # one loop nest, rounding inside it


def test_one_stage_computes_in_float32() -> None:
    """Inside one stage (one op) float16 values are computed in float32 and rounded once."""
    A = te.placeholder((N,), "float16", "A")
    out = te.compute((N,), lambda i: A[i] * A[i] * A[i] + A[i], name="poly")
    a = _data(scale=3.0)
    af = a.astype(np.float32)
    _same(build_te([A], [out])(a)[0], (af * af * af + af).astype(np.float16))


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "sigmoid", "erf", "sin", "cos",
                                  "floor", "ceil", "round", "trunc", "abs", "sign", "atan"])
def test_math_in_float32_then_rounded(name: str) -> None:
    A = te.placeholder((N,), "float16", "A")
    out = te.compute((N,), lambda i: tir.call(name, A[i]), name=name)
    a = _data(scale=3.0)
    if name in ("log", "sqrt"):
        a = np.abs(a) + np.float16(0.01)
    ref = {"sigmoid": lambda v: 1 / (1 + np.exp(-v)), "abs": np.abs, "atan": np.arctan,
           "erf": np.vectorize(__import__("math").erf), "round": np.round}
    fn = ref.get(name, getattr(np, name, None))
    want = np.asarray(fn(a.astype(np.float64))).astype(np.float16)
    got = build_te([A], [out])(a)[0]
    assert got.dtype == np.float16
    # float32 polynomials are ~1 float32 ulp: at most one half ulp off near a rounding tie
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3,
                               atol=1e-6)


@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite"])
def test_predicates(name: str) -> None:
    A = te.placeholder((SPECIAL.size,), "float16", "A")
    out = te.compute(A.shape, lambda i: tir.call(name, A[i]), name=name)
    a = SPECIAL16
    _same(build_te([A], [out])(a)[0], getattr(np, name)(a))


@pytest.mark.parametrize("src", ["float32", "float64", "int8", "int32", "int64", "uint8",
                                 "uint16", "uint64", "bool"])
def test_cast_to_float16_matches_numpy(src: str) -> None:
    if src.startswith("float"):
        wide = RNG.standard_normal(4000) * np.exp(RNG.uniform(-25, 12, 4000))
        values = np.concatenate([SPECIAL, wide]).astype(src)
        # halfway cases between halves: round to even, and float64 values just off a tie
        ties = np.float16(RNG.standard_normal(200)).astype(np.float64)
        eps = np.spacing(ties.astype(np.float16)).astype(np.float64) / 2
        values = np.concatenate([values, (ties + eps).astype(src), (ties + eps * (1 + 2.0**-40))
                                 .astype(src), (ties - eps * (1 + 2.0**-40)).astype(src)])
    elif src == "bool":
        values = RNG.random(64) > 0.5
    else:
        info = np.iinfo(src)
        values = RNG.integers(max(info.min, -70000), min(info.max, 70000), 4000).astype(src)
    X = te.placeholder(values.shape, src, "X")
    Y = te.compute(values.shape, lambda i: tir.cast(X[i], "float16"), name="Y")
    with np.errstate(all="ignore"):
        want = values.astype(np.float16)
    _same(build_te([X], [Y])(values)[0], want)


@pytest.mark.parametrize("dst", ["float32", "float64", "int8", "int32", "int64", "uint8",
                                 "uint64", "bool"])
def test_cast_from_float16_matches_numpy(dst: str) -> None:
    values = np.concatenate([SPECIAL16, (RNG.standard_normal(500) * 300).astype(np.float16)])
    X = te.placeholder(values.shape, "float16", "X")
    Y = te.compute(values.shape, lambda i: tir.cast(X[i], dst), name="Y")
    with np.errstate(all="ignore"):
        want = values.astype(dst)
    _same(build_te([X], [Y])(values)[0], want)


def test_comparisons_and_where() -> None:
    A = te.placeholder((N,), "float16", "A")
    B = te.placeholder((N,), "float16", "B")
    lt = te.compute((N,), lambda i: tir.lt(A[i], B[i]), name="lt")
    ne = te.compute((N,), lambda i: tir.ne(A[i], B[i]), name="ne")
    pick = te.compute((N,), lambda i: tir.select(lt[i], A[i], B[i] * B[i]), name="pick")
    a, b = _data(), _data()
    a[:3], b[:3] = np.nan, [1.0, np.nan, 2.0]
    got = build_te([A, B], [lt, ne, pick])(a, b)
    _same(got[0], a < b)
    _same(got[1], a != b)
    _same(got[2], np.where(a < b, a, b * b))


def test_constants_are_half_values() -> None:
    assert tir.const(0.1, "float16").value == float(np.float16(0.1))
    assert tir.const(1e6, "float16").value == float("inf")


def _reduce(op: str, x: np.ndarray, axis: int) -> np.ndarray:
    ref = get_def(op).reference([x], Attrs({"axis": [axis], "keepdims": False,
                                            "exclude": False}))
    return ref


@pytest.mark.parametrize("kind", ["sum", "max", "min", "prod"])
def test_reductions_accumulate_in_float32(kind: str) -> None:
    """The registry's reference (float64 accumulation, one rounding) is matched exactly."""
    x = (RNG.standard_normal((6, 300)) * (0.5 if kind == "prod" else 8)).astype(np.float16)
    if kind == "prod":
        x = (np.float16(1) + x / np.float16(50)).astype(np.float16)
    X = te.placeholder(x.shape, "float16", "X")
    fn = getattr(te, kind)

    def body(i):
        k = te.reduce_axis(x.shape[1], "k")
        return fn(X[i, k], k)
    out = te.compute((x.shape[0],), body, name=kind)
    got = build_te([X], [out])(x)[0]
    want = _reduce(kind, x, 1)
    assert got.dtype == np.float16 == want.dtype
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3)


def test_argmax_over_float16() -> None:
    x = _data(64).reshape(4, 16)
    x[1, 3] = np.nan
    X = te.placeholder(x.shape, "float16", "X")

    def body(i):
        k = te.reduce_axis(16, "k")
        return te.argmax(X[i, k], k, "int32")
    got = build_te([X], [te.compute((4,), body, name="am")])(x)[0]
    _same(got, np.argmax(x, axis=1).astype(np.int32))


def _relay_run(expr, **inputs):
    from compiler import relay
    from runtime import cpu, graph_executor
    mod = relay.IRModule.from_expr(relay.Function(relay.analysis.free_vars(expr), expr))
    module = graph_executor.GraphModule(relay.build(mod, target="llvm")["default"](cpu(0)))
    for name, value in inputs.items():
        module.set_input(name, value)
    module.run()
    return module.get_output(0).numpy()


@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax", "sum", "mean"])
def test_softmax_and_reductions_match_the_registry(op: str) -> None:
    from compiler import relay
    x = relay.var("x", shape=(3, 700), dtype="float16")
    data = (RNG.standard_normal((3, 700)) * 3).astype(np.float16)
    ctor = {"nn.softmax": lambda v: relay.nn.softmax(v, axis=-1),
            "nn.log_softmax": lambda v: relay.nn.log_softmax(v, axis=-1),
            "sum": lambda v: relay.sum(v, axis=1), "mean": lambda v: relay.mean(v, axis=1)}[op]
    call = ctor(x)
    got = _relay_run(call, x=data)
    want = get_def(op).reference([data], call.attrs)
    assert got.dtype == want.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3,
                               atol=1e-6)


def test_fused_relay_chain_rounds_per_op() -> None:
    """add -> multiply -> exp -> subtract fuse into one kernel and still round per op."""
    from compiler import relay
    a = relay.var("a", shape=(N,), dtype="float16")
    b = relay.var("b", shape=(N,), dtype="float16")
    expr = relay.subtract(relay.exp(relay.multiply(relay.add(a, b), b)), a)
    av, bv = (_data(scale=1.0), _data(scale=1.0))
    got = _relay_run(expr, a=av, b=bv)
    with np.errstate(all="ignore"):
        step = (av + bv) * bv
        want = np.exp(step.astype(np.float32)).astype(np.float16) - av
    _same(got, want)
