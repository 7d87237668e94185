"""If, Scan, sequences and optionals from ONNX against onnxruntime, on small hand-built graphs.

Programs with run-time control flow or sequence inputs run on the Relay VM (and the debug
interpreter, the Relay meaning of the conversion); static ones (an If whose condition folds,
a Scan, which is unrolled) through relay.build and the graph executor.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.frontend import from_onnx
from compiler.frontend.onnx_ops.common import FrontendError
from compiler.op.interpreter import evaluate
from compiler.ir.expr import If
from compiler.ir.traversal import post_order

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(22)
F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _ort(model, feeds: dict) -> list:
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _flat(value) -> list:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _flat(v)]
    return [value.numpy() if hasattr(value, "numpy") else np.asarray(value)]


def _debug(model, feeds: dict, shape=None) -> list:
    mod, params = from_onnx(model, shape=shape)
    args = [params[p.name_hint] if p.name_hint in params else feeds[p.name_hint]
            for p in mod["main"].params]
    return _flat(evaluate(mod, args))


def _vm(model, feeds: dict, shape=None) -> list:
    from compiler import relay
    from runtime import cpu
    from runtime.vm import VirtualMachine
    mod, params = from_onnx(model, shape=shape)
    machine = VirtualMachine(relay.vm.compile(mod, target="llvm", params=params), cpu(0))
    names = [p.name_hint for p in mod["main"].params if p.name_hint not in params]
    return _flat(machine.invoke("main", *[feeds[n] for n in names]))


def _graph(model, feeds: dict) -> list:
    from compiler import relay
    from runtime import cpu, graph_executor
    mod, params = from_onnx(model)
    module = graph_executor.GraphModule(relay.build(mod, target="llvm", params=params)
                                        ["default"](cpu(0)))
    module.run(**feeds)
    return [module.get_output(i).numpy() for i in range(module.get_num_outputs())]


def _assert_same(got: list, want: list):
    want = _flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _branch(name, nodes, outputs):
    return helper.make_graph(nodes, name, [], outputs)


def _if_model(cond_input: bool):
    """y = x * 2 if cond else x - outer, both branches reading outer-scope values."""
    then = _branch("then", [helper.make_node("Mul", ["x", "two"], ["t"])],
                   [helper.make_tensor_value_info("t", F, [3, 4])])
    other = _branch("else", [helper.make_node("Sub", ["x", "outer"], ["e"])],
                    [helper.make_tensor_value_info("e", F, [3, 4])])
    nodes = [helper.make_node("Constant", [], ["two"], value_float=2.0),
             helper.make_node("Exp", ["x"], ["outer"])]
    inputs = [helper.make_tensor_value_info("x", F, [3, 4])]
    if cond_input:
        inputs.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, [1]))
    else:
        nodes.append(helper.make_node("Constant", [], ["cond"], value=helper.make_tensor(
            "cond", TensorProto.BOOL, [], [False])))
    nodes.append(helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other))
    return _model(nodes, inputs, [helper.make_tensor_value_info("y", F, [3, 4])])


@pytest.mark.parametrize("cond", [True, False])
def test_if_on_run_time_condition_is_a_relay_if(cond):
    model = _if_model(True)
    feeds = {"x": RNG.standard_normal((3, 4)).astype(np.float32),
             "cond": np.array([cond])}
    mod, _ = from_onnx(model)
    assert any(isinstance(n, If) for n in post_order(mod["main"]))
    want = _ort(model, feeds)
    _assert_same(_vm(model, feeds), want)
    _assert_same(_debug(model, feeds), want)


def test_if_on_constant_condition_picks_its_branch_at_import():
    model = _if_model(False)
    feeds = {"x": RNG.standard_normal((3, 4)).astype(np.float32)}
    mod, _ = from_onnx(model)
    assert not any(isinstance(n, If) for n in post_order(mod["main"]))
    _assert_same(_graph(model, feeds), _ort(model, feeds))


def test_if_branches_of_different_shapes_are_refused_by_name():
    then = _branch("then", [helper.make_node("Constant", [], ["t"], value_floats=[1.0, 2.0])],
                   [helper.make_tensor_value_info("t", F, [2])])
    other = _branch("else", [helper.make_node("Constant", [], ["e"], value_floats=[1.0])],
                    [helper.make_tensor_value_info("e", F, [1])])
    model = _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                   [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                   [helper.make_tensor_value_info("y", F, None)])
    with pytest.raises(FrontendError, match="branch"):
        from_onnx(model)


def _scan_model(reverse: int, out_axis: int):
    """A running sum and a running product of the rows of x (two states, two scan outputs)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "row"], ["s_out"]),
         helper.make_node("Mul", ["p_in", "row"], ["p_out"]),
         helper.make_node("Tanh", ["s_out"], ["scan_a"]),
         helper.make_node("Identity", ["p_out"], ["scan_b"])],
        "body",
        [helper.make_tensor_value_info(n, F, [4]) for n in ("s_in", "p_in", "row")],
        [helper.make_tensor_value_info(n, F, [4])
         for n in ("s_out", "p_out", "scan_a", "scan_b")])
    node = helper.make_node("Scan", ["s0", "p0", "x"], ["s", "p", "a", "b"], body=body,
                            num_scan_inputs=1, scan_input_axes=[1],
                            scan_input_directions=[reverse], scan_output_axes=[0, out_axis])
    return _model([node],
                  [helper.make_tensor_value_info("s0", F, [4]),
                   helper.make_tensor_value_info("p0", F, [4]),
                   helper.make_tensor_value_info("x", F, [4, 5])],
                  [helper.make_tensor_value_info(n, F, None) for n in "spab"])


