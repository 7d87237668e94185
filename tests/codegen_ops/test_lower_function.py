"""lower_primitive_function: fused chains against composed references, tuples, constants,
errors, and the coverage rule (every registered op has a compute rule and a test)."""
from __future__ import annotations

import importlib.util
import math
import pathlib

import numpy as np
import pytest

from codegen.options import CodegenOptions
from codegen.errors import LoweringError
from compiler.op.compute.lower_function import lower_primitive_function
from compiler.ir.expr import Function, Tuple, TupleGetItem, const, var
from compiler.ir.types import TensorType, TupleType
from compiler.op.registry import get_def, list_ops, make_call
from compiler.ir.type_infer import InferTypeLocal
from tests.codegen_ops.lowering_harness import compile_function, rand

OPS_TESTED: set = set()


def call(op, *args, **attrs):
    return make_call(op, list(args), **attrs)


def v(name, shape, dtype="float32"):
    return var(name, TensorType(shape, dtype))


def ref(op, inputs, **attrs):
    from compiler.ir.attrs import Attrs
    opdef = get_def(op)
    full = {k: attrs.get(k, d) for k, d in opdef.attrs.items()}
    return opdef.reference(inputs, Attrs(full))


_CONV = dict(strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1)


def test_conv_bias_relu():
    x, w, b = v("x", (1, 3, 6, 6)), v("w", (4, 3, 3, 3)), v("b", (4,))
    body = call("nn.relu", call("nn.bias_add", call("nn.conv2d", x, w, **_CONV), b, axis=1))
    run = compile_function([x, w, b], body)
    xs, ws, bs = rand((1, 3, 6, 6), seed=1), rand((4, 3, 3, 3), seed=2), rand((4,), seed=3)
    conv = ref("nn.conv2d", [xs, ws], **_CONV)
    want = np.maximum(conv + bs.reshape(1, 4, 1, 1), 0)
    np.testing.assert_allclose(run(xs, ws, bs)[0], want, rtol=1e-4, atol=1e-4)
    text = str(run.primfunc)
    # the conv schedule's micro-kernel applies bias+relu to each tile: no separate stage
    assert "relayjit.ukr." in text and "T_bias_add" not in text
    assert "allocate T_conv2d[" not in text  # the conv output never lands in its own buffer


def test_dense_add_gelu_erf():
    x, w, b = v("x", (3, 8)), v("w", (5, 8)), v("b", (5,))
    d = call("add", call("nn.dense", x, w, units=None, out_dtype=""), b)
    half, inv_sqrt2 = const(0.5), const(1.0 / math.sqrt(2.0))
    gelu = call("multiply", call("multiply", d, half),
                call("add", const(1.0), call("erf", call("multiply", d, inv_sqrt2))))
    run = compile_function([x, w, b], gelu)
    xs, ws, bs = rand((3, 8), seed=4), rand((5, 8), seed=5), rand((5,), seed=6)
    dd = xs.astype("float64") @ ws.astype("float64").T + bs
    want = 0.5 * dd * (1 + np.vectorize(math.erf)(dd / math.sqrt(2)))
    np.testing.assert_allclose(run(xs, ws, bs)[0], want, rtol=1e-4, atol=1e-5)


def test_broadcast_chain_single_loop_nest():
    a, b, c = v("a", (4, 1, 5)), v("b", (3, 1)), v("c", (5,))
    body = call("maximum", call("subtract", call("multiply", a, b), c), const(0.25))
    run = compile_function([a, b, c], body)
    xa, xb, xc = rand((4, 1, 5), seed=7), rand((3, 1), seed=8), rand((5,), seed=9)
    np.testing.assert_allclose(run(xa, xb, xc)[0], np.maximum(xa * xb - xc, 0.25), rtol=1e-6)
    assert "allocate" not in str(run.primfunc).lower()


def test_reduction_fed_by_elementwise():
    x, y = v("x", (4, 6)), v("y", (6,))
    body = call("mean", call("exp", call("subtract", x, y)), axis=[1], keepdims=True,
                exclude=False)
    run = compile_function([x, y], body)
    xs, ys = rand((4, 6), seed=10), rand((6,), seed=11)
    np.testing.assert_allclose(run(xs, ys)[0], np.exp(xs - ys).mean(1, keepdims=True),
                               rtol=1e-5)


