"""ONNX models built in-repo with onnx.helper: the families the nine light models lack.

Every builder returns `(onnx.ModelProto, feeds)`: static shapes, weights and inputs drawn from
`numpy.random.default_rng(seed)`, the model checked with `onnx.checker.check_model(full_check=
True)` (which also runs strict shape inference against the declared output shapes). Nothing
comes from the network.

    GENERATED_MODELS        name -> builder at benchmark size (the `--generated` set of
                            benchmarks/models.py)
    build(name)             (model, feeds) of one registered model
    write_models(dir)       writes <name>.onnx (and <name>_inputs.npz) for each, returns paths

The builders take their sizes as keyword arguments, so tests build reduced variants of the same
graph (tests/models/test_generated_models.py).
"""
from __future__ import annotations

import functools
import math
import os
import tempfile
from typing import Callable

import numpy as np

OPSET = 17  # LayerNormalization is opset 17; everything else here is older
IR_VERSION = 8  # the lowest IR that carries opset 17, so every onnxruntime build loads it


class _GraphBuilder:
    """Collects nodes and initializers; names outputs `<op>_<k>`; draws weights from one rng."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.initializers: list = []
        self.inputs: list = []
        self._count = 0

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def input(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """Declare a float32 graph input; returns its seeded random feed."""
        self.declare(name, shape)
        return self.rng.standard_normal(shape).astype(np.float32)

    def declare(self, name: str, shape: tuple, elem_type: int = 1) -> None:
        """Declare a graph input whose dims may be symbols ("batch"), as exporters write
        dynamic axes (elem_type: an onnx.TensorProto type, float32 by default)."""
        from onnx import helper
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))

    def const(self, array, hint: str = "c") -> str:
        from onnx import numpy_helper
        name = self._name(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, shape: tuple[int, ...], fan_in: int, hint: str = "w") -> str:
        """He/LeCun-scaled normal weights, so activations keep unit scale through the stack."""
        data = self.rng.normal(0.0, 1.0 / math.sqrt(fan_in), shape).astype(np.float32)
        return self.const(data, hint)

    def uniform(self, shape: tuple[int, ...], low: float, high: float, hint: str = "b") -> str:
        return self.const(self.rng.uniform(low, high, shape).astype(np.float32), hint)

    def op(self, op_type: str, inputs: list[str], outputs: int = 1, **attrs):
        """Append one node; returns its output name (or a list when outputs > 1)."""
        from onnx import helper
        names = [self._name(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, names, **attrs))
        return names[0] if outputs == 1 else names

    def model(self, graph_name: str, outputs: list[tuple[str, tuple[int, ...]]]):
        """The checked ModelProto; graph outputs are renamed `output_<i>` for readability."""
        import onnx
        from onnx import TensorProto, helper
        renamed = []
        for i, (name, shape) in enumerate(outputs):
            self.nodes.append(helper.make_node("Identity", [name], [f"output_{i}"]))
            renamed.append(helper.make_tensor_value_info(f"output_{i}", TensorProto.FLOAT, shape))
        graph = helper.make_graph(self.nodes, graph_name, self.inputs, renamed,
                                  initializer=self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="relayjit-benchmarks")
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model, full_check=True)
        return model


# ---------------------------------------------------------------- transformer pieces


def _layer_norm(g: _GraphBuilder, x: str, hidden: int, decomposed: bool, eps: float) -> str:
    gamma = g.uniform((hidden,), 0.8, 1.2, "ln_gamma")
    beta = g.uniform((hidden,), -0.1, 0.1, "ln_beta")
    if not decomposed:
        return g.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)
    # the form torch.onnx emits below opset 17
    mean = g.op("ReduceMean", [x], axes=[-1], keepdims=1)
    centred = g.op("Sub", [x, mean])
    var = g.op("ReduceMean", [g.op("Pow", [centred, g.const(np.float32(2.0))])],
               axes=[-1], keepdims=1)
    std = g.op("Sqrt", [g.op("Add", [var, g.const(np.float32(eps))])])
    normed = g.op("Div", [centred, std])
    return g.op("Add", [g.op("Mul", [normed, gamma]), beta])


def _linear(g: _GraphBuilder, x: str, n_in: int, n_out: int) -> str:
    """MatMul + Add with a [n_in, n_out] weight, as transformer exporters emit it."""
    y = g.op("MatMul", [x, g.weight((n_in, n_out), n_in)])
    return g.op("Add", [y, g.uniform((n_out,), -0.1, 0.1)])


def _gelu_erf(g: _GraphBuilder, x: str) -> str:
    """0.5 * x * (1 + erf(x / sqrt 2)): BERT's GELU as exported."""
    erf = g.op("Erf", [g.op("Div", [x, g.const(np.float32(math.sqrt(2.0)))])])
    one_plus = g.op("Add", [erf, g.const(np.float32(1.0))])
    return g.op("Mul", [g.op("Mul", [x, one_plus]), g.const(np.float32(0.5))])


