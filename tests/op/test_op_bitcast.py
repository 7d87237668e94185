"""reinterpret (relay.reinterpret, ONNX BitCast): type relation, reference, compiled kernel."""
from __future__ import annotations

import numpy as np
import pytest

from tests.op._opcheck import check, infer
from compiler import relay
from compiler.errors import TypeInferenceError
from compiler.ir.expr import var
from compiler.op.registry import OpPattern, get_def

OPS_TESTED = {"reinterpret"}
RNG = np.random.default_rng(26)

PAIRS = [("float32", "int32"), ("int32", "float32"), ("float64", "int64"), ("int64", "float64"),
         ("uint32", "int32"), ("int8", "uint8"), ("uint16", "int16"), ("float16", "uint16"),
         ("int16", "float16"), ("bool", "uint8"), ("float32", "uint32"), ("uint64", "float64")]


def _data(dtype: str, shape=(3, 5)) -> np.ndarray:
    if dtype == "bool":
        return RNG.random(shape) > 0.5
    if dtype.startswith("float"):
        x = RNG.standard_normal(shape).astype(dtype)
        x.flat[:3] = [np.nan, -np.inf, -0.0]
        return x
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def _compile_run(expr, **inputs):
    from runtime import cpu, graph_executor
    mod = relay.IRModule.from_expr(relay.Function(relay.analysis.free_vars(expr), expr))
    module = graph_executor.GraphModule(relay.build(mod, target="llvm")["default"](cpu(0)))
    for name, value in inputs.items():
        module.set_input(name, value)
    module.run()
    return module.get_output(0).numpy()


@pytest.mark.parametrize("src,dst", PAIRS)
def test_reference_is_a_view(src, dst):
    x = _data(src)
    out = check(relay.reinterpret(var("x", shape=x.shape, dtype=src), dst), x)
    np.testing.assert_array_equal(out.view(np.uint8), x.view(np.uint8))
    assert out.dtype == np.dtype(dst)


def test_type_relation_and_pattern():
    ty = infer(relay.reinterpret(var("x", shape=(2, 3), dtype="float32"), "int32"))
    assert (ty.shape, ty.dtype) == ((2, 3), "int32")
    assert get_def("reinterpret").pattern == OpPattern.ELEMWISE
    assert relay.reinterpret(var("x", shape=(2,), dtype="float32"), np.int32).attrs.dtype == \
        "int32"


@pytest.mark.parametrize("src,dst", [("float32", "int64"), ("int8", "float16"),
                                     ("bool", "int32")])
def test_width_mismatch_is_a_clear_error(src, dst):
    with pytest.raises(TypeInferenceError, match=r"reinterpret: .*equal widths"):
        infer(relay.reinterpret(var("x", shape=(2,), dtype=src), dst))


@pytest.mark.parametrize("src,dst", PAIRS)
def test_compiled_bits_match_numpy_view(src, dst):
    x = _data(src)
    got = _compile_run(relay.reinterpret(var("x", shape=x.shape, dtype=src), dst), x=x)
    want = x.view(dst)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_fused_with_arithmetic():
    """float32 bits -> int32, shifted to the exponent field, as a fused elementwise chain."""
    x = np.abs(_data("float32")) + np.float32(1)
    xv = var("x", shape=x.shape, dtype="float32")
    expr = relay.right_shift(relay.reinterpret(relay.multiply(xv, xv), "int32"),
                             relay.const(np.int32(23)))
    np.testing.assert_array_equal(_compile_run(expr, x=x), (x * x).view(np.int32) >> 23)


def test_float16_bits_survive_a_float16_stage():
    """A half computed by a float16 op, read as uint16: its bits, not a float32 widening's."""
    x = _data("float16")
    xv = var("x", shape=x.shape, dtype="float16")
    expr = relay.reinterpret(relay.add(xv, xv), "uint16")
    with np.errstate(all="ignore"):
        want = (x + x).view(np.uint16)
    got = _compile_run(expr, x=x)
    nan = np.isnan(x + x)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    assert np.isnan(got[nan].view(np.float16)).all()
