"""Kernel benchmarks beside numpy / onnxruntime on the same data, single-threaded.

    python benchmarks/kernels.py [--repeat 15]

Figures: median (and best) over interleaved repeats. Each kernel is built through the real
path (relay program -> relay.build -> graph executor) when that works for the op; otherwise
through the schedule + codegen.jit directly; the line says which.
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

        func = build_expr(relay)
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


def bench_dense(repeat: int) -> None:
    from codegen import te
    from codegen.schedules import dense

    m = n = k = 1024
    xa, wa = np.random.rand(m, k).astype("f4"), np.random.rand(n, k).astype("f4")

    def expr(relay):
        x, w = relay.var("x", shape=(m, k)), relay.var("w", shape=(n, k))
        return relay.Function([x, w], relay.nn.dense(x, w))

    run, get, why = _relay_build(expr, {"x": xa, "w": wa})
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
    report("dense 1024x1024x1024 float32 (GFLOP/s)", 2.0 * m * n * k, "GFLOP/s", times,
           "relayjit dense", path)


def _onnx_conv(xs, ws, pads):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=list(pads), strides=[1, 1])
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


def bench_conv(repeat: int) -> None:
    from codegen import te
    from codegen.schedules import conv2d_nchw

    xs, ws = (1, 64, 56, 56), (64, 64, 3, 3)
    xa, wa = np.random.rand(*xs).astype("f4"), np.random.rand(*ws).astype("f4") - 0.5

    def expr(relay):
        x, w = relay.var("x", shape=xs), relay.var("w", shape=ws)
        return relay.Function([x, w], relay.nn.conv2d(x, w, padding=(1, 1), kernel_size=(3, 3),
                                                      channels=64))

    run, get, why = _relay_build(expr, {"x": xa, "w": wa})
    path = "relay.build + graph executor"
    if run is None:
        path = f"codegen.schedules.conv2d_nchw + codegen.jit (relay path failed: {why})"
        x, w = te.placeholder(xs, name="x"), te.placeholder(ws, name="w")
        run, get = _te_build([x, w], [conv2d_nchw(x, w, (1, 1), (1, 1, 1, 1))], [xa, wa],
                             "conv")
    run()
    sess = _onnx_conv(xs, ws, (1, 1, 1, 1))
    ref = sess.run(None, {"x": xa, "w": wa})[0]
    np.testing.assert_allclose(get(), ref, rtol=1e-3, atol=1e-3)

    def im2col():
        xp = np.pad(xa[0], ((0, 0), (1, 1), (1, 1)))
        cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))
        cols = cols.transpose(0, 3, 4, 1, 2).reshape(64 * 9, 56 * 56)
        return wa.reshape(64, -1) @ cols

    times = interleaved({"relayjit conv2d": run,
                         "onnxruntime Conv (1 thr)": lambda: sess.run(None, {"x": xa, "w": wa}),
                         "numpy im2col + matmul": im2col}, repeat)
    flops = 2.0 * 64 * 56 * 56 * 64 * 9
    report("conv2d 3x3 1x64x56x56 -> 64 (ResNet-50 layer), float32 (GFLOP/s)", flops,
           "GFLOP/s", times, "relayjit conv2d", path)


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
    bench_conv(args.repeat)


if __name__ == "__main__":
    main()
