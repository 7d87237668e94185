"""Domain-aware ONNX converter lookup, and the ai.onnx.ml / ai.onnx.preview converters."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from compiler.errors import OpNotImplemented
from compiler.frontend import from_onnx
from compiler.frontend.onnx_ops.common import CONVERTERS, converter, find_converter
from tests.onnx_conformance.harness import EXECUTORS, compare

ML, PREVIEW = "ai.onnx.ml", "ai.onnx.preview"
_ELEM = {"float16": TensorProto.FLOAT16, "float32": TensorProto.FLOAT,
         "float64": TensorProto.DOUBLE, "int64": TensorProto.INT64}


def _model(nodes, inputs: dict, n_out: int = 1, opsets=None, initializers=()):
    ins = [helper.make_tensor_value_info(n, _ELEM[v.dtype.name], v.shape)
           for n, v in inputs.items()]
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.UNDEFINED, None)
            for i in range(n_out)]
    graph = helper.make_graph(nodes, "g", ins, outs, initializer=list(initializers))
    opsets = opsets or {"": 21, ML: 5, PREVIEW: 1}
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v)
                                                    for d, v in opsets.items()])
    model.ir_version = 10
    return model


def _check(model, feeds: dict, executor: str) -> list:
    mod, params = from_onnx(model)
    got = EXECUTORS[executor](mod, params, feeds)
    want = ReferenceEvaluator(model).run(None, feeds)
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert compare(w, g) == "", compare(w, g)
    return got


@pytest.fixture
def scratch_domain():
    """A throwaway domain for registrations made by a test, removed afterwards."""
    yield "test.scratch"
    for key in [k for k in CONVERTERS if k[0] == "test.scratch"]:
        del CONVERTERS[key]


# --- lookup -----------------------------------------------------------------------------------


def test_lookup_is_keyed_by_domain_and_ai_onnx_is_the_default_domain():
    binarizer = find_converter("Binarizer", 1, ML)
    assert binarizer is not None and CONVERTERS[(ML, "Binarizer")][0][1] is binarizer
    assert find_converter("Binarizer", 21) is None  # not in the default domain
    assert find_converter("Relu", 14, "ai.onnx") is find_converter("Relu", 14, "")
    assert CONVERTERS["Relu"] is CONVERTERS[("ai.onnx", "Relu")] is CONVERTERS[("", "Relu")]
    assert find_converter("TreeEnsemble", 4, ML) is None  # TreeEnsemble is ai.onnx.ml 5+
    assert find_converter("TreeEnsemble", 5, ML) is not None
    assert find_converter("FlexAttention", 1, PREVIEW) is not None


def test_same_op_type_in_two_domains_and_duplicates_per_domain(scratch_domain):
    def relu_lookalike(ctx, inputs):
        return inputs[0]

    converter("Relu", since=1, domain=scratch_domain)(relu_lookalike)  # no clash with ai.onnx
    assert find_converter("Relu", 1, scratch_domain) is relu_lookalike
    assert find_converter("Relu", 14) is not relu_lookalike
    with pytest.raises(ValueError, match=r"test\.scratch\.Relu .since opset 1. is already"):
        converter("Relu", since=1, domain=scratch_domain)(lambda ctx, inputs: None)


def test_each_domain_gets_its_own_opset(scratch_domain):
    seen = []

    def record(ctx, inputs):
        seen.append(ctx.opset)
        return inputs[0]

    converter("Echo", since=2, domain=scratch_domain)(record)
    x = np.ones((2, 3), np.float32)
    nodes = [helper.make_node("Echo", ["x"], ["a"], domain=scratch_domain),
             helper.make_node("Unsqueeze", ["a"], ["y0"], axes=[0])]  # opset-11 form
    model = _model(nodes, {"x": x}, opsets={"": 11, scratch_domain: 7})
    mod, params = from_onnx(model)
    assert seen == [7]
    assert EXECUTORS["debug"](mod, params, {"x": x})[0].shape == (1, 2, 3)
    old = _model(nodes, {"x": x}, opsets={"": 11, scratch_domain: 1})
    with pytest.raises(OpNotImplemented, match=r"test\.scratch opset 1.*test\.scratch\.Echo"):
        from_onnx(old)


def test_op_not_implemented_names_the_domain():
    x = np.ones((2, 3), np.float32)
    nodes = [helper.make_node("TreeEnsemble", ["x"], ["a"], domain=ML),
             helper.make_node("FancyOp", ["a"], ["b"], domain=ML),
             helper.make_node("Relu", ["b"], ["c"]),
             helper.make_node("Mystery", ["c"], ["y0"], domain="com.example")]
    model = _model(nodes, {"x": x}, opsets={"": 21, ML: 3})
    with pytest.raises(OpNotImplemented) as info:
        from_onnx(model)
    message = str(info.value)
    assert "ai.onnx.ml opset 3" in message
    assert "ai.onnx.ml.TreeEnsemble" in message and "ai.onnx.ml.FancyOp" in message
    assert "com.example.Mystery" in message  # a domain the model does not even import
    assert "Relu" not in message


def test_opset_argument_overrides_the_default_domain_only():
    x = np.array([[-1.0, 0.5, 2.0]], np.float32)
    nodes = [helper.make_node("Binarizer", ["x"], ["a"], domain=ML, threshold=0.7),
             helper.make_node("Unsqueeze", ["a"], ["y0"], axes=[0])]
    mod, params = from_onnx(_model(nodes, {"x": x}, opsets={"": 21, ML: 1}), opset=11)
    got = EXECUTORS["debug"](mod, params, {"x": x})[0]
    np.testing.assert_array_equal(got, [[[0, 0, 1]]])


# --- ai.onnx.ml -------------------------------------------------------------------------------


@pytest.mark.parametrize("executor", ["debug", "graph"])
@pytest.mark.parametrize("dtype,threshold", [("float32", 0.0), ("float64", 0.25),
                                             ("float32", -1.5)])
def test_binarizer(executor, dtype, threshold):
    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(dtype)
    x[0, 0, :2] = threshold  # equal to the threshold is not above it
    node = helper.make_node("Binarizer", ["x"], ["y0"], domain=ML, threshold=threshold)
    _check(_model([node], {"x": x}), {"x": x}, executor)


@pytest.mark.parametrize("executor", ["debug", "graph"])
@pytest.mark.parametrize("shape,indices", [((6,), [4, 0]), ((3, 5), [[1, 3]]),
                                           ((2, 3, 4), [3, 0, 0]), ((3, 5), [[2], [4]])])
@pytest.mark.parametrize("static", [True, False])
def test_array_feature_extractor(executor, shape, indices, static):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    idx = np.asarray(indices, np.int64)
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y0"], domain=ML)
    if static:
        model = _model([node], {"x": x}, initializers=[numpy_helper.from_array(idx, "i")])
        got = _check(model, {"x": x}, executor)
    else:
        got = _check(_model([node], {"x": x, "i": idx}), {"x": x, "i": idx}, executor)
    assert got[0].shape == ((1, idx.size) if len(shape) == 1 else (*shape[:-1], idx.size))


def _random_ensemble(rng, trees: int, depth: int, features: int, n_targets: int,
                     modes: list) -> dict:
    """TreeEnsemble attributes for random trees, nodes numbered in depth-first (true-first)
    order so that membership sets line up in both node order (the spec) and the reference's
    traversal order."""
    table = {k: [] for k in ("modes", "features", "splits", "true", "false", "true_leaf",
                             "false_leaf", "tracks")}
    leaf_targets, leaf_weights, members, roots = [], [], [], []
    values = np.arange(-4, 5) / 2  # a coarse grid, so EQ/NEQ/MEMBER tests are often true

    def new_leaf() -> int:
        leaf_targets.append(int(rng.integers(n_targets)))
        leaf_weights.append(float(np.round(rng.standard_normal() * 10, 2)))
        return len(leaf_targets) - 1

    def new_node(level: int) -> int:  # recursion is fine for a test-sized tree
        index = len(table["modes"])
        mode = int(rng.choice(modes))
        table["modes"].append(mode)
        table["features"].append(int(rng.integers(features)))
        table["splits"].append(float(rng.choice(values)))
        table["tracks"].append(int(rng.integers(2)))
        for k in ("true", "false", "true_leaf", "false_leaf"):
            table[k].append(0)
        if mode == 6:
            members.extend(float(v) for v in rng.choice(values[values != 0], 3,
                                                        replace=False))
            members.append(np.nan)
        for branch in ("true", "false"):
            if level + 1 >= depth or rng.random() < 0.25:
                table[branch][index], table[f"{branch}_leaf"][index] = new_leaf(), 1
            else:
                table[branch][index] = new_node(level + 1)
        return index

    for _ in range(trees):
        roots.append(new_node(0))
    attrs = dict(
        n_targets=n_targets, tree_roots=roots, nodes_featureids=table["features"],
        nodes_modes=numpy_helper.from_array(np.array(table["modes"], np.uint8), "nodes_modes"),
        nodes_splits=numpy_helper.from_array(np.array(table["splits"], np.float32),
                                             "nodes_splits"),
        nodes_truenodeids=table["true"], nodes_falsenodeids=table["false"],
        nodes_trueleafs=table["true_leaf"], nodes_falseleafs=table["false_leaf"],
        nodes_missing_value_tracks_true=table["tracks"], leaf_targetids=leaf_targets,
        leaf_weights=numpy_helper.from_array(np.array(leaf_weights, np.float32),
                                             "leaf_weights"))
    if members:
        attrs["membership_values"] = numpy_helper.from_array(np.array(members, np.float32),
                                                             "membership_values")
    return attrs


@pytest.mark.parametrize("executor", ["debug", "graph"])
@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
@pytest.mark.parametrize("modes", [[0], [0, 1, 2, 3, 4, 5], [0, 6], [1, 3, 4, 6]])
def test_tree_ensemble_random_forests(executor, aggregate, modes):
    rng = np.random.default_rng(aggregate * 10 + len(modes))
    attrs = _random_ensemble(rng, trees=4, depth=4, features=3, n_targets=3, modes=modes)
    x = (rng.integers(-4, 5, (16, 3)) / 2).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan  # missing values follow nodes_missing_value_tracks
    node = helper.make_node("TreeEnsemble", ["x"], ["y0"], domain=ML,
                            aggregate_function=aggregate, post_transform=0, **attrs)
    _check(_model([node], {"x": x}), {"x": x}, executor)


def _two_tree_ensemble(split: float, x_type: int):
    """Tree 0 splits feature 0 at `split`; tree 1 is a lone leaf: root node 1 has both
    branches on leaf 2. Splits and weights share X's type, as onnxruntime requires."""
    np_type = helper.tensor_dtype_to_np_dtype(x_type)
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y0"], domain=ML, n_targets=2, aggregate_function=1,
        tree_roots=[0, 1], nodes_featureids=[0, 0],
        nodes_modes=numpy_helper.from_array(np.array([0, 0], np.uint8), "m"),
        nodes_splits=numpy_helper.from_array(np.array([split, 0.0], np_type), "s"),
        nodes_truenodeids=[0, 2], nodes_falsenodeids=[1, 2],
        nodes_trueleafs=[1, 1], nodes_falseleafs=[1, 1], leaf_targetids=[0, 1, 1],
        leaf_weights=numpy_helper.from_array(np.array([1.0, 2.0, 5.0], np_type), "w"))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", x_type, [3, 1])],
                              [helper.make_tensor_value_info("y0", x_type, [3, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid(ML, 5)])
    model.ir_version = 10
    return model


def test_tree_ensemble_leaf_only_tree_follows_onnxruntime():
    """A lone-leaf tree is the leaf its root's branches name (leaf 2), as onnxruntime has it;
    onnx's reference instead reads leaf_weights at the root's node index (1)."""
    import onnxruntime as ort
    model = _two_tree_ensemble(0.5, TensorProto.FLOAT)
    x = np.array([[0.25], [0.0], [1.0]], np.float32)
    mod, params = from_onnx(model)
    got = EXECUTORS["graph"](mod, params, {"x": x})[0]
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(got, [[1, 5], [1, 5], [0, 7]])


def test_tree_ensemble_rejects_post_transform():
    attrs = _random_ensemble(np.random.default_rng(0), 1, 2, 2, 1, [0])
    node = helper.make_node("TreeEnsemble", ["x"], ["y0"], domain=ML, post_transform=2,
                            **attrs)
    with pytest.raises(Exception, match="post_transform 2"):
        from_onnx(_model([node], {"x": np.zeros((2, 2), np.float32)}))


# --- ai.onnx.preview FlexAttention ------------------------------------------------------------


@pytest.mark.parametrize("executor", ["debug", "graph"])
@pytest.mark.parametrize("heads,attrs,dtype", [
    ((4, 4), {}, "float32"), ((4, 2), {"scale": 0.2}, "float32"), ((2, 1), {}, "float64"),
    ((2, 2), {"softmax_precision": TensorProto.DOUBLE}, "float32"), ((2, 2), {}, "float16")])
def test_flex_attention(executor, heads, attrs, dtype):
    rng = np.random.default_rng(heads[0] + heads[1])
    feeds = {"Q": rng.random((2, heads[0], 5, 8)).astype(dtype),
             "K": rng.random((2, heads[1], 3, 8)).astype(dtype),
             "V": rng.random((2, heads[1], 3, 6)).astype(dtype)}
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["y0"], domain=PREVIEW, **attrs)
    got = _check(_model([node], feeds), feeds, executor)
    assert got[0].shape == (2, heads[0], 5, 6)


@pytest.mark.parametrize("executor", ["debug", "graph"])
@pytest.mark.parametrize("which,dtype", [("score_mod", "float32"), ("prob_mod", "float32"),
                                         ("score_mod", "float16")])
def test_flex_attention_with_a_mod_subgraph(executor, which, dtype):
    """score_mod (before the softmax) and prob_mod (after it) subgraphs, in the softmax
    dtype (float32 for float16 inputs), against ONNX's reference."""
    soft = TensorProto.FLOAT
    value = helper.make_tensor_value_info("s", soft, None)
    out = helper.make_tensor_value_info("t", soft, None)
    mod_graph = helper.make_graph([helper.make_node("Neg", ["s"], ["n"]),
                                   helper.make_node("Mul", ["n", "s"], ["t"])], "m",
                                  [value], [out])
    rng = np.random.default_rng(9)
    feeds = {n: rng.random((1, 2, 3, 4)).astype(dtype) for n in "QKV"}
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["y0"], domain=PREVIEW,
                            **{which: mod_graph})
    got = _check(_model([node], feeds), feeds, executor)
    assert got[0].shape == (1, 2, 3, 4)