def _gelu_tanh(g: _GraphBuilder, x: str) -> str:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): GPT-2's "gelu_new" as exported."""
    cube = g.op("Pow", [x, g.const(np.float32(3.0))])
    inner = g.op("Add", [x, g.op("Mul", [cube, g.const(np.float32(0.044715))])])
    t = g.op("Tanh", [g.op("Mul", [inner, g.const(np.float32(math.sqrt(2.0 / math.pi)))])])
    half_x = g.op("Mul", [x, g.const(np.float32(0.5))])
    return g.op("Mul", [half_x, g.op("Add", [t, g.const(np.float32(1.0))])])


def _leading_dims_then(g: _GraphBuilder, x: str, tail: list[int]) -> str:
    """Concat(Shape(x)[0], Shape(x)[1], tail): a reshape target over x's dynamic batch and
    sequence, as torch.onnx.export writes `x.view(x.size(0), x.size(1), ...)`."""
    shape = g.op("Shape", [x])
    dims = [g.op("Unsqueeze", [g.op("Gather", [shape, g.const(np.array(i, np.int64))], axis=0),
                               g.const(np.array([0], np.int64))]) for i in (0, 1)]
    return g.op("Concat", [*dims, g.const(np.array(tail, np.int64))], axis=0)


def _split_heads(g: _GraphBuilder, x: str, seq: int | None, heads: int, head_dim: int,
                 perm: list[int]) -> str:
    """[b, s, h*d] -> [b, s, h, d] -> perm; seq None: b and s read from x's shape."""
    target = (g.const(np.array([1, seq, heads, head_dim], np.int64)) if seq is not None
              else _leading_dims_then(g, x, [heads, head_dim]))
    return g.op("Transpose", [g.op("Reshape", [x, target])], perm=perm)


def _attention(g: _GraphBuilder, q: str, k: str, v: str, seq: int | None, hidden: int,
               heads: int, mask: str | None) -> str:
    """Scaled dot-product attention over Reshape/Transpose head splits; back to [b, seq,
    hidden] (seq None: batch and sequence dynamic, the reshape targets computed)."""
    head_dim = hidden // heads
    qh = _split_heads(g, q, seq, heads, head_dim, [0, 2, 1, 3])  # [b, h, s, d]
    kh = _split_heads(g, k, seq, heads, head_dim, [0, 2, 3, 1])  # [b, h, d, s]
    vh = _split_heads(g, v, seq, heads, head_dim, [0, 2, 1, 3])  # [b, h, s, d]
    scores = g.op("Div", [g.op("MatMul", [qh, kh]), g.const(np.float32(math.sqrt(head_dim)))])
    if mask is not None:
        scores = g.op("Add", [scores, mask])
    probs = g.op("Softmax", [scores], axis=-1)
    ctx = g.op("Transpose", [g.op("MatMul", [probs, vh])], perm=[0, 2, 1, 3])
    target = (g.const(np.array([1, seq, hidden], np.int64)) if seq is not None
              else _leading_dims_then(g, q, [hidden]))
    return g.op("Reshape", [ctx, target])


def bert_encoder(seq: int = 128, hidden: int = 768, heads: int = 12, ffn: int = 3072,
                 layers: int = 2, decomposed_ln: bool = False, seed: int = 0):
    """BERT-base-like post-LN encoder layers: attention + residual + LN, GELU(erf) FFN + LN."""
    g = _GraphBuilder(seed)
    feeds = {"hidden_states": g.input("hidden_states", (1, seq, hidden))}
    x = _encoder_layers(g, "hidden_states", seq, hidden, heads, ffn, layers, decomposed_ln, None)
    return g.model("bert_encoder", [(x, (1, seq, hidden))]), feeds


