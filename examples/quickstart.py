"""Quickstart: build a small conv + MLP network with relay, run it on the graph executor.

    python examples/quickstart.py
"""
from __future__ import annotations

import time

import numpy as np

import compiler as tvm
from compiler import relay
from runtime import cpu, graph_executor


def make_network():
    """conv3x3 -> relu -> global average pool -> flatten -> dense -> softmax."""
    x = relay.var("data", shape=(1, 3, 16, 16))
    w_conv = relay.var("w_conv", shape=(8, 3, 3, 3))
    w_fc = relay.var("w_fc", shape=(10, 8))
    b_fc = relay.var("b_fc", shape=(10,))
    y = relay.nn.relu(relay.nn.conv2d(x, w_conv, padding=(1, 1), channels=8, kernel_size=(3, 3)))
    y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    y = relay.nn.softmax(relay.nn.bias_add(relay.nn.dense(y, w_fc), b_fc))
    return relay.Function([x, w_conv, w_fc, b_fc], y)


def reference(data, p):
    """The same network in numpy."""
    xp = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((1, 8, 16, 16))
    for i in range(3):
        for j in range(3):
            window = xp[:, :, i:i + 16, j:j + 16]
            conv += np.einsum("nchw,kc->nkhw", window, p["w_conv"][:, :, i, j])
    pooled = np.maximum(conv, 0).mean(axis=(2, 3))
    logits = pooled @ p["w_fc"].T + p["b_fc"]
    e = np.exp(logits - logits.max())
    return e / e.sum()


def main() -> None:
    rng = np.random.default_rng(0)
    params = {"w_conv": rng.standard_normal((8, 3, 3, 3)).astype("float32") * 0.3,
              "w_fc": rng.standard_normal((10, 8)).astype("float32") * 0.3,
              "b_fc": rng.standard_normal(10).astype("float32") * 0.1}
    data = rng.standard_normal((1, 3, 16, 16)).astype("float32")

    start = time.perf_counter()
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(make_network(), target="llvm", params=params)
    print(f"built in {time.perf_counter() - start:.2f} s; kernels: "
          f"{list(lib.get_lib().function_names)}")
    print(f"planned intermediate memory: {lib.memory_stats['intermediate_bytes']} bytes")

    module = graph_executor.GraphModule(lib["default"](cpu(0)))
    module.set_input("data", data)
    module.run()
    out = module.get_output(0).numpy()
    ref = reference(data, params)
    print(f"max abs difference vs numpy: {np.abs(out - ref).max():.2e}")
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)

    result = module.benchmark(cpu(0), repeat=5, number=20)
    print(f"graph executor run: {result.median * 1e6:.1f} us (median of {len(result.results)})")


if __name__ == "__main__":
    main()
