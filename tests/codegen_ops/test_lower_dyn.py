"""The dyn.* ops lowered at concrete output shapes (as the VM specialises them) against their
numpy references; shape-like inputs are read by the kernels at run time."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from codegen.errors import LoweringError
from codegen.options import CodegenOptions
from codegen.jit import build_library
from compiler.ir.expr import Function, var
from compiler.ir.type_infer import InferTypeLocal
from compiler.ir.types import FuncType, TensorType, TupleType
from compiler.op.compute.lower_function import lower_primitive_function
from compiler.op.registry import get_def, make_call

OPS_TESTED = {"dyn.reshape", "dyn.broadcast_to", "dyn.strided_slice", "dyn.tile", "dyn.zeros",
              "dyn.ones", "dyn.full", "dyn.topk", "dyn.one_hot", "dyn.expand_dims",
              "dyn.squeeze", "dyn.nn.pad", "dyn.nn.upsampling", "dyn.sum", "dyn.mean",
              "dyn.max", "dyn.min", "dyn.prod"}
_ids = itertools.count()


def _concrete_function(op: str, inputs: list, **attrs):
    params = [var(f"in{k}", TensorType(a.shape, a.dtype.name)) for k, a in enumerate(inputs)]
    call = make_call(op, params, **attrs)
    func = Function(params, call).with_attr("Primitive", 1)
    InferTypeLocal(func)
    ref = get_def(op).reference(inputs, call.attrs)
    outs = list(ref) if isinstance(ref, tuple) else [ref]
    types = [TensorType(o.shape, o.dtype.name) for o in outs]
    ret = TupleType(types) if isinstance(ref, tuple) else types[0]
    call._set_checked_type(ret)  # the shapes the shape program computes at run time
    func._set_checked_type(FuncType([p.checked_type for p in params], ret))
    return func, outs


def check(op: str, inputs: list, rtol: float = 0.0, **attrs):
    inputs = [np.asarray(a) for a in inputs]
    func, want = _concrete_function(op, inputs, **attrs)
    name = f"dyn_kernel_{next(_ids)}"
    options = CodegenOptions.host()
    kernel = build_library([lower_primitive_function(func, name, options)], options=options)[name]
    got = [np.empty(w.shape, w.dtype) for w in want]
    kernel(*[np.ascontiguousarray(a) for a in inputs], *got)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=0)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def i64(*values):
    return np.array(values, dtype="int64")


@pytest.mark.parametrize("newshape", [(2, -1, 3), (0, 2, 3), (24,)])
def test_reshape(newshape):
    check("dyn.reshape", [rand(4, 6), i64(*newshape)])


def test_broadcast_tile_and_fills():
    check("dyn.broadcast_to", [rand(3, 1), i64(2, 3, 4)])
    check("dyn.tile", [rand(2, 3), i64(2, 1, 2)])
    check("dyn.zeros", [i64(2, 3)], dtype="float32")
    check("dyn.ones", [i64(4)], dtype="int32")
    check("dyn.full", [np.array(2.5, "float32"), i64(2, 3)])


@pytest.mark.parametrize("begin, end, strides, mode", [
    ((1, 0), (4, 6), (1, 2), "end"), ((4,), (-7,), (-2,), "end"), ((-3, 1), (9, -1), (1, 1),
                                                                   "end"),
    ((1, 2), (2, 3), (1, 1), "size"), ((-2,), (-1,), (1,), "size")])
def test_strided_slice_reads_begin_and_strides_at_run_time(begin, end, strides, mode):
    check("dyn.strided_slice", [rand(5, 6, 7), i64(*begin), i64(*end), i64(*strides)],
          slice_mode=mode)


def test_topk_one_hot_and_reshapes():
    x = rand(2, 7, seed=3)
    check("dyn.topk", [x, np.array(3, "int32")], axis=-1, ret_type="both")
    check("dyn.topk", [x, np.array(9, "int32")], axis=1, ret_type="values", is_ascend=True)
    check("dyn.one_hot", [np.array([[0, 4], [2, 7], [-1, 1]], "int32"), np.array(1.0, "float32"),
                          np.array(0.0, "float32"), np.array(5, "int32")], axis=1,
          dtype="float32")
    check("dyn.expand_dims", [rand(2, 3), np.array(1, "int32")], num_newaxis=2)
    check("dyn.squeeze", [rand(2, 1, 3, 1), i64(-1, 1)])


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_reads_widths_at_run_time(mode):
    widths = np.array([[0, 0], [1, 2], [2, 1]], "int64")
    check("dyn.nn.pad", [rand(2, 3, 4), widths, np.array(-1.5, "float32")], pad_mode=mode)
    if mode == "constant":  # negative widths crop
        check("dyn.nn.pad", [rand(2, 5), np.array([[-1, 2], [1, -2]], "int64"),
                             np.array(0.0, "float32")])


@pytest.mark.parametrize("method", ["nearest_neighbor", "bilinear"])
def test_upsampling(method):
    check("dyn.nn.upsampling", [rand(1, 2, 3, 4), np.array(2.0, "float32"),
                                np.array(3.0, "float32")], method=method)


@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("axes", [(1,), (-1, 0), (1, 2), ()])
def test_reductions_find_their_axes_from_the_shapes(kind, axes):
    """Axis 1 of size 1 is reduced or not alike; the others must be found from the 1s."""
    x = rand(2, 1, 3, 4, seed=5)
    check(f"dyn.{kind}", [x, np.array(axes, "int64")], rtol=1e-6)  # float64 references
    if kind in ("sum", "max"):
        check(f"dyn.{kind}", [np.arange(24, dtype="int32").reshape(2, 3, 4), i64(2, 0)])


def test_a_dynamic_output_type_is_a_clear_lowering_error():
    x, s = var("x", TensorType((4, 6))), var("s", TensorType((2,), "int64"))
    func = Function([x, s], make_call("dyn.broadcast_to", [x, s])).with_attr("Primitive", 1)
    InferTypeLocal(func)
    with pytest.raises(LoweringError, match=r"dyn.broadcast_to: lowering needs the output "
                                            r"shape.*specialise"):
        lower_primitive_function(func, "f", CodegenOptions.host())