def _encoder_layers(g: _GraphBuilder, x: str, seq: int | None, hidden: int, heads: int,
                    ffn: int, layers: int, decomposed_ln: bool, mask: str | None) -> str:
    """Post-LN BERT layers (seq None: dynamic batch and sequence, see _attention)."""
    for _ in range(layers):
        q, k, v = (_linear(g, x, hidden, hidden) for _ in range(3))
        attn = _linear(g, _attention(g, q, k, v, seq, hidden, heads, mask), hidden, hidden)
        x = _layer_norm(g, g.op("Add", [attn, x]), hidden, decomposed_ln, 1e-12)
        h = _linear(g, _gelu_erf(g, _linear(g, x, hidden, ffn)), ffn, hidden)
        x = _layer_norm(g, g.op("Add", [h, x]), hidden, decomposed_ln, 1e-12)
    return x


def bert_encoder_dynamic(hidden: int = 768, heads: int = 12, ffn: int = 3072, layers: int = 2,
                         vocab: int = 8192, max_positions: int = 512, seed: int = 0):
    """A BERT-style encoder as torch.onnx.export writes it with dynamic_axes {0: "batch",
    1: "sequence"} on input_ids and attention_mask: word + position embeddings (the position
    table sliced to the sequence length read from Shape) and LayerNorm, the additive mask
    (1 - mask) * -10000 over [batch, 1, 1, sequence], then bert_encoder's layers with every
    head split and merge reshaped to Concat(Shape(x)[0], Shape(x)[1], ...). Returns the
    model alone: feed it bert_feeds(batch, sequence)."""
    from onnx import TensorProto
    g = _GraphBuilder(seed)
    g.declare("input_ids", ("batch", "sequence"), TensorProto.INT64)
    g.declare("attention_mask", ("batch", "sequence"), TensorProto.INT64)
    words = g.op("Gather", [g.weight((vocab, hidden), hidden, "word_embeddings"), "input_ids"],
                 axis=0)
    seq_len = g.op("Gather", [g.op("Shape", ["input_ids"]), g.const(np.array([1], np.int64))],
                   axis=0)
    positions = g.op("Slice", [g.weight((max_positions, hidden), hidden, "position_embeddings"),
                               g.const(np.array([0], np.int64)), seq_len,
                               g.const(np.array([0], np.int64))])
    x = _layer_norm(g, g.op("Add", [words, positions]), hidden, False, 1e-12)
    mask = g.op("Cast", [g.op("Unsqueeze", ["attention_mask",
                                            g.const(np.array([1, 2], np.int64))])],
                to=TensorProto.FLOAT)
    mask = g.op("Mul", [g.op("Sub", [g.const(np.float32(1.0)), mask]),
                        g.const(np.float32(-10000.0))])
    x = _encoder_layers(g, x, None, hidden, heads, ffn, layers, False, mask)
    return g.model("bert_encoder_dynamic", [(x, ("batch", "sequence", hidden))])


