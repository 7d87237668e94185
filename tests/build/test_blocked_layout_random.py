"""Random conv networks built with and without the channel-blocked layout compute the same.

Seeded networks of convs (1x1, 3x3, strided), depthwise convs, activations, bias adds,
residual adds, concatenations and pools over channel counts that are and are not whole
blocks, ending in a global pool, a softmax over channels, a flatten + dense or nothing. The
pass's cost guard is lifted so that every network that can go blocked does. This is how the
in-place bug of a depthwise conv adding its own input was found (test_in_place_epilogue).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from compiler import relay
from compiler.ir.module import IRModule
from compiler.passes.convert_blocked_layout import BLOCKED_LAYOUT, BLOCKED_LAYOUT_GUARD
from compiler.transform import PassContext
from runtime import cpu
from runtime.graph_executor import GraphModule

# 44 and 55 have a depthwise conv adding its own input (the in-place bug's pattern)
SEEDS = (*range(10), 44, 55)


def _network(rng: np.random.Generator):
    """(function, params, input shape) of a random network."""
    channels = int(rng.choice([8, 16, 24, 32, 48]))
    size = int(rng.choice([7, 9, 14]))
    x = relay.var("x", shape=(1, channels, size, size), dtype="float32")
    params: dict = {}

    def const(value):
        name = f"p{len(params)}"
        params[name] = value.astype("float32")
        return relay.var(name, shape=value.shape, dtype="float32")

    live = [(x, channels, size)]
    for _ in range(int(rng.integers(3, 9))):
        y, c, h = live[-1]
        op = rng.choice(["conv", "conv", "conv", "depthwise", "act", "bias", "add", "concat",
                         "pool"])
        if op == "conv":
            k = int(rng.choice([8, 16, 24, 32, 40, 64]))
            ks = int(rng.choice([1, 3]))
            stride = int(rng.choice([1, 1, 2])) if h > 4 else 1
            w = rng.standard_normal((k, c, ks, ks)) / np.sqrt(c * ks * ks)
            y = relay.nn.conv2d(y, const(w), strides=(stride, stride),
                                padding=(ks // 2, ks // 2))
            c, h = k, (h + 2 * (ks // 2) - ks) // stride + 1
        elif op == "depthwise":
            y = relay.nn.conv2d(y, const(rng.standard_normal((c, 1, 3, 3)) / 3), padding=(1, 1),
                                groups=c)
        elif op == "act":
            y = {"relu": relay.nn.relu, "sigmoid": relay.sigmoid, "tanh": relay.tanh,
                 "clip": lambda v: relay.clip(v, 0.0, 6.0)}[rng.choice(
                     ["relu", "sigmoid", "tanh", "clip"])](y)
        elif op == "bias":
            y = relay.nn.bias_add(y, const(rng.standard_normal((c,))))
        elif op == "add":
            same = [t for t in live[:-1] if t[1:] == (c, h)]
            y = relay.add(y, same[-1][0] if same else const(rng.standard_normal((c, 1, 1))))
        elif op == "concat":
            same = [t for t in live[:-1] if t[2] == h]
            if same:
                y, c = relay.concatenate([y, same[-1][0]], axis=1), c + same[-1][1]
        elif op == "pool" and h >= 3:
            pool = relay.nn.max_pool2d if rng.integers(2) else relay.nn.avg_pool2d
            y, h = pool(y, pool_size=(3, 3), strides=(2, 2), padding=(1, 1)), (h - 1) // 2 + 1
        live.append((y, c, h))
    tail = rng.choice(["none", "mean", "global_pool", "softmax", "dense"])
    if tail == "mean":
        y = relay.mean(y, axis=[2, 3], keepdims=bool(rng.integers(2)))
    elif tail == "global_pool":
        y = relay.nn.global_avg_pool2d(y)
    elif tail == "softmax":
        y = relay.nn.softmax(y, axis=1)
    elif tail == "dense":
        w = rng.standard_normal((10, c * h * h)) / np.sqrt(c * h * h)
        y = relay.nn.dense(relay.nn.batch_flatten(y), const(w))
    return relay.Function(relay.analysis.free_vars(y), y), params, (1, channels, size, size)


def _run(func, params, x, blocked: bool) -> tuple[np.ndarray, bool]:
    """(output, whether any kernel is blocked); the pass's cost guard off, so that every
    network exercises it."""
    with PassContext(opt_level=3, config={BLOCKED_LAYOUT: blocked, BLOCKED_LAYOUT_GUARD: {
            "max_transform_elements_per_flop": float("inf")}}):
        factory = relay.build(IRModule.from_expr(func), params=params)
    m = GraphModule(factory["default"](cpu()))
    m.set_input("x", x)
    m.run()
    names = [n["attrs"]["func_name"] for n in json.loads(factory.get_graph_json())["nodes"]
             if n["op"] == "tvm_op"]
    return m.get_output(0).numpy(), any("NCHWc" in f for f in names)


@pytest.mark.parametrize("seed", SEEDS)
def test_blocked_and_nchw_builds_agree(seed, width):
    rng = np.random.default_rng(seed)
    func, params, shape = _network(rng)
    x = rng.standard_normal(shape).astype("float32")
    want, _ = _run(func, params, x, blocked=False)
    got, _ = _run(func, params, x, blocked=True)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_most_random_networks_go_blocked():
    """The networks above exercise the pass: most of them have blocked kernels."""
    went = 0
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        func, params, shape = _network(rng)
        went += _run(func, params, rng.standard_normal(shape).astype("float32"), True)[1]
    assert went >= len(SEEDS) // 2, f"only {went} of {len(SEEDS)} networks went blocked"
