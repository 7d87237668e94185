"""compiler.op.shape_func: the shape programs of typical fused functions, derived from the
type relations, and declared shape functions for ops whose shapes depend on values."""
from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.ir.types import TensorType
from compiler.op.registry import OpDef, OpPattern, temporary_ops
from compiler.op.shape_func import ShapeFuncError, input_checks, register_shape_func, \
    shape_program
from compiler.ir.type_infer import InferTypeLocal
from runtime.shape_program import ShapeError, ShapeProgram


def program(params, body):
    func = relay.Function(params, body)
    InferTypeLocal(func)
    prog = shape_program(func)
    return ShapeProgram.from_json(prog.to_json())


def test_bert_style_block():
    x = relay.var("x", shape=(relay.Any(), relay.Any(), 64))
    w, g, beta = (relay.var("w", shape=(192, 64)), relay.var("g", shape=(64,)),
                  relay.var("beta", shape=(64,)))
    qkv = relay.reshape(relay.nn.dense(x, w), (0, 0, 3, 4, 16))
    q = relay.transpose(relay.take(qkv, relay.const(0), axis=2), (0, 2, 1, 3))
    heads = relay.reshape(q, (-3, 0, 16))  # (b * 4, s, 16)
    scores = relay.nn.softmax(relay.nn.batch_matmul(heads, heads), axis=-1)
    normed = relay.nn.layer_norm(x, g, beta)
    prog = program([x, w, g, beta], relay.Tuple([scores, normed]))
    assert prog.evaluate([(2, 7, 64), (192, 64), (64,), (64,)]) == [(8, 7, 7), (2, 7, 64)]
    assert prog.evaluate([(1, 128, 64), (192, 64), (64,), (64,)]) == [(4, 128, 128),
                                                                      (1, 128, 64)]
    with pytest.raises(ShapeError, match=r"input 'x': expected \(\?, \?, 64\), got \(2, 7, 32\)"):
        prog.evaluate([(2, 7, 32), (192, 64), (64,), (64,)])


def test_conv_pool_chain_and_shared_symbols():
    h = relay.Any()
    x = relay.var("x", shape=(relay.Any(), 3, h, h))
    w = relay.var("w", shape=(8, 3, 3, 3))
    y = relay.nn.avg_pool2d(relay.nn.conv2d(x, w, strides=(2, 2), padding=(1, 1)),
                            pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    prog = program([x, w], relay.mean(y, axis=[2, 3], keepdims=True))
    assert prog.evaluate([(4, 3, 224, 224), (8, 3, 3, 3)]) == [(4, 8, 1, 1)]
    with pytest.raises(ShapeError, match=r"input 'x' dim 3 \(100\) must be equal to input 'x' "
                                         r"dim 2 \(224\)"):
        prog.evaluate([(4, 3, 224, 100), (8, 3, 3, 3)])
    with pytest.raises(ShapeError, match=r"nn.conv2d: the window must fit the input height"):
        prog.evaluate([(4, 3, 0, 0), (8, 3, 3, 3)])


def test_concatenate_slice_and_broadcast_of_two_unknowns():
    a, b = relay.var("a", shape=(relay.Any(), 4)), relay.var("b", shape=(relay.Any(), 4))
    cat = relay.concatenate([a, b], axis=0)
    sl = relay.strided_slice(cat, begin=[1], end=[1 << 62], strides=[2])
    prog = program([a, b], relay.Tuple([cat, sl, relay.add(a, b)]))
    assert prog.evaluate([(1, 4), (5, 4)]) == [(6, 4), (3, 4), (5, 4)]
    assert prog.evaluate([(5, 4), (5, 4)])[2] == (5, 4)
    with pytest.raises(ShapeError, match="do not broadcast"):
        prog.evaluate([(3, 4), (5, 4)])


def test_tuple_parameters_are_flattened():
    t = relay.var("t", relay.TupleType([TensorType((relay.Any(), 2)), TensorType((3, 2))]))
    prog = program([t], relay.concatenate([relay.TupleGetItem(t, 0), relay.TupleGetItem(t, 1)],
                                          axis=0))
    assert [name for name, _ in prog.inputs] == ["t.0", "t.1"]
    assert prog.evaluate([(4, 2), (3, 2)]) == [(7, 2)]


def _unknown_rel(types, attrs):
    return TensorType((relay.Any(),), types[0].dtype)


def test_an_op_with_value_dependent_shape_needs_a_declared_shape_function():
    opdef = OpDef(name="test.nonzero_count", num_inputs=1, type_rel=_unknown_rel,
                  pattern=OpPattern.OPAQUE, reference=lambda ins, a: ins[0][ins[0] != 0])
    with temporary_ops(opdef):
        x = relay.var("x", shape=(relay.Any(),))
        call = relay.Call(opdef.op, [x])
        with pytest.raises(ShapeFuncError, match=r"test.nonzero_count's output dim 0 .*depends "
                                                 r"on input values.*register_shape_func"):
            program([x], call)

        @register_shape_func("test.nonzero_count", True)
        def _count(attrs, inputs, out_ndims):
            return [np.array([np.count_nonzero(inputs[0])], "int64")]

        prog = program([x], relay.nn.relu(call))
        assert prog.needs_values == (0,)
        assert prog.evaluate([(5,)], {0: np.array([0, 1, 0, 2, 3])}) == [(3,)]
        y = relay.var("y", shape=(relay.Any(),))
        with pytest.raises(ShapeFuncError, match="must be a parameter or a constant"):
            program([y], relay.Call(opdef.op, [relay.exp(y)]))


def test_input_checks_cover_functions_with_control_flow():
    c = relay.var("c", shape=(), dtype="bool")
    x = relay.var("x", shape=(relay.Any(), relay.Any()))
    w = relay.var("w", shape=(16, 8))
    dense = relay.nn.dense(x, w)
    func = relay.Function([c, x, w], relay.If(c, dense, relay.nn.relu(dense)))
    InferTypeLocal(func)
    with pytest.raises(ShapeFuncError, match="If"):
        shape_program(func)
    checks = input_checks(func)
    assert checks.outputs == []
    checks.check_inputs([(), (3, 8), (16, 8)])
    with pytest.raises(ShapeError, match=r"input 'x': expected \(\?, 8\) \(dim 1 = 8\), got "
                                         r"\(3, 9\)"):
        checks.check_inputs([(), (3, 9), (16, 8)])
