"""FoldTransposeIntoBatchMatmul: attention's head split/merge chains become the axis orders of
nn.contrib_batch_matmul_axes (no transpose left), chains that are not an axis permutation or
whose values have another reader stay, and every case computes what it computed before
(relay.build against numpy; ONNX attention against onnxruntime)."""
from __future__ import annotations

import json
import math

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import IRModule, relay
from compiler.ir.expr import Call
from compiler.ir.traversal import post_order
from compiler.passes.fold_batch_matmul_axes import FoldTransposeIntoBatchMatmul
from compiler.transform import PassContext
from runtime import cpu, graph_executor

RNG = np.random.default_rng(3)


def fold(func: relay.Function) -> relay.Function:
    mod = relay.transform.InferType()(IRModule.from_expr(func))
    return relay.transform.InferType()(FoldTransposeIntoBatchMatmul()(mod))["main"]


def op_names(func) -> list[str]:
    return [n.op.name for n in post_order(func) if isinstance(n, Call) and hasattr(n.op, "name")]


def run(func: relay.Function, feeds: dict, opt_level: int = 3, disabled=()) -> np.ndarray:
    with PassContext(opt_level=opt_level, disabled_pass=list(disabled)):
        lib = relay.build(func)
    gm = graph_executor.GraphModule(lib["default"](cpu()))
    gm.run(**feeds)
    return gm.get_output(0).numpy()


def split_heads(x, seq, heads, dim, perm):
    """reshape -> transpose -> reshape to [heads, ., .], as the ONNX frontend lowers it."""
    y = relay.transpose(relay.reshape(x, (1, seq, heads, dim)), perm)
    shape = (heads, seq, dim) if perm == (0, 2, 1, 3) else (heads, dim, seq)
    return relay.reshape(y, shape)


def attention(seq=9, heads=3, dim=5):
    """softmax(q k^T / sqrt(d)) v over head splits of [1, seq, heads * dim] inputs, merged."""
    hidden = heads * dim
    q, k, v = (relay.var(n, shape=(1, seq, hidden)) for n in "qkv")
    scores = relay.nn.batch_matmul(split_heads(q, seq, heads, dim, (0, 2, 1, 3)),
                                   split_heads(k, seq, heads, dim, (0, 2, 3, 1)),
                                   transpose_b=False)
    scores = relay.divide(relay.reshape(scores, (1, heads, seq, seq)),
                          relay.const(math.sqrt(dim)))
    probs = relay.reshape(relay.nn.softmax(scores, axis=-1), (heads, seq, seq))
    ctx = relay.nn.batch_matmul(probs, split_heads(v, seq, heads, dim, (0, 2, 1, 3)),
                                transpose_b=False)
    merged = relay.reshape(relay.transpose(relay.reshape(ctx, (1, heads, seq, dim)),
                                           (0, 2, 1, 3)), (1, seq, hidden))
    return relay.Function([q, k, v], merged)


def attention_ref(q, k, v, heads):
    s, hidden = q.shape[1:]
    d = hidden // heads
    qh, kh, vh = (t.reshape(s, heads, d).transpose(1, 0, 2).astype(np.float64) for t in (q, k, v))
    scores = qh @ kh.transpose(0, 2, 1) / math.sqrt(d)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    ctx = (e / e.sum(-1, keepdims=True)) @ vh
    return ctx.transpose(1, 0, 2).reshape(1, s, hidden)


