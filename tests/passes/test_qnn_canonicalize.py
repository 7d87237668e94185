"""relay.qnn.transform.CanonicalizeOps and Legalize: the rewritten programs compute the same
bits as the QNN ops (interpreter and compiled), and have the expected form."""
from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.errors import CompilerError
from compiler.ir import assert_structural_equal
from compiler.ir.traversal import post_order
from compiler.op.interpreter import evaluate
from compiler.target import Target
from tests.passes._helpers import run_opt_pass

RNG = np.random.default_rng(5)


def _v(name, shape, dtype):
    return relay.var(name, shape=shape, dtype=dtype)


def _c(value, dtype):
    return relay.const(np.asarray(value, dtype))


def _ints(shape, dtype):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def _qnn_ops(expr) -> set:
    return {n.op.name for n in post_order(expr) if isinstance(n, relay.Call)
            and isinstance(n.op, relay.Op) and n.op.name.startswith("qnn.")}


def _programs():
    x, q = _v("x", (2, 6), "float32"), _v("q", (2, 6), "int8")
    a, u = _v("a", (2, 6), "int32"), _v("u", (2, 6), "uint8")
    s6, z6 = _c(RNG.random(6) + 0.05, "float32"), _c(np.arange(6) + 10, "int32")
    d, w = _v("d", (1, 3, 6, 6), "uint8"), _v("w", (4, 3, 3, 3), "int8")
    yield "quantize", relay.qnn.op.quantize(x, s6, z6, axis=1, out_dtype="uint8")
    yield "dequantize", relay.qnn.op.dequantize(q, s6, z6, axis=1)
    for compute in ("int64", "float32"):
        for rounding in ("UPWARD", "TONEAREST", "TONEAREST_EVEN"):
            yield f"requantize {compute} {rounding}", relay.qnn.op.requantize(
                a, s6, _c(3, "int32"), _c(0.75, "float32"), _c(-4, "int32"), axis=1,
                rounding=rounding, compute_dtype=compute, out_dtype="int8")
    yield "conv2d", relay.qnn.op.conv2d(d, w, _c(120, "int32"), _c([1, 0, -1, 2], "int32"),
                                        _c(0.1, "float32"), _c([1, 1, 1, 1], "float32"),
                                        (3, 3), 4, padding=(1, 1))
    yield "dense", relay.qnn.op.dense(u, _v("k", (3, 6), "int8"), _c(128, "int32"),
                                      _c(-1, "int32"), _c(1.0, "float32"), _c(1.0, "float32"))
    yield "add", relay.qnn.op.add(u, u, _c(0.1, "float32"), _c(3, "int32"),
                                  _c(0.2, "float32"), _c(9, "int32"), _c(0.25, "float32"),
                                  _c(1, "int32"))
    yield "concatenate", relay.qnn.op.concatenate(
        [u, u], [_c(0.1, "float32"), _c(0.3, "float32")], [_c(0, "int32"), _c(5, "int32")],
        _c(0.2, "float32"), _c(2, "int32"), axis=1)
    yield "avg_pool2d", relay.qnn.op.avg_pool2d(d, _c(0.1, "float32"), _c(100, "int32"),
                                                _c(0.3, "float32"), _c(7, "int32"), (3, 3),
                                                (2, 2), (1, 1), (1, 1))
    yield "softmax", relay.qnn.op.softmax(u, _c(0.05, "float32"), _c(128, "int32"),
                                          _c(1 / 256, "float32"), _c(0, "int32"))


@pytest.mark.parametrize("name, body", list(_programs()), ids=lambda v: v if isinstance(v, str)
                         else "")
def test_canonical_form_computes_the_same_bits(name, body):
    func = relay.Function(relay.analysis.free_vars(body), body)
    canon = run_opt_pass(func, relay.qnn.transform.CanonicalizeOps())
    assert not _qnn_ops(canon), f"{name}: QNN ops left: {_qnn_ops(canon)}"
    args = []
    for p in func.params:
        ty = p.type_annotation
        if ty.dtype.startswith("float"):
            args.append((RNG.standard_normal(ty.shape) * 40).astype(ty.dtype))
        elif ty.dtype == "int32":
            args.append(RNG.integers(-3000, 3000, ty.shape).astype("int32"))
        else:
            args.append(_ints(ty.shape, ty.dtype))
    want = evaluate(func, args)
    np.testing.assert_array_equal(evaluate(canon, args), want)
    from runtime import cpu, graph_executor
    module = graph_executor.GraphModule(relay.build(canon, target="llvm")["default"](cpu(0)))
    module.run(**{p.name_hint: a for p, a in zip(canon.params, args)})
    np.testing.assert_array_equal(module.get_output(0).numpy(), want)


def test_dense_canonical_form_is_nn_dense_over_centered_operands():
    u, k = _v("u", (2, 6), "uint8"), _v("k", (3, 6), "int8")

    def before():
        body = relay.qnn.op.dense(u, k, _c(128, "int32"), _c(-1, "int32"), _c(1.0, "float32"),
                                  _c(1.0, "float32"))
        return relay.Function([u, k], body)

    def expected():
        x = relay.subtract(relay.cast(u, "int32"), _c(128, "int32"))
        w = relay.subtract(relay.cast(k, "int32"), _c(-1, "int32"))
        return relay.Function([u, k], relay.nn.dense(x, w, out_dtype="int32"))

    got = run_opt_pass(before(), relay.qnn.transform.CanonicalizeOps())
    assert_structural_equal(got, run_opt_pass(expected(), relay.transform.InferType()))


def test_int64_requantize_needs_constant_scales():
    a, s = _v("a", (4,), "int32"), _v("s", (), "float32")
    body = relay.qnn.op.requantize(a, s, _c(0, "int32"), _c(1.0, "float32"), _c(0, "int32"),
                                   compute_dtype="int64")
    with pytest.raises(CompilerError, match="needs a constant input_scale"):
        run_opt_pass(relay.Function([a, s], body), relay.qnn.transform.CanonicalizeOps())


@pytest.mark.parametrize("dtypes", [("int8", "int8"), ("int8", "uint8"), ("uint8", "uint8"),
                                    ("uint8", "int8")])
def test_legalize_moves_operands_to_uint8_by_int8_exactly(dtypes):
    data_dtype, kernel_dtype = dtypes
    d, w = _v("d", (1, 3, 5, 5), data_dtype), _v("w", (2, 3, 3, 3), kernel_dtype)
    body = relay.qnn.op.conv2d(d, w, _c(3, "int32"), _c([4, -2], "int32"), _c(0.1, "float32"),
                               _c([1, 1], "float32"), (3, 3), 2, padding=(1, 1))
    func = relay.Function([d, w], body)
    with Target("llvm -mcpu=x86-64-v4 -mattr=+avx512vnni"):
        legal = run_opt_pass(func, relay.qnn.transform.Legalize())
    conv = [n for n in post_order(legal) if isinstance(n, relay.Call)
            and n.op.name == "qnn.conv2d"][0]
    assert (conv.args[0].checked_type.dtype, conv.args[1].checked_type.dtype) == \
        ("uint8", "int8")
    args = [_ints((1, 3, 5, 5), data_dtype), _ints((2, 3, 3, 3), kernel_dtype)]
    np.testing.assert_array_equal(evaluate(legal, args), evaluate(func, args))
    with Target("llvm -mcpu=x86-64-v3"):  # no VNNI: nothing changes
        assert run_opt_pass(func, relay.qnn.transform.Legalize()).body.args[0] is d