@pytest.mark.parametrize("reverse,out_axis", [(0, 0), (1, 1)])
def test_scan_matches_onnxruntime(reverse, out_axis):
    model = _scan_model(reverse, out_axis)
    feeds = {"s0": RNG.standard_normal(4).astype(np.float32),
             "p0": np.ones(4, np.float32),
             "x": RNG.uniform(0.5, 1.5, (4, 5)).astype(np.float32)}
    _assert_same(_graph(model, feeds), _ort(model, feeds))


def _seq_type(elem=F):
    return helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, None))


def test_sequence_ops_match_onnxruntime():
    """Split into a sequence, insert, erase, read one back, measure and concatenate."""
    nodes = [helper.make_node("SplitToSequence", ["x", "split"], ["seq"], axis=1),
             helper.make_node("SequenceInsert", ["seq", "y", "zero"], ["seq2"]),
             helper.make_node("SequenceErase", ["seq2", "minus_one"], ["seq3"]),
             helper.make_node("SequenceAt", ["seq3", "one"], ["second"]),
             helper.make_node("SequenceLength", ["seq3"], ["length"]),
             helper.make_node("ConcatFromSequence", ["seq3"], ["cat"], axis=1),
             helper.make_node("ConcatFromSequence", ["seq3"], ["stacked"], axis=0,
                              new_axis=1)]
    consts = [helper.make_node("Constant", [], [n], value=helper.make_tensor(n, TensorProto.INT64,
                                                                             shape, vals))
              for n, shape, vals in (("split", [2], [2, 2]), ("zero", [], [0]),
                                     ("minus_one", [], [-1]), ("one", [], [1]))]
    model = _model(consts + nodes,
                   [helper.make_tensor_value_info("x", F, [3, 4]),
                    helper.make_tensor_value_info("y", F, [3, 2])],
                   [helper.make_tensor_value_info(n, F, None) for n in ("second", "cat")] +
                   [helper.make_tensor_value_info("length", TensorProto.INT64, None),
                    helper.make_tensor_value_info("stacked", F, None)])
    feeds = {"x": RNG.standard_normal((3, 4)).astype(np.float32),
             "y": RNG.standard_normal((3, 2)).astype(np.float32)}
    _assert_same(_graph(model, feeds), _ort(model, feeds))


