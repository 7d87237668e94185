"""scatter_elements / scatter_nd: type relations, references against naive loops, native code."""
from __future__ import annotations

import numpy as np
import pytest

from tests.op._opcheck import check, infer
from compiler.errors import TypeInferenceError
from compiler.ir.expr import Function, var
from compiler.ir.module import IRModule
from compiler.op.registry import OpPattern, get_def
from compiler.op.scatter import scatter_elements, scatter_nd

RNG = np.random.default_rng(7)
COMBINE = {"update": lambda a, b: b, "add": lambda a, b: a + b, "mul": lambda a, b: a * b,
           "min": min, "max": max}


def naive_scatter_elements(data, indices, updates, axis, reduction):
    out = data.copy()
    for j in np.ndindex(*indices.shape):
        target = list(j)
        k = int(indices[j])
        target[axis] = k + data.shape[axis] if k < 0 else k
        out[tuple(target)] = COMBINE[reduction](out[tuple(target)], updates[j])
    return out


def naive_scatter_nd(data, indices, updates, mode):
    """indices [M, Y...] (TVM layout); updates [Y..., data.shape[M:]]."""
    out = data.copy()
    m = indices.shape[0]
    for y in np.ndindex(*indices.shape[1:]):
        lead = tuple(int(indices[(k,) + y]) % data.shape[k] for k in range(m))
        for rest in np.ndindex(*data.shape[m:]):
            out[lead + rest] = COMBINE[mode](out[lead + rest], updates[y + rest])
    return out


def _build_run(expr, feeds: dict) -> np.ndarray:
    from compiler import relay
    from compiler.analysis import free_vars
    from runtime import cpu, graph_executor
    mod = IRModule.from_expr(Function(free_vars(expr), expr))
    module = graph_executor.GraphModule(relay.build(mod, target="llvm")["default"](cpu(0)))
    for name, value in feeds.items():
        module.set_input(name, value)
    module.run()
    return module.get_output(0).numpy()


def _elements_case(dtype: str, axis: int):
    data = (RNG.standard_normal((4, 5)) * 4).astype(dtype)
    # duplicates and negative indices on purpose: order of application matters
    indices = RNG.integers(-4 if axis == 0 else -5, 4 if axis == 0 else 5, (3, 5))
    updates = (RNG.standard_normal((3, 5)) * 4).astype(dtype)
    return data, indices.astype("int64"), updates


@pytest.mark.parametrize("reduction", ["update", "add", "mul", "min", "max"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("axis", [0, 1])
def test_scatter_elements_reference_and_native(reduction, dtype, axis):
    data, indices, updates = _elements_case(dtype, axis)
    if axis == 1:
        indices = indices[:, :4]
        updates = updates[:, :4]
    d, i, u = (var("d", shape=data.shape, dtype=dtype), var("i", shape=indices.shape,
               dtype="int64"), var("u", shape=updates.shape, dtype=dtype))
    call = scatter_elements(d, i, u, axis=axis, reduction=reduction)
    want = naive_scatter_elements(data, indices, updates, axis, reduction)
    np.testing.assert_allclose(check(call, data, indices, updates), want, rtol=1e-6)
    got = _build_run(call, {"d": data, "i": indices, "u": updates})
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("mode", ["update", "add", "mul", "min", "max"])
@pytest.mark.parametrize("data_shape,m,y", [((4, 4, 4), 1, (2,)), ((4, 4, 4), 2, (3,)),
                                            ((5, 3), 2, (2, 2)), ((6,), 1, (4,))])
def test_scatter_nd_reference_and_native(mode, data_shape, m, y):
    data = RNG.standard_normal(data_shape).astype("float32")
    indices = np.stack([RNG.integers(-data_shape[k], data_shape[k], y) for k in range(m)])
    updates = RNG.standard_normal(y + data_shape[m:]).astype("float32")
    d, i, u = (var("d", shape=data.shape), var("i", shape=indices.shape, dtype="int64"),
               var("u", shape=updates.shape))
    call = scatter_nd(d, i, u, mode=mode)
    want = naive_scatter_nd(data, indices, updates, mode)
    np.testing.assert_allclose(check(call, data, indices, updates), want, rtol=1e-6)
    np.testing.assert_allclose(_build_run(call, {"d": data, "i": indices, "u": updates}), want,
                               rtol=1e-6)


def test_scatter_update_last_duplicate_wins():
    data = np.zeros(3, np.float32)
    indices = np.array([1, 1, 1], np.int64)
    updates = np.array([5, 6, 7], np.float32)
    call = scatter_elements(var("d", shape=(3,)), var("i", shape=(3,), dtype="int64"),
                            var("u", shape=(3,)))
    assert check(call, data, indices, updates).tolist() == [0, 7, 0]
    assert _build_run(call, {"d": data, "i": indices, "u": updates}).tolist() == [0, 7, 0]


def test_scatter_ops_are_opaque_and_typed_as_data():
    assert get_def("scatter_elements").pattern == OpPattern.OPAQUE
    assert get_def("scatter_nd").pattern == OpPattern.OPAQUE
    call = scatter_nd(var("d", shape=(4, 3)), var("i", shape=(1, 2), dtype="int32"),
                      var("u", shape=(2, 3)))
    ty = infer(call)
    assert (ty.shape, ty.dtype) == ((4, 3), "float32")


@pytest.mark.parametrize("build,needle", [
    (lambda: scatter_elements(var("d", shape=(3, 3)), var("i", shape=(2, 3), dtype="float32"),
                              var("u", shape=(2, 3))), "integer"),
    (lambda: scatter_elements(var("d", shape=(3, 3)), var("i", shape=(2, 3), dtype="int64"),
                              var("u", shape=(2, 2))), "same shape"),
    (lambda: scatter_elements(var("d", shape=(3, 3)), var("i", shape=(2, 3), dtype="int64"),
                              var("u", shape=(2, 3)), reduction="mean"), "reduction"),
    (lambda: scatter_nd(var("d", shape=(3, 3)), var("i", shape=(3, 2), dtype="int64"),
                        var("u", shape=(2,))), "exceeds the rank"),
    (lambda: scatter_nd(var("d", shape=(3, 3)), var("i", shape=(1, 2), dtype="int64"),
                        var("u", shape=(2, 2))), "updates must have shape (2, 3)"),
])
def test_scatter_type_errors_name_the_problem(build, needle):
    with pytest.raises(TypeInferenceError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        infer(build())
