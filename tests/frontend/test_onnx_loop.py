"""ONNX Loop and the data-dependent ops (NonZero, Unique, NonMaxSuppression, Compress) against
onnxruntime, on small hand-built graphs: a greedy-decode-style loop whose trip count comes
from the data, an If nested in a loop body, a detection post-process (TopK + NonZero +
NonMaxSuppression)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import relay
from compiler.frontend import from_onnx
from compiler.frontend.onnx_ops import control_flow
from compiler.frontend.onnx_ops.common import FrontendError
from compiler.ir.expr import Let
from compiler.ir.traversal import post_order
from runtime import cpu
from runtime.errors import VMError
from runtime.vm import VirtualMachine
from tests.frontend.test_onnx_control_flow import _assert_same, _model, _ort, _scan_model
from tests.frontend.test_onnx_control_flow import _vm as _run

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(2022)
F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
VOCAB, WIDTH, EOS = 7, 5, 0


def _const(name, value, dtype=None):
    value = np.asarray(value, dtype)
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(value, name + "_value"))


def _decode_model():
    """Greedy decoding: from a start token, embed, mix with the state, pick the most likely
    next token; stop at EOS or after max_len steps. Carries the token, the state and the
    tokens so far (a tensor growing by one each step); scans out the logits."""
    embed = RNG.standard_normal((VOCAB, WIDTH)).astype(np.float32)
    mix = (RNG.standard_normal((WIDTH, WIDTH)) * 0.5).astype(np.float32)
    head = RNG.standard_normal((WIDTH, VOCAB)).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("Gather", ["embed", "tok_in"], ["e"]),
         helper.make_node("MatMul", ["h_in", "mix"], ["hm"]),
         helper.make_node("Add", ["e", "hm"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"]),
         helper.make_node("MatMul", ["h_out", "head"], ["logits"]),
         helper.make_node("ArgMax", ["logits"], ["tok_out"], axis=0, keepdims=0),
         _const("eos", EOS, np.int64),
         helper.make_node("Equal", ["tok_out", "eos"], ["at_end"]),
         helper.make_node("Not", ["at_end"], ["cond_out"]),
         helper.make_node("Unsqueeze", ["tok_out", "zero_axis"], ["tok_row"]),
         helper.make_node("Concat", ["toks_in", "tok_row"], ["toks_out"], axis=0)],
        "decode_step",
        [helper.make_tensor_value_info("i", I64, []),
         helper.make_tensor_value_info("cond_in", BOOL, []),
         helper.make_tensor_value_info("tok_in", I64, []),
         helper.make_tensor_value_info("h_in", F, [WIDTH]),
         helper.make_tensor_value_info("toks_in", I64, ["n"])],
        [helper.make_tensor_value_info("cond_out", BOOL, []),
         helper.make_tensor_value_info("tok_out", I64, []),
         helper.make_tensor_value_info("h_out", F, [WIDTH]),
         helper.make_tensor_value_info("toks_out", I64, ["m"]),
         helper.make_tensor_value_info("logits", F, [VOCAB])])
    graph = helper.make_graph(
        [_const("zero_axis", [0], np.int64), _const("empty", np.zeros(0, np.int64)),
         _const("h0", np.zeros(WIDTH, np.float32)), _const("go", True, bool),
         helper.make_node("Loop", ["max_len", "go", "start", "h0", "empty"],
                          ["last", "h", "tokens", "all_logits"], body=body)],
        "decode",
        [helper.make_tensor_value_info("start", I64, []),
         helper.make_tensor_value_info("max_len", I64, [])],
        [helper.make_tensor_value_info("tokens", I64, None),
         helper.make_tensor_value_info("h", F, None),
         helper.make_tensor_value_info("all_logits", F, None)],
        initializer=[numpy_helper.from_array(embed, "embed"),
                     numpy_helper.from_array(mix, "mix"),
                     numpy_helper.from_array(head, "head")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_greedy_decode_loop_with_a_data_dependent_trip_count():
    model = _decode_model()
    mod, _ = from_onnx(model)
    assert any(isinstance(n, Let) for n in post_order(mod["main"]))  # a recursive loop
    lengths = set()
    for start in range(1, VOCAB):
        for max_len in (0, 1, 4, 12):
            feeds = {"start": np.array(start, np.int64), "max_len": np.array(max_len, np.int64)}
            want = _ort(model, feeds)
            lengths.add(len(want[0]))
            _assert_same(_run(model, feeds), want)
    assert len(lengths) > 2  # the runs stopped after different numbers of steps


def _nested_if_loop_model(trip):
    """A loop whose body picks its update with an If on the iteration parity, reading an
    outer-scope tensor in both branches; its trip count is static (unrolled) or an input."""
    even = helper.make_graph([helper.make_node("Add", ["acc_in", "outer"], ["a"])], "even",
                             [], [helper.make_tensor_value_info("a", F, [3])])
    odd = helper.make_graph([helper.make_node("Mul", ["acc_in", "outer"], ["b"])], "odd",
                            [], [helper.make_tensor_value_info("b", F, [3])])
    body = helper.make_graph(
        [_const("two", 2, np.int64), _const("zero", 0, np.int64),
         helper.make_node("Mod", ["i", "two"], ["parity"]),
         helper.make_node("Equal", ["parity", "zero"], ["is_even"]),
         helper.make_node("If", ["is_even"], ["acc_out"], then_branch=even, else_branch=odd),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0)],
        "body",
        [helper.make_tensor_value_info("i", I64, []),
         helper.make_tensor_value_info("cond_in", BOOL, []),
         helper.make_tensor_value_info("acc_in", F, [3])],
        [helper.make_tensor_value_info("cond_out", BOOL, []),
         helper.make_tensor_value_info("acc_out", F, [3]),
         helper.make_tensor_value_info("total", F, [])])
    nodes = [helper.make_node("Exp", ["x"], ["outer"]),
             helper.make_node("Loop", ["trip", "", "x"], ["acc", "totals"], body=body)]
    inputs = [helper.make_tensor_value_info("x", F, [3])]
    if trip is None:
        inputs.append(helper.make_tensor_value_info("trip", I64, []))
    else:
        nodes.insert(0, _const("trip", trip, np.int64))
    return _model(nodes, inputs, [helper.make_tensor_value_info("acc", F, None),
                                  helper.make_tensor_value_info("totals", F, None)])


@pytest.mark.parametrize("trip", [None, 5])
def test_if_nested_in_a_loop_body(trip):
    model = _nested_if_loop_model(trip)
    x = RNG.uniform(-1, 1, 3).astype(np.float32)
    for count in ([0, 1, 6] if trip is None else [trip]):
        feeds = {"x": x} if trip is not None else {"x": x, "trip": np.array(count, np.int64)}
        _assert_same(_run(model, feeds), _ort(model, feeds))


def test_a_loop_whose_trip_count_comes_from_the_data_is_bounded():
    """A trip count of a billion from the input stops at the VM's call limit, an error."""
    mod, params = from_onnx(_nested_if_loop_model(None))
    machine = VirtualMachine(relay.vm.compile(mod, target="llvm", params=params), cpu(0),
                             max_calls=200)
    with pytest.raises(VMError, match="more than 200 calls"):
        machine.invoke("main", np.ones(3, np.float32), np.array(10 ** 9, np.int64))


