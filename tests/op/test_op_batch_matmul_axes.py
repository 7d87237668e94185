"""nn.contrib_batch_matmul_axes through relay.build against a float64 numpy product: every
operand axis order, both output orders, merged output shapes, odd sizes (edge tiles in m and
n), one and several K blocks, a fused epilogue, float64 (the plain reduction), and the type
relation's errors."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from compiler import IRModule, relay
from compiler.errors import TypeInferenceError
from compiler.op.nn_batch_matmul_axes import contrib_batch_matmul_axes
from compiler.transform import PassContext
from runtime import cpu, graph_executor

OPS_TESTED = {"nn.contrib_batch_matmul_axes"}
RNG = np.random.default_rng(5)


def operand(letters: str, ext: dict, dtype: str) -> np.ndarray:
    return RNG.standard_normal(tuple(ext[c] for c in letters)).astype(dtype)


def expected(a, b, a_axes, b_axes, out_axes, out_shape=None, epilogue=None):
    a3 = np.einsum(f"{a_axes.lower()}->bmk", a.astype(np.float64))
    b3 = np.einsum(f"{b_axes.lower()}->bnk", b.astype(np.float64))
    c = np.einsum(f"bmn->{out_axes.lower()}", a3 @ b3.transpose(0, 2, 1))
    c = np.ascontiguousarray(c)
    c = c if out_shape is None else c.reshape(out_shape)
    return c if epilogue is None else epilogue(c)


def run(a, b, build_expr):
    x = relay.var("x", shape=a.shape, dtype=a.dtype.name)
    y = relay.var("y", shape=b.shape, dtype=b.dtype.name)
    with PassContext(opt_level=3):
        lib = relay.build(relay.Function([x, y], build_expr(x, y)))
    gm = graph_executor.GraphModule(lib["default"](cpu()))
    gm.run(x=a, y=b)
    return gm.get_output(0).numpy()


A_AXES = ["".join(p) for p in itertools.permutations("BMK")]
B_AXES = ["".join(p) for p in itertools.permutations("BNK")]


@pytest.mark.parametrize("a_axes", A_AXES)
@pytest.mark.parametrize("b_axes", B_AXES)
@pytest.mark.parametrize("out_axes", ["BMN", "MBN"])
def test_every_axis_order(a_axes, b_axes, out_axes):
    ext = {"B": 3, "M": 19, "N": 37, "K": 21}
    a, b = operand(a_axes, ext, "float32"), operand(b_axes, ext, "float32")
    got = run(a, b, lambda x, y: contrib_batch_matmul_axes(x, y, a_axes, b_axes, out_axes))
    np.testing.assert_allclose(got, expected(a, b, a_axes, b_axes, out_axes),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ext", [
    {"B": 12, "M": 128, "N": 128, "K": 64},   # attention's scores
    {"B": 12, "M": 128, "N": 64, "K": 128},   # attention's context
    {"B": 5, "M": 33, "N": 50, "K": 1100},    # several K blocks
    {"B": 2, "M": 9, "N": 100, "K": 7},       # a partial row tile, column edges
    {"B": 1, "M": 2, "N": 4, "K": 1},
], ids=lambda e: "x".join(str(v) for v in e.values()))
def test_attention_layouts_with_merged_output_and_epilogue(ext):
    """Heads split from [seq, heads, head_dim] on both sides and merged back to
    [1, seq, heads * head_dim], with a scale and an add fused after the product."""
    a, b = operand("MBK", ext, "float32"), operand("NBK", ext, "float32")
    out_shape = (1, ext["M"], ext["B"] * ext["N"])
    bias = RNG.standard_normal(out_shape[-1]).astype("float32")

    def expr(x, y):
        c = contrib_batch_matmul_axes(x, y, "MBK", "NBK", "MBN", out_shape=out_shape)
        return relay.add(relay.multiply(c, relay.const(0.125)), relay.const(bias))

    got = run(a, b, expr)
    want = expected(a, b, "MBK", "NBK", "MBN", out_shape, lambda c: c * 0.125 + bias)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_leading_one_inserted_in_the_output():
    ext = {"B": 4, "M": 17, "N": 23, "K": 16}
    a, b = operand("BMK", ext, "float32"), operand("KBN", ext, "float32")
    got = run(a, b, lambda x, y: contrib_batch_matmul_axes(x, y, "BMK", "KBN", "BMN",
                                                           out_shape=(1, 4, 17, 23)))
    np.testing.assert_allclose(got, expected(a, b, "BMK", "KBN", "BMN", (1, 4, 17, 23)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("out_axes,out_shape", [("BMN", None), ("MBN", (1, 6, 15))])
def test_float64_takes_the_plain_reduction(out_axes, out_shape):
    ext = {"B": 3, "M": 6, "N": 5, "K": 4}
    a, b = operand("MBK", ext, "float64"), operand("BKN", ext, "float64")
    got = run(a, b, lambda x, y: contrib_batch_matmul_axes(x, y, "MBK", "BKN", out_axes,
                                                           out_shape=out_shape))
    np.testing.assert_allclose(got, expected(a, b, "MBK", "BKN", out_axes, out_shape),
                               rtol=1e-12)


@pytest.mark.parametrize("kwargs,match", [
    ({"a_axes": "BMM"}, "a_axes must order the letters BMK"),
    ({"out_axes": "BNM"}, "out_axes must end with N"),
    ({"b_axes": "BKN"}, "differ in the batch or the reduction axis"),
    ({"out_shape": (2, 4, 3)}, "does not merge adjacent axes"),
])
def test_type_relation_names_the_problem(kwargs, match):
    x = relay.var("x", shape=(2, 3, 5))
    y = relay.var("y", shape=(2, 4, 5))
    call = contrib_batch_matmul_axes(x, y, **kwargs)
    with pytest.raises(TypeInferenceError, match=match):
        relay.transform.InferType()(IRModule.from_expr(relay.Function([x, y], call)))


@pytest.mark.parametrize("a_axes,b_axes,out_axes", [("MBK", "NBK", "BMN"), ("MBK", "KBN", "MBN"),
                                                    ("BKM", "BNK", "BMN")])
def test_operands_as_windows_of_their_tensors(a_axes, b_axes, out_axes):
    """Query and key as heads 0-2 and 3-5 (and a window in every axis) of one tensor each."""
    ext = {"B": 3, "M": 11, "N": 11, "K": 20}
    full_a = {"B": 9, "M": 13, "K": 24}
    full_b = {"B": 9, "N": 13, "K": 24}
    x = operand(a_axes, full_a, "float32")
    y = operand(b_axes, full_b, "float32")
    a_begin = tuple({"B": 0, "M": 2, "K": 4}[c] for c in a_axes)
    b_begin = tuple({"B": 3, "N": 1, "K": 4}[c] for c in b_axes)
    a_shape = tuple(ext[c] for c in a_axes)
    b_shape = tuple(ext[c] for c in b_axes)
    got = run(x, y, lambda u, v: contrib_batch_matmul_axes(
        u, v, a_axes, b_axes, out_axes, a_begin=a_begin, a_shape=a_shape, b_begin=b_begin,
        b_shape=b_shape))
    a = x[tuple(slice(b, b + e) for b, e in zip(a_begin, a_shape))]
    b = y[tuple(slice(b, b + e) for b, e in zip(b_begin, b_shape))]
    np.testing.assert_allclose(got, expected(a, b, a_axes, b_axes, out_axes), rtol=1e-5,
                               atol=1e-5)


def test_window_outside_the_tensor_names_it():
    x = relay.var("x", shape=(2, 3, 5))
    y = relay.var("y", shape=(2, 4, 5))
    call = contrib_batch_matmul_axes(x, y, a_begin=(1, 0, 0), a_shape=(2, 3, 5))
    with pytest.raises(TypeInferenceError, match=r"tensor_a window at \(1, 0, 0\) of shape "
                                                 r"\(2, 3, 5\) does not lie inside"):
        relay.transform.InferType()(IRModule.from_expr(relay.Function([x, y], call)))
