"""Kernel benchmarks beside numpy / onnxruntime on the same data, single-threaded.

    python benchmarks/kernels.py [--repeat 15]

Figures: median (and best) over interleaved repeats. Each kernel is built through the real
path (relay program -> relay.build -> graph executor) when that works for the op; otherwise
through the schedule + codegen.jit directly; the line says which. Weights are constants, as in
a real model, built under PassContext(opt_level=3): AlterOpLayout packs them at compile time.
"""
from __future__ import annotations

import os

# one thread everywhere, set before numpy/onnxruntime load their thread pools
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def interleaved(fns: dict, repeat: int) -> dict:
    """name -> list of seconds, the candidates run alternately so noise hits all alike."""
    for f in fns.values():  # warm up
        f()
    times = {k: [] for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
    return times


def _relay_build(build_expr, inputs: dict):
    """Graph-executor runner via relay.build, or None (with the reason) when it does not work."""
    try:
        from compiler import relay
        from compiler.ir.module import IRModule
        from runtime import graph_executor

        import runtime

        from compiler.transform import PassContext

        func = build_expr(relay)
        with PassContext(opt_level=3):
            lib = relay.build(IRModule.from_expr(func), target="llvm")
        gm = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
        for k, v in inputs.items():
            gm.set_input(k, v)
        gm.run()
        return (lambda: gm.run()), (lambda: gm.get_output(0).numpy()), None
    except Exception as err:  # noqa: BLE001 - report and fall back
        return None, None, f"{type(err).__name__}: {str(err)[:100]}"


def _te_build(inputs: list, outputs: list, arrays: list, name: str):
    from codegen.jit import build_te

    run = build_te(inputs, outputs, name)
    kern = run.library[name]
    outs = [np.empty(t.shape, dtype=t.dtype) for t in outputs]
    return (lambda: kern(*arrays, *outs)), (lambda: outs[0])


def report(label: str, work: float, unit: str, times: dict, ours: str, path: str) -> None:
    med = {k: statistics.median(v) for k, v in times.items()}
    best = {k: min(v) for k, v in times.items()}
    print(f"\n{label}   [ours built via: {path}]")
    for k in times:
        ratio = med[k] / med[ours]
        print(f"  {k:28s} median {work / med[k] / 1e9:7.2f} {unit}  best "
              f"{work / best[k] / 1e9:7.2f} {unit}   ours vs this: {ratio:5.2f}x (median speed ratio)")


def bench_elementwise(repeat: int) -> None:
    from codegen import te, tir

    n = 16 * 1024 * 1024
    a, b = np.random.rand(n).astype("f4") - 0.5, np.random.rand(n).astype("f4") - 0.5

    def expr(relay):
        x, y = relay.var("x", shape=(n,)), relay.var("y", shape=(n,))
        return relay.Function([x, y], relay.nn.relu(relay.add(x, y)))

    run, get, why = _relay_build(expr, {"x": a, "y": b})
    path = "relay.build + graph executor"
    if run is None:
        path = f"codegen.jit (relay path failed: {why})"
        x, y = te.placeholder((n,), name="x"), te.placeholder((n,), name="y")
        z = te.compute((n,), lambda i: tir.max(x[i] + y[i], tir.const(0.0)), name="add_relu")
        run, get = _te_build([x, y], [z], [a, b], "add_relu")
    run()
    assert np.array_equal(get(), np.maximum(a + b, 0))
    times = interleaved({"relayjit add+relu": run,
                         "numpy np.maximum(a+b, 0)": lambda: np.maximum(a + b, 0)}, repeat)
    report("elementwise add+relu, 16M float32 (GB/s: 2 reads + 1 write)", 12.0 * n, "GB/s",
           times, "relayjit add+relu", path)


def bench_dense(repeat: int, m: int = 1024, n: int = 1024, k: int = 1024) -> None:
    from codegen import te
    from codegen.schedules import dense

    xa, wa = np.random.rand(m, k).astype("f4"), np.random.rand(n, k).astype("f4")

    def expr(relay):
        x = relay.var("x", shape=(m, k))
        return relay.Function([x], relay.nn.dense(x, relay.const(wa)))

    run, get, why = _relay_build(expr, {"x": xa})
    path = "relay.build + graph executor"
    if run is None:
        path = f"codegen.schedules.dense + codegen.jit (relay path failed: {why})"
        x, w = te.placeholder((m, k), name="x"), te.placeholder((n, k), name="w")
        run, get = _te_build([x, w], [dense(x, w)], [xa, wa], "dense")
    run()
    np.testing.assert_allclose(get(), xa @ wa.T, rtol=1e-3)
    wt = np.ascontiguousarray(wa.T)
    times = interleaved({"relayjit dense": run, "numpy matmul (OpenBLAS, 1 thr)":
                         lambda: xa @ wt}, repeat)
    report(f"dense M={m} N={n} K={k} float32, constant weight (GFLOP/s)", 2.0 * m * n * k,
           "GFLOP/s", times, "relayjit dense", path)


def _onnx_conv(xs, ws, pads, strides=(1, 1), group=1):
    import onnxruntime as ort
    from onnx import TensorProto, helper

    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=list(pads), strides=list(strides),
                            group=group)
    graph = helper.make_graph([node], "conv", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs)),
        helper.make_tensor_value_info("w", TensorProto.FLOAT, list(ws))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def bench_conv(repeat: int, xs=(1, 64, 56, 56), ws=(64, 64, 3, 3), pad: int = 1,
               stride: int = 1, groups: int = 1, label: str = "ResNet-50 layer") -> None:
    from codegen import te
    from codegen.schedules import conv2d_nchw

    xa, wa = np.random.rand(*xs).astype("f4"), np.random.rand(*ws).astype("f4") - 0.5
    pads = (pad,) * 4

    def expr(relay):
        x = relay.var("x", shape=xs)
        return relay.Function([x], relay.nn.conv2d(x, relay.const(wa), strides=(stride, stride),
                                                   padding=(pad, pad), groups=groups))

    run, get, why = _relay_build(expr, {"x": xa})
    path = "relay.build + graph executor"
    if run is None:
        path = f"codegen.schedules.conv2d_nchw + codegen.jit (relay path failed: {why})"
        x, w = te.placeholder(xs, name="x"), te.placeholder(ws, name="w")
        run, get = _te_build([x, w], [conv2d_nchw(x, w, (stride, stride), pads, (1, 1),
                                                  groups)], [xa, wa], "conv")
    run()
    sess = _onnx_conv(xs, ws, pads, (stride, stride), groups)
    ref = sess.run(None, {"x": xa, "w": wa})[0]
    np.testing.assert_allclose(get(), ref, rtol=1e-3, atol=1e-3)
    fns = {"relayjit conv2d": run,
           "onnxruntime Conv (1 thr)": lambda: sess.run(None, {"x": xa, "w": wa})}
    if groups == 1:
        r, s = ws[2], ws[3]
        oh = (xs[2] + 2 * pad - r) // stride + 1
        ow = (xs[3] + 2 * pad - s) // stride + 1

        def im2col():
            xp = np.pad(xa[0], ((0, 0), (pad, pad), (pad, pad)))
            cols = np.lib.stride_tricks.sliding_window_view(xp, (r, s), axis=(1, 2))
            cols = cols[:, ::stride, ::stride][:, :oh, :ow]
            cols = cols.transpose(0, 3, 4, 1, 2).reshape(xs[1] * r * s, oh * ow)
            return wa.reshape(ws[0], -1) @ cols
        fns["numpy im2col + matmul"] = im2col
    times = interleaved(fns, repeat)
    out = ref.shape
    flops = 2.0 * out[1] * out[2] * out[3] * ws[1] * ws[2] * ws[3]
    report(f"conv2d {ws[2]}x{ws[3]}/{stride} {'x'.join(map(str, xs))} -> {ws[0]}"
           f"{' groups=' + str(groups) if groups > 1 else ''} ({label}), float32 (GFLOP/s)",
           flops, "GFLOP/s", times, "relayjit conv2d", path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    import llvmlite.binding as llvm
    from runtime.target import host_info

    from codegen.schedules.common import vector_width

    info = host_info()
    print(f"host: {info.cpu}, micro-kernel vector width {vector_width()} floats; "
          f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(auto)')}; llvm "
          f"{'.'.join(map(str, llvm.llvm_version_info))}")
    bench_elementwise(args.repeat)
    bench_dense(args.repeat)
    bench_dense(args.repeat, 1, 1000, 4096)  # the batch-1 classifier of VGG / AlexNet
    bench_conv(args.repeat)
    bench_conv(args.repeat, (1, 256, 56, 56), (64, 256, 1, 1), 0, label="1x1 ResNet-50")
    bench_conv(args.repeat, (1, 3, 224, 224), (64, 3, 7, 7), 3, 2, label="first layer")
    bench_conv(args.repeat, (1, 128, 56, 56), (128, 1, 3, 3), 1, groups=128,
               label="depthwise")


if __name__ == "__main__":
    main()