def test_loop_carrying_a_sequence_needs_static_iterations():
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c2"]),
         helper.make_node("SequenceInsert", ["s", "x"], ["s2"])], "b",
        [helper.make_tensor_value_info("i", I64, []),
         helper.make_tensor_value_info("c", BOOL, []),
         helper.make_value_info("s", helper.make_sequence_type_proto(
             helper.make_tensor_type_proto(F, [2])))],
        [helper.make_tensor_value_info("c2", BOOL, []),
         helper.make_value_info("s2", helper.make_sequence_type_proto(
             helper.make_tensor_type_proto(F, [2])))])
    model = _model([helper.make_node("SequenceEmpty", [], ["s0"], dtype=F),
                    helper.make_node("Loop", ["n", "", "s0"], ["s"], body=body),
                    helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
                   [helper.make_tensor_value_info("x", F, [2]),
                    helper.make_tensor_value_info("n", I64, [])],
                   [helper.make_tensor_value_info("y", F, None)])
    with pytest.raises(FrontendError, match="sequence"):
        from_onnx(model)


def test_nonzero_unique_compress_on_random_data():
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]),
             helper.make_node("Unique", ["x"], ["u", "first", "inverse", "counts"], sorted=1),
             helper.make_node("Unique", ["x"], ["ur", "rfirst", "rinverse", "rcounts"],
                              sorted=1, axis=1),
             _const("zero", 0.0, np.float32),
             helper.make_node("Greater", ["x", "zero"], ["pos"]),
             helper.make_node("Cast", ["pos"], ["pos_f"], to=F),
             helper.make_node("ReduceMax", ["pos_f"], ["col_max"], axes=[0], keepdims=0),
             helper.make_node("Cast", ["col_max"], ["col_any"], to=BOOL),
             helper.make_node("Compress", ["x", "col_any"], ["kept"], axis=1)]
    outs = ["nz", "u", "first", "inverse", "counts", "ur", "rfirst", "rinverse", "rcounts",
            "kept"]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [4, 6])],
                   [helper.make_tensor_value_info(n, F if n in ("u", "ur", "kept") else I64,
                                                  None) for n in outs], opset=17)
    for seed in range(4):
        rng = np.random.default_rng(seed)
        x = (rng.integers(-2, 3, (4, 6)) * rng.integers(0, 2, (4, 6))).astype(np.float32)
        x[:, 2] = x[:, 4]  # a repeated column
        feeds = {"x": x}
        _assert_same(_run(model, feeds), _ort(model, feeds))