def test_softmax_after_add():
    x, y = v("x", (2, 7)), v("y", (2, 7))
    run = compile_function([x, y], call("nn.softmax", call("add", x, y), axis=-1))
    xs, ys = rand((2, 7), seed=12, lo=-40, hi=40), rand((2, 7), seed=13, lo=-40, hi=40)
    want = ref("nn.softmax", [xs + ys], axis=-1)
    np.testing.assert_allclose(run(xs, ys)[0], want, rtol=1e-5, atol=1e-7)


def test_tuple_output_and_getitem_and_scalar_const():
    x = v("x", (6, 4))
    parts = call("split", x, indices_or_sections=3, axis=0)
    body = Tuple([call("add", TupleGetItem(parts, 2), const(1.5)),
                  call("negative", TupleGetItem(parts, 0)), x])
    run = compile_function([x], body)
    xs = rand((6, 4), seed=14)
    got = run(xs)
    np.testing.assert_allclose(got[0], xs[4:] + 1.5)
    np.testing.assert_allclose(got[1], -xs[:2])
    np.testing.assert_allclose(got[2], xs)  # a parameter returned as an output is copied


def test_concat_of_tuple_built_in_body():
    x, y = v("x", (2, 3)), v("y", (2, 2))
    body = call("concatenate", Tuple([call("exp", x), y, x]), axis=1)
    run = compile_function([x, y], body)
    xs, ys = rand((2, 3), seed=15), rand((2, 2), seed=16)
    np.testing.assert_allclose(run(xs, ys)[0], np.concatenate([np.exp(xs), ys, xs], 1),
                               rtol=1e-6)


def _lower(params, body, name="f"):
    func = Function(params, body).with_attr("Primitive", 1)
    InferTypeLocal(func)
    return lower_primitive_function(func, name, CodegenOptions.host())


def test_tensor_constant_is_compiled_into_the_kernel():
    # what FuseOps leaves inside a primitive function with relay.FuseOps.link_params on
    x = v("x", (3,))
    table = np.array([1.5, -2.0, 4.0], "float32")
    run = compile_function([x], call("add", x, const(table)))
    xs = rand((3,), seed=17)
    np.testing.assert_allclose(run(xs)[0], xs + table, rtol=1e-6)


def test_tuple_param_is_an_error():
    t = var("t", TupleType([TensorType((2,)), TensorType((2,))]))
    with pytest.raises(LoweringError, match=r"lowering g > parameter %t: .*tuple"):
        _lower([t], TupleGetItem(t, 0), "g")


def test_missing_compute_rule_names_the_op():
    x = v("x", (3,))
    opdef = get_def("exp")
    saved, opdef.compute = opdef.compute, None
    try:
        with pytest.raises(LoweringError, match=r"lowering h > exp: no compute rule"):
            _lower([x], call("exp", x), "h")
    finally:
        opdef.compute = saved


def test_rule_error_carries_context():
    x = v("x", (3,), "bool")
    with pytest.raises(LoweringError, match=r"lowering k > sum: sum of a bool tensor"):
        _lower([x], call("sum", x, axis=None, keepdims=False, exclude=False), "k")


def test_unsupported_dtype_is_a_lowering_error():
    x = v("x", (3,), "complex64")
    with pytest.raises(LoweringError, match=r"lowering m > parameter %x"):
        _lower([x], call("copy", x), "m")


def test_long_chain_no_recursion():
    x = v("x", (8,))
    body = x
    for _ in range(3000):
        body = call("negative", body)
    run = compile_function([x], body)
    xs = rand((8,), seed=17)
    np.testing.assert_array_equal(run(xs)[0], xs)


def test_every_op_has_a_compute_rule_and_a_test():
    """A compute rule, or a strategy (the packed and blocked anchors have only schedules), or
    a canonical form the lowering expands (the decomposed QNN ops)."""
    import compiler.op.compute  # noqa: F401
    from compiler.op.registry import CANONICALIZE
    from compiler.op.strategy import STRATEGY
    missing_rule = [op for op in list_ops() if get_def(op).compute is None
                    and get_def(op).get_attr(STRATEGY) is None
                    and get_def(op).get_attr(CANONICALIZE) is None]
    tested: set = set()
    tests_dir = pathlib.Path(__file__).parent.parent
    for path in [*tests_dir.glob("codegen_ops/test_*.py"), *tests_dir.glob("op/test_*.py")]:
        spec = importlib.util.spec_from_file_location(f"_cov_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        tested |= set(getattr(module, "OPS_TESTED", ()))
    missing_test = [op for op in list_ops() if op not in tested]
    assert not missing_rule, f"ops without a compute rule: {missing_rule}"
    assert not missing_test, f"ops without a lowering test: {missing_test}"