def test_sequence_map_over_a_sequence_input():
    """SequenceMap unrolled per element (elements of different lengths), with a tensor."""
    body = helper.make_graph([helper.make_node("ReduceSum", ["e"], ["s"], keepdims=0),
                              helper.make_node("Mul", ["s", "k"], ["out"])], "body",
                             [helper.make_tensor_value_info("e", F, None),
                              helper.make_tensor_value_info("k", F, [])],
                             [helper.make_tensor_value_info("out", F, None)])
    model = _model([helper.make_node("SequenceMap", ["seq", "k"], ["mapped"], body=body),
                    helper.make_node("ConcatFromSequence", ["mapped"], ["y"], axis=0,
                                     new_axis=1)],
                   [helper.make_value_info("seq", _seq_type()),
                    helper.make_tensor_value_info("k", F, [])],
                   [helper.make_tensor_value_info("y", F, None)])
    seq = [RNG.standard_normal(n).astype(np.float32) for n in (3, 5, 2)]
    k = np.array(1.5, np.float32)
    shape = {"seq": [s.shape for s in seq]}
    want = _ort(model, {"seq": seq, "k": k})
    _assert_same(_vm(model, {"seq": tuple(seq), "k": k}, shape), want)
    _assert_same(_debug(model, {"seq": tuple(seq), "k": k}, shape), want)


def test_sequence_input_needs_its_element_shapes():
    model = _model([helper.make_node("SequenceLength", ["seq"], ["n"])],
                   [helper.make_value_info("seq", _seq_type())],
                   [helper.make_tensor_value_info("n", TensorProto.INT64, None)])
    with pytest.raises(FrontendError, match="element shapes"):
        from_onnx(model)


def test_optionals_fold_at_import():
    opt = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2]))
    nodes = [helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("OptionalGetElement", ["o"], ["value"]),
             helper.make_node("Optional", ["value"], ["wrapped"]),
             helper.make_node("OptionalGetElement", ["wrapped"], ["y"])]
    model = _model(nodes, [helper.make_value_info("o", opt)],
                   [helper.make_tensor_value_info("has", TensorProto.BOOL, None),
                    helper.make_tensor_value_info("y", F, None)], opset=18)
    value = RNG.standard_normal(2).astype(np.float32)
    _assert_same(_vm(model, {"o": value}), _ort(model, {"o": value}))
    empty = _model([nodes[0]], [helper.make_value_info("o", opt)],
                   [helper.make_tensor_value_info("has", TensorProto.BOOL, None)], opset=18)
    assert _debug(empty, {}, shape={"o": None}) == [np.array(False)]
    with pytest.raises(FrontendError, match="empty"):
        from_onnx(_model(nodes[:2], [helper.make_value_info("o", opt)],
                         [helper.make_tensor_value_info("value", F, None)], opset=18),
                  shape={"o": None})


def test_nested_if_with_several_outputs_on_the_vm():
    """An If in a branch of an If, both on run-time conditions, two outputs each."""
    inner_then = _branch("it", [helper.make_node("Neg", ["x"], ["a"]),
                                helper.make_node("Abs", ["x"], ["b"])],
                         [helper.make_tensor_value_info(n, F, [2, 3]) for n in "ab"])
    inner_else = _branch("ie", [helper.make_node("Exp", ["x"], ["c"]),
                                helper.make_node("Sigmoid", ["x"], ["d"])],
                         [helper.make_tensor_value_info(n, F, [2, 3]) for n in "cd"])
    outer_then = _branch("ot", [helper.make_node("If", ["c2"], ["p", "q"],
                                                 then_branch=inner_then,
                                                 else_branch=inner_else)],
                         [helper.make_tensor_value_info(n, F, [2, 3]) for n in "pq"])
    outer_else = _branch("oe", [helper.make_node("Relu", ["x"], ["r"]),
                                helper.make_node("Tanh", ["x"], ["s"])],
                         [helper.make_tensor_value_info(n, F, [2, 3]) for n in "rs"])
    model = _model([helper.make_node("If", ["c1"], ["y", "z"], then_branch=outer_then,
                                     else_branch=outer_else)],
                   [helper.make_tensor_value_info("x", F, [2, 3]),
                    helper.make_tensor_value_info("c1", TensorProto.BOOL, []),
                    helper.make_tensor_value_info("c2", TensorProto.BOOL, [])],
                   [helper.make_tensor_value_info(n, F, [2, 3]) for n in "yz"])
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    for c1 in (True, False):
        for c2 in (True, False):
            feeds = {"x": x, "c1": np.array(c1), "c2": np.array(c2)}
            _assert_same(_vm(model, feeds), _ort(model, feeds))