def bert_feeds(batch: int, sequence: int, vocab: int = 8192, seed: int = 0) -> dict:
    """input_ids drawn from the vocabulary; attention_mask 1, the last quarter of every row
    but the first 0 (padding), so the mask matters."""
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, sequence), np.int64)
    mask[1:, sequence - sequence // 4:] = 0
    return {"input_ids": rng.integers(0, vocab, (batch, sequence), dtype=np.int64),
            "attention_mask": mask}


def gpt2_decoder(seq: int = 128, hidden: int = 768, heads: int = 12, layers: int = 1,
                 decomposed_ln: bool = True, seed: int = 0):
    """GPT-2-like pre-LN decoder blocks: fused QKV projection split three ways, an additive
    causal mask before Softmax, tanh-GELU MLP (4x hidden), and the final LayerNorm."""
    g = _GraphBuilder(seed)
    feeds = {"hidden_states": g.input("hidden_states", (1, seq, hidden))}
    causal = np.triu(np.full((seq, seq), -10000.0, np.float32), k=1)[None, None]
    mask = g.const(causal, "causal_mask")
    x = "hidden_states"
    for _ in range(layers):
        qkv = _linear(g, _layer_norm(g, x, hidden, decomposed_ln, 1e-5), hidden, 3 * hidden)
        q, k, v = g.op("Split", [qkv, g.const(np.array([hidden] * 3, np.int64))], outputs=3,
                       axis=2)
        attn = _linear(g, _attention(g, q, k, v, seq, hidden, heads, mask), hidden, hidden)
        x = g.op("Add", [x, attn])
        h = _linear(g, _layer_norm(g, x, hidden, decomposed_ln, 1e-5), hidden, 4 * hidden)
        x = g.op("Add", [x, _linear(g, _gelu_tanh(g, h), 4 * hidden, hidden)])
    x = _layer_norm(g, x, hidden, decomposed_ln, 1e-5)
    return g.model("gpt2_decoder", [(x, (1, seq, hidden))]), feeds


# ---------------------------------------------------------------- convolutional nets


def _conv(g: _GraphBuilder, x: str, c_in: int, c_out: int, k: int, stride: int = 1,
          groups: int = 1, bias: bool = True) -> str:
    w = g.weight((c_out, c_in // groups, k, k), c_in // groups * k * k)
    inputs = [x, w] + ([g.uniform((c_out,), -0.1, 0.1)] if bias else [])
    return g.op("Conv", inputs, kernel_shape=[k, k], strides=[stride, stride],
                pads=[k // 2] * 4, group=groups)


def _bn(g: _GraphBuilder, x: str, c: int) -> str:
    return g.op("BatchNormalization", [
        x, g.uniform((c,), 0.5, 1.5, "bn_scale"), g.uniform((c,), -0.2, 0.2, "bn_shift"),
        g.uniform((c,), -0.2, 0.2, "bn_mean"), g.uniform((c,), 0.5, 1.5, "bn_var")],
        epsilon=1e-5)


def _relu6(g: _GraphBuilder, x: str) -> str:
    return g.op("Clip", [x, g.const(np.float32(0.0)), g.const(np.float32(6.0))])


def _conv_bn(g: _GraphBuilder, x: str, c_in: int, c_out: int, k: int, stride: int = 1,
             groups: int = 1, act: bool = True) -> str:
    y = _bn(g, _conv(g, x, c_in, c_out, k, stride, groups, bias=False), c_out)
    return _relu6(g, y) if act else y


# (expansion t, output channels, stride) of each inverted-residual block after the stem:
# MobileNet-v2's first three stages, one block each plus a residual repeat
MOBILENET_BLOCKS = ((1, 16, 1), (6, 24, 2), (6, 24, 1), (6, 32, 2), (6, 32, 1), (6, 64, 2),
                    (6, 64, 1))


def mobilenet_v2(size: int = 224, stem: int = 32, blocks=MOBILENET_BLOCKS, head: int = 1280,
                 classes: int = 1000, seed: int = 0, batch: int | str = 1):
    """MobileNet-v2-style stack: stride-2 stem, inverted residuals (1x1 expand + BN + Relu6,
    3x3 depthwise + BN + Relu6, 1x1 project + BN, residual Add when shapes allow), 1x1 head,
    GlobalAveragePool, Flatten, Gemm. A named batch ("batch") is a dynamic axis, as
    torch.onnx.export's dynamic_axes write it; then feeds is None (image_feeds gives them)."""
    g = _GraphBuilder(seed)
    if isinstance(batch, str):
        g.declare("input", (batch, 3, size, size))
        feeds = None
    else:
        feeds = {"input": g.input("input", (batch, 3, size, size))}
    x = _conv_bn(g, "input", 3, stem, 3, stride=2)
    c = stem
    for t, c_out, stride in blocks:
        hidden = c * t
        y = _conv_bn(g, x, c, hidden, 1) if t != 1 else x
        y = _conv_bn(g, y, hidden, hidden, 3, stride=stride, groups=hidden)
        y = _conv_bn(g, y, hidden, c_out, 1, act=False)
        x = g.op("Add", [x, y]) if stride == 1 and c == c_out else y
        c = c_out
    x = g.op("Flatten", [g.op("GlobalAveragePool", [_conv_bn(g, x, c, head, 1)])], axis=1)
    logits = g.op("Gemm", [x, g.weight((classes, head), head), g.uniform((classes,), -0.1, 0.1)],
                  transB=1)
    return g.model("mobilenet_v2", [(logits, (batch, classes))]), feeds


def resnet(size: int = 224, widths=(64, 128, 256, 512), blocks=(2, 2, 2, 2),
           classes: int = 1000, batch: int = 1, seed: int = 0):
    """A ResNet-18-style CNN (BatchNorm folded into the convs' biases, as a quantizer's
    pre-processing leaves it): 7x7/2 stem + 3x3/2 max pool, basic blocks of two 3x3 convs
    with an identity (or 1x1/2 projection) shortcut, global average pool, Gemm."""
    g = _GraphBuilder(seed)
    feeds = {"input": g.input("input", (batch, 3, size, size))}
    x = g.op("Relu", [_conv(g, "input", 3, widths[0], 7, 2)])
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = widths[0]
    for stage, (width, count) in enumerate(zip(widths, blocks)):
        for block in range(count):
            stride = 2 if stage > 0 and block == 0 else 1
            y = g.op("Relu", [_conv(g, x, c, width, 3, stride)])
            y = _conv(g, y, width, width, 3)
            shortcut = x if stride == 1 and c == width else _conv(g, x, c, width, 1, stride)
            x, c = g.op("Relu", [g.op("Add", [y, shortcut])]), width
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    logits = g.op("Gemm", [x, g.weight((classes, c), c), g.uniform((classes,), -0.1, 0.1)],
                  transB=1)
    return g.model("resnet", [(logits, (batch, classes))]), feeds


def image_feeds(batch: int, size: int = 224, seed: int = 0) -> dict:
    """A seeded random NCHW float32 batch for the image models' "input"."""
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((batch, 3, size, size)).astype(np.float32)}


def _double_conv(g: _GraphBuilder, x: str, c_in: int, c_out: int) -> str:
    x = g.op("Relu", [_conv(g, x, c_in, c_out, 3)])
    return g.op("Relu", [_conv(g, x, c_out, c_out, 3)])


def unet(size: int = 128, base: int = 16, classes: int = 2, resize_mode: str = "linear",
         seed: int = 0):
    """A three-level UNet: double 3x3 convs, MaxPool 2x2 down; up once through ConvTranspose
    2x2 stride 2 and once through Resize x2 + 1x1 conv; skip Concat on channels; 1x1 head."""
    g = _GraphBuilder(seed)
    feeds = {"input": g.input("input", (1, 3, size, size))}
    skip1 = _double_conv(g, "input", 3, base)
    pooled = g.op("MaxPool", [skip1], kernel_shape=[2, 2], strides=[2, 2])
    skip2 = _double_conv(g, pooled, base, 2 * base)
    pooled = g.op("MaxPool", [skip2], kernel_shape=[2, 2], strides=[2, 2])
    x = _double_conv(g, pooled, 2 * base, 4 * base)
    up = g.op("ConvTranspose", [x, g.weight((4 * base, 2 * base, 2, 2), 4 * base * 4),
                                g.uniform((2 * base,), -0.1, 0.1)],
              kernel_shape=[2, 2], strides=[2, 2])
    x = _double_conv(g, g.op("Concat", [up, skip2], axis=1), 4 * base, 2 * base)
    scales = g.const(np.array([1.0, 1.0, 2.0, 2.0], np.float32), "scales")
    resize_attrs = ({"mode": "linear", "coordinate_transformation_mode": "half_pixel"}
                    if resize_mode == "linear" else {"mode": "nearest"})
    up = g.op("Resize", [x, "", scales], **resize_attrs)
    up = _conv(g, up, 2 * base, base, 1)
    x = _double_conv(g, g.op("Concat", [up, skip1], axis=1), 2 * base, base)
    out = _conv(g, x, base, classes, 1)
    return g.model("unet", [(out, (1, classes, size, size))]), feeds


# ---------------------------------------------------------------- recurrent and dense


def recurrent(kind: str = "LSTM", seq: int = 32, batch: int = 1, input_size: int = 128,
              hidden: int = 256, linear_before_reset: int = 1, seed: int = 0,
              direction: str = "forward"):
    """One LSTM or GRU layer (ONNX gate order) with biases, forward unless said; the sequence
    and the initial states are graph inputs; outputs Y, Y_h (and Y_c for LSTM)."""
    gates = {"LSTM": 4, "GRU": 3}[kind]
    dirs = 2 if direction == "bidirectional" else 1
    g = _GraphBuilder(seed)
    feeds = {"X": g.input("X", (seq, batch, input_size)),
             "initial_h": g.input("initial_h", (dirs, batch, hidden))}
    w = g.weight((dirs, gates * hidden, input_size), input_size, "W")
    r = g.weight((dirs, gates * hidden, hidden), hidden, "R")
    b = g.uniform((dirs, 2 * gates * hidden), -0.1, 0.1, "B")
    inputs = ["X", w, r, b, "", "initial_h"]
    attrs = {"hidden_size": hidden, "direction": direction}
    if kind == "LSTM":
        feeds["initial_c"] = g.input("initial_c", (dirs, batch, hidden))
        inputs.append("initial_c")
    else:
        attrs["linear_before_reset"] = linear_before_reset  # torch exports 1
    outs = g.op(kind, inputs, outputs=3 if kind == "LSTM" else 2, **attrs)
    shapes = [(seq, dirs, batch, hidden)] + [(dirs, batch, hidden)] * (len(outs) - 1)
    return g.model(kind.lower(), list(zip(outs, shapes))), feeds


def lenet(batch: int = 8, seed: int = 0):
    """LeNet-5 on 28x28 digits: two 5x5 convs (the first padded) with Relu and 2x2 max pools,
    then three Gemm layers (400 -> 120 -> 84 -> 10). Small work: a few microseconds a kernel."""
    g = _GraphBuilder(seed)
    feeds = {"input": g.input("input", (batch, 1, 28, 28))}
    x = g.op("Relu", [_conv(g, "input", 1, 6, 5)])
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.op("Conv", [x, g.weight((16, 6, 5, 5), 150), g.uniform((16,), -0.1, 0.1)],
             kernel_shape=[5, 5])
    x = g.op("MaxPool", [g.op("Relu", [x])], kernel_shape=[2, 2], strides=[2, 2])
    x = g.op("Flatten", [x], axis=1)
    for i, (n_in, n_out) in enumerate(((400, 120), (120, 84), (84, 10))):
        x = g.op("Gemm", [x, g.weight((n_out, n_in), n_in), g.uniform((n_out,), -0.1, 0.1)],
                 transB=1)
        x = g.op("Relu", [x]) if i < 2 else x
    return g.model("lenet", [(x, (batch, 10))]), feeds


def mlp(batch: int = 1, sizes: tuple[int, ...] = (784, 512, 256, 10), seed: int = 0):
    """Gemm (transB=1, torch's Linear) + Relu layers; the last Gemm has no activation."""
    g = _GraphBuilder(seed)
    feeds = {"input": g.input("input", (batch, sizes[0]))}
    x = "input"
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        x = g.op("Gemm", [x, g.weight((n_out, n_in), n_in), g.uniform((n_out,), -0.1, 0.1)],
                 transB=1)
        if i < len(sizes) - 2:
            x = g.op("Relu", [x])
    return g.model("mlp", [(x, (batch, sizes[-1]))]), feeds


# ---------------------------------------------------------------- quantized (onnxruntime's tools)


def quantize_static(model, feeds: dict, fmt: str = "qdq", samples: int = 8, seed: int = 1):
    """model quantized by onnxruntime.quantization.quantize_static: uint8 activations, int8
    per-channel weights, calibrated (min/max) on `samples` seeded random inputs shaped like
    feeds; fmt "qdq" (QuantizeLinear/DequantizeLinear pairs) or "qoperator" (QLinearConv,
    com.microsoft QLinearAdd, ...). onnxruntime is needed to build these, not to run them."""
    import onnx
    from onnxruntime import quantization as q

    rng = np.random.default_rng(seed)
    batches = [{k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in feeds.items()}
               for _ in range(samples)]

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self._left = iter(batches)

        def get_next(self):
            return next(self._left, None)

    formats = {"qdq": q.QuantFormat.QDQ, "qoperator": q.QuantFormat.QOperator}
    with tempfile.TemporaryDirectory(prefix="relayjit-quantize-") as tmp:
        out = os.path.join(tmp, "quantized.onnx")
        q.quantize_static(model, out, Reader(), quant_format=formats[fmt], per_channel=True,
                          activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8)
        return onnx.load(out)


def quantize_dynamic(model):
    """model quantized by onnxruntime.quantization.quantize_dynamic (int8 weights; the
    activations quantized at run time: DynamicQuantizeLinear + MatMulInteger)."""
    import onnx
    from onnxruntime import quantization as q
    with tempfile.TemporaryDirectory(prefix="relayjit-quantize-") as tmp:
        out = os.path.join(tmp, "quantized.onnx")
        q.quantize_dynamic(model, out, weight_type=q.QuantType.QInt8)
        return onnx.load(out)


def resnet_int8(fmt: str = "qdq", **sizes):
    """The ResNet-style CNN quantized statically (QDQ or QOperator form)."""
    model, feeds = resnet(**sizes)
    return quantize_static(model, feeds, fmt), feeds


def bert_encoder_int8(**sizes):
    """The BERT-style encoder quantized dynamically."""
    model, feeds = bert_encoder(**sizes)
    return quantize_dynamic(model), feeds


# ---------------------------------------------------------------- registry

GENERATED_MODELS: dict[str, Callable[[], tuple]] = {
    "gen_bert_encoder": bert_encoder,
    "gen_gpt2_decoder": gpt2_decoder,
    "gen_mobilenet_v2": mobilenet_v2,
    "gen_unet": unet,
    "gen_lstm": functools.partial(recurrent, "LSTM"),
    "gen_gru": functools.partial(recurrent, "GRU"),
    "gen_mlp_b1": functools.partial(mlp, batch=1),
    "gen_mlp_b32": functools.partial(mlp, batch=32),
    "gen_resnet18": resnet,
    "gen_lenet_b8": lenet,
}

# quantized with onnxruntime's tools (benchmarks/models.py --quantized): name -> (builder,
# the generated float model it quantizes)
QUANTIZED_MODELS: dict[str, tuple[Callable[[], tuple], str]] = {
    "gen_resnet18_qdq": (resnet_int8, "gen_resnet18"),
    "gen_resnet18_qoperator": (functools.partial(resnet_int8, "qoperator"), "gen_resnet18"),
    "gen_bert_encoder_int8": (bert_encoder_int8, "gen_bert_encoder"),
}


# models with dynamic axes (benchmarks/models.py --dynamic): name -> (builder of the model,
# feeds(**shape), the shapes benchmarked as keyword arguments of feeds)
DYNAMIC_MODELS: dict[str, tuple[Callable, Callable, list[dict]]] = {
    "gen_bert_encoder_dynamic": (
        bert_encoder_dynamic, bert_feeds,
        [{"batch": b, "sequence": s} for b in (1, 4) for s in (8, 32, 128, 384)]),
    "gen_mobilenet_v2_dynamic": (
        functools.partial(lambda **kw: mobilenet_v2(**kw)[0], batch="batch"), image_feeds,
        [{"batch": b} for b in (1, 4, 16)]),
}


def build(name: str):
    """(model, feeds) of a registered generated model (float or quantized)."""
    if name in QUANTIZED_MODELS:
        return QUANTIZED_MODELS[name][0]()
    if name not in GENERATED_MODELS:
        raise ValueError(f"unknown generated model {name!r}; known: "
                         f"{', '.join([*GENERATED_MODELS, *QUANTIZED_MODELS])}")
    return GENERATED_MODELS[name]()


def write_models(directory: str, names=None) -> dict[str, str]:
    """Write <name>.onnx and <name>_inputs.npz (the seeded feeds) into `directory`;
    returns name -> model path."""
    import onnx
    os.makedirs(directory, exist_ok=True)
    paths = {}
    for name in GENERATED_MODELS if names is None else names:
        model, feeds = build(name)
        paths[name] = os.path.join(directory, f"{name}.onnx")
        onnx.save(model, paths[name])
        np.savez(os.path.join(directory, f"{name}_inputs.npz"), **feeds)
    return paths


if __name__ == "__main__":
    import sys
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "generated_models"
    for model_name, model_path in write_models(out_dir).items():
        print(f"{model_name}: {model_path}")