def _detection_model(classes=3, boxes=10, k=6):
    """Keep the top-k scoring boxes of each batch, drop those with a near-zero best class
    score (NonZero), then NonMaxSuppression over what is left."""
    nodes = [_const("k", [k], np.int64), _const("limit", [4], np.int64),
             _const("iou", [0.4], np.float32), _const("score", [0.1], np.float32),
             _const("thresh", 0.05, np.float32),
             helper.make_node("ReduceMax", ["scores"], ["best"], axes=[1], keepdims=0),
             helper.make_node("TopK", ["best", "k"], ["top_scores", "top_idx"], axis=1),
             helper.make_node("Greater", ["top_scores", "thresh"], ["alive"]),
             helper.make_node("NonZero", ["alive"], ["alive_at"]),
             helper.make_node("GatherElements", ["best", "top_idx"], ["picked"], axis=1),
             helper.make_node("NonMaxSuppression", ["boxes", "scores", "limit", "iou",
                                                    "score"], ["selected"])]
    model = _model(nodes, [helper.make_tensor_value_info("boxes", F, [2, boxes, 4]),
                           helper.make_tensor_value_info("scores", F, [2, classes, boxes])],
                   [helper.make_tensor_value_info("alive_at", I64, None),
                    helper.make_tensor_value_info("picked", F, None),
                    helper.make_tensor_value_info("selected", I64, None)], opset=13)
    return model


def test_detection_post_process():
    model = _detection_model()
    for seed in range(3):
        rng = np.random.default_rng(seed)
        corner = rng.uniform(0, 6, (2, 10, 2))
        boxes = np.concatenate([corner, corner + rng.uniform(1, 4, (2, 10, 2))], axis=2)
        scores = rng.uniform(0, 1, (2, 3, 10)) ** 3
        feeds = {"boxes": boxes.astype(np.float32), "scores": scores.astype(np.float32)}
        _assert_same(_run(model, feeds), _ort(model, feeds))


@pytest.mark.parametrize("reverse,out_axis", [(0, 0), (1, 1)])
def test_a_scan_too_long_to_unroll_runs_as_a_loop(monkeypatch, reverse, out_axis):
    monkeypatch.setattr(control_flow, "MAX_UNROLLED_SCAN", 2)
    model = _scan_model(reverse, out_axis)
    mod, _ = from_onnx(model)
    assert any(isinstance(n, Let) for n in post_order(mod["main"]))
    feeds = {"s0": RNG.standard_normal(4).astype(np.float32), "p0": np.ones(4, np.float32),
             "x": RNG.uniform(0.5, 1.5, (4, 5)).astype(np.float32)}
    _assert_same(_run(model, feeds), _ort(model, feeds))