@pytest.mark.parametrize("seq,heads,dim", [(9, 3, 5), (128, 12, 64), (17, 2, 33), (1, 4, 8)])
def test_attention_folds_every_transpose(seq, heads, dim):
    func = attention(seq, heads, dim)
    folded = fold(func)
    names = op_names(folded)
    assert "transpose" not in names and "nn.batch_matmul" not in names, names
    assert names.count("nn.contrib_batch_matmul_axes") == 2, names
    feeds = {n: RNG.standard_normal((1, seq, heads * dim)).astype("float32") for n in "qkv"}
    want = attention_ref(feeds["q"], feeds["k"], feeds["v"], heads)
    np.testing.assert_allclose(run(func, feeds), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(run(func, feeds, opt_level=2), want, rtol=1e-4, atol=1e-5)


def test_scale_joins_the_product_and_the_transposes_leave_the_kernels():
    func = attention(16, 4, 8)
    with PassContext(opt_level=3):
        lib = relay.build(func)
    kernels = [n["attrs"]["func_name"] for n in json.loads(lib.get_graph_json())["nodes"]
               if n["op"] == "tvm_op"]
    assert not any("transpose" in k or "split" in k for k in kernels), kernels
    assert any("batch_matmul_axes_divide" in k for k in kernels), kernels


def test_chain_that_is_no_axis_permutation_stays():
    """[2, 3, 4, 5] -> transpose(0, 2, 1, 3) -> [2, 12, 5]: the merged axis interleaves two
    source axes in swapped order, which no 3-D axis order of the source expresses."""
    x = relay.var("x", shape=(2, 3, 4, 5))
    y = relay.var("y", shape=(2, 6, 5))
    a = relay.reshape(relay.transpose(x, (0, 2, 1, 3)), (2, 12, 5))
    func = relay.Function([x, y], relay.nn.batch_matmul(a, y))
    names = op_names(fold(func))
    assert "transpose" in names and "nn.batch_matmul" in names, names
    xv = RNG.standard_normal((2, 3, 4, 5)).astype("float32")
    yv = RNG.standard_normal((2, 6, 5)).astype("float32")
    want = xv.transpose(0, 2, 1, 3).reshape(2, 12, 5) @ yv.transpose(0, 2, 1)
    np.testing.assert_allclose(run(func, {"x": xv, "y": yv}), want, rtol=1e-5, atol=1e-5)


def test_output_with_a_second_reader_is_not_folded():
    """The transposed product is also an output: the product keeps its own layout."""
    x = relay.var("x", shape=(3, 7, 6))
    y = relay.var("y", shape=(3, 5, 6))
    c = relay.nn.batch_matmul(x, y)
    t = relay.transpose(c, (1, 0, 2))
    func = relay.Function([x, y], relay.Tuple([relay.reshape(t, (7, 15)), c]))
    folded = fold(func)
    assert "nn.batch_matmul" in op_names(folded)
    xv = RNG.standard_normal((3, 7, 6)).astype("float32")
    yv = RNG.standard_normal((3, 5, 6)).astype("float32")
    with PassContext(opt_level=3):
        lib = relay.build(func)
    gm = graph_executor.GraphModule(lib["default"](cpu()))
    gm.run(x=xv, y=yv)
    prod = xv @ yv.transpose(0, 2, 1)
    np.testing.assert_allclose(gm.get_output(0).numpy(), prod.transpose(1, 0, 2).reshape(7, 15),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gm.get_output(1).numpy(), prod, rtol=1e-5, atol=1e-5)


def test_transposed_operand_flags_and_broadcast_batch():
    """transpose_a / transpose_b operands fold too; a batch of 1 against 3 is left alone."""
    x = relay.var("x", shape=(6, 3, 4))   # [K, B, M] -> transpose to [B, K, M]
    y = relay.var("y", shape=(5, 3, 6))   # [N, B, K] -> transpose to [B, N, K]
    func = relay.Function([x, y], relay.nn.batch_matmul(
        relay.transpose(x, (1, 0, 2)), relay.transpose(y, (1, 0, 2)), transpose_a=True,
        transpose_b=True))
    folded = fold(func)
    assert "transpose" not in op_names(folded)
    xv = RNG.standard_normal((6, 3, 4)).astype("float32")
    yv = RNG.standard_normal((5, 3, 6)).astype("float32")
    want = np.einsum("kbm,nbk->bmn", xv, yv)
    np.testing.assert_allclose(run(func, {"x": xv, "y": yv}), want, rtol=1e-5, atol=1e-5)

    z = relay.var("z", shape=(1, 4, 6))
    w = relay.var("w", shape=(6, 3, 5))
    bcast = relay.Function([z, w], relay.nn.batch_matmul(z, relay.transpose(w, (1, 0, 2)),
                                                         transpose_b=False))
    assert "transpose" in op_names(fold(bcast))


def onnx_attention(seq, heads, dim, mask: bool, fused_qkv: bool = False):
    hidden = heads * dim
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("split", [1, seq, heads, dim]), ("merged", [1, seq, hidden]))]
    inits.append(numpy_helper.from_array(np.array(math.sqrt(dim), np.float32), "scale"))
    nodes = []
    if fused_qkv:  # GPT-2's one projection, split three ways
        inits.append(numpy_helper.from_array(np.array([hidden] * 3, np.int64), "sizes"))
        nodes.append(helper.make_node("Split", ["qkv", "sizes"], ["q", "k", "v"], axis=2))
    for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes += [helper.make_node("Reshape", [name, "split"], [f"{name}4"]),
                  helper.make_node("Transpose", [f"{name}4"], [f"{name}h"], perm=perm)]
    nodes += [helper.make_node("MatMul", ["qh", "kh"], ["s"]),
              helper.make_node("Div", ["s", "scale"], ["s2"])]
    scores = "s2"
    if mask:
        causal = np.triu(np.full((seq, seq), -10000.0, np.float32), k=1)[None, None]
        inits.append(numpy_helper.from_array(causal, "mask"))
        nodes.append(helper.make_node("Add", ["s2", "mask"], ["s3"]))
        scores = "s3"
    nodes += [helper.make_node("Softmax", [scores], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "vh"], ["c"]),
              helper.make_node("Transpose", ["c"], ["ct"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ct", "merged"], ["y"])]
    inputs = [helper.make_tensor_value_info("qkv", TensorProto.FLOAT, [1, seq, 3 * hidden])] \
        if fused_qkv else [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, seq, hidden])
                           for n in "qkv"]
    graph = helper.make_graph(nodes, "attn", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                             [1, seq, hidden])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("seq,heads,dim,mask,fused", [(10, 2, 7, False, False),
                                                     (32, 4, 16, True, False),
                                                     (32, 4, 16, True, True),
                                                     (9, 3, 5, False, True)])
def test_onnx_attention_matches_onnxruntime(seq, heads, dim, mask, fused):
    model = onnx_attention(seq, heads, dim, mask, fused)
    feeds = {"qkv": RNG.standard_normal((1, seq, 3 * heads * dim)).astype("float32")} if fused \
        else {n: RNG.standard_normal((1, seq, heads * dim)).astype("float32") for n in "qkv"}
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    mod, params = relay.frontend.from_onnx(model)
    with PassContext(opt_level=3):
        lib = relay.build(mod, params=params)
    gm = graph_executor.GraphModule(lib["default"](cpu()))
    gm.run(**feeds)
    np.testing.assert_allclose(gm.get_output(0).numpy(), want, rtol=1e-5, atol=1e-5)
    kernels = [n["attrs"]["func_name"] for n in json.loads(lib.get_graph_json())["nodes"]
               if n["op"] == "tvm_op"]
    assert not any("transpose" in k or "split" in k for k in kernels), kernels


def test_split_heads_fold_as_windows_of_the_fused_projection():
    """GPT-2's fused QKV: split three ways, each split into heads: the products read windows
    of the one [seq, 3 * heads, dim] view, and no split or transpose is left."""
    seq, heads, dim = 12, 3, 8
    hidden = heads * dim
    qkv = relay.var("qkv", shape=(1, seq, 3 * hidden))
    q, k, v = (relay.TupleGetItem(relay.split(qkv, 3, axis=2).astuple(), i) for i in range(3))
    scores = relay.nn.batch_matmul(split_heads(q, seq, heads, dim, (0, 2, 1, 3)),
                                   split_heads(k, seq, heads, dim, (0, 2, 3, 1)),
                                   transpose_b=False)
    ctx = relay.nn.batch_matmul(scores, split_heads(v, seq, heads, dim, (0, 2, 1, 3)),
                                transpose_b=False)
    out = relay.reshape(relay.transpose(relay.reshape(ctx, (1, heads, seq, dim)),
                                        (0, 2, 1, 3)), (1, seq, hidden))
    func = relay.Function([qkv], out)
    names = op_names(fold(func))
    assert "split" not in names and "transpose" not in names, names
    xv = RNG.standard_normal((1, seq, 3 * hidden)).astype("float32")
    qv, kv, vv = (xv[0, :, i * hidden:(i + 1) * hidden].reshape(seq, heads, dim)
                  .transpose(1, 0, 2).astype(np.float64) for i in range(3))
    want = ((qv @ kv.transpose(0, 2, 1)) @ vv).transpose(1, 0, 2).reshape(1, seq, hidden)
    np.testing.assert_allclose(run(func, {"qkv": xv}), want, rtol=1e-4, atol=1e-4)
