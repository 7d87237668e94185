"""Kernel benchmarks beside numpy / onnxruntime on the same data, at N threads.

    python benchmarks/kernels.py [--threads N] [--repeat 7]

relayjit's kernels, OpenBLAS and onnxruntime all get N threads (default 1); with N > 1 the
same relayjit kernel is also measured at one thread in the same run, so the line "relayjit
(1 thread)" gives the speed-up. Figures: median (and best) over interleaved repeats. Each kernel is built through the real
path (relay program -> relay.build -> graph executor) when that works for the op; otherwise
through the schedule + codegen.jit directly; the line says which. Weights are constants, as in
a real model, built under PassContext(opt_level=3): AlterOpLayout packs them at compile time.
"""
from __future__ import annotations

import os
import sys



def _threads_arg() -> int:
    """--threads N, read before numpy loads OpenBLAS (which fixes its pool at import)."""
    argv = sys.argv[1:]
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 1


THREADS = _threads_arg()
# N threads everywhere, set before numpy/onnxruntime load their thread pools
os.environ["OPENBLAS_NUM_THREADS"] = str(THREADS)
os.environ["OMP_NUM_THREADS"] = str(THREADS)

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


SETTLE_S = 0.15
WARMUP_S = 0.03


def interleaved(fns: dict, repeat: int, number: int = 5) -> dict:
    """name -> seconds per call, one figure per round: each round runs every candidate in
    turn, WARMUP_S of untimed calls then `number` timed ones, so noise hits all alike. Between
    candidates the process idles for SETTLE_S: thread pools spin after work (OpenBLAS for
    ~2^28 cycles, onnxruntime and ours for well under a millisecond), and a candidate must
    not run against the previous one's spinning threads.

    With THREADS > 1 the relayjit candidate is also timed at one thread, under the name
    "relayjit (1 thread)"."""
    from runtime import threadpool

    fns = dict(fns)
    ours = next(k for k in fns if k.startswith("relayjit"))
    if THREADS > 1:
        fns["relayjit (1 thread)"] = fns[ours]
    times = {k: [] for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():
            threadpool.set_num_threads(1 if k == "relayjit (1 thread)" else THREADS)
            if THREADS > 1:
                time.sleep(SETTLE_S)
            warm = time.perf_counter()  # cores need a few ms of work to reach full speed
            while True:
                f()
                if time.perf_counter() - warm > WARMUP_S:
                    break
            t = time.perf_counter()
            for _ in range(number):
                f()
            times[k].append((time.perf_counter() - t) / number)
    threadpool.set_num_threads(THREADS)
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


PEAK_GFLOPS = {"per core": 0.0}  # benchmarks/fma_peak.py, measured in main()
PEAK_GOPS = {"per core": 0.0}  # the int8 (vpdpbusd) peak, likewise; 0 without VNNI
PEAKS = {"GFLOP/s": (PEAK_GFLOPS, "FMA peak"), "GOP/s": (PEAK_GOPS, "vpdpbusd peak")}


def report(label: str, work: float, unit: str, times: dict, ours: str, path: str) -> None:
    med = {k: statistics.median(v) for k, v in times.items()}
    best = {k: min(v) for k, v in times.items()}
    print(f"\n{label}   [ours built via: {path}]")
    measured, peak_name = PEAKS.get(unit, ({}, ""))
    for k in times:
        ratio = med[k] / med[ours]
        speed = work / med[k] / 1e9
        cores = 1 if k == "relayjit (1 thread)" else THREADS
        peak = f"  {100 * speed / (measured['per core'] * cores):3.0f}% of {peak_name}" \
            if measured.get("per core") else ""
        print(f"  {k:28s} median {speed:7.2f} {unit}  best {work / best[k] / 1e9:7.2f} {unit}"
              f"{peak}   ours vs this: {ratio:5.2f}x (median speed ratio)")


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
    from compiler.driver.build import current_options

    xa, wa = np.random.rand(m, k).astype("f4"), np.random.rand(n, k).astype("f4")

    def expr(relay):
        x = relay.var("x", shape=(m, k))
        return relay.Function([x], relay.nn.dense(x, relay.const(wa)))

    run, get, why = _relay_build(expr, {"x": xa})
    path = "relay.build + graph executor"
    if run is None:
        path = f"codegen.schedules.dense + codegen.jit (relay path failed: {why})"
        x, w = te.placeholder((m, k), name="x"), te.placeholder((n, k), name="w")
        run, get = _te_build([x, w], [dense(x, w, options=current_options())], [xa, wa],
                             "dense")
    run()
    np.testing.assert_allclose(get(), xa @ wa.T, rtol=1e-3)
    wt = np.ascontiguousarray(wa.T)
    times = interleaved({"relayjit dense": run, f"numpy matmul (OpenBLAS, {THREADS} thr)":
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
    opts.intra_op_num_threads = THREADS
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def bench_conv(repeat: int, xs=(1, 64, 56, 56), ws=(64, 64, 3, 3), pad: int = 1,
               stride: int = 1, groups: int = 1, label: str = "ResNet-50 layer") -> None:
    from codegen import te
    from codegen.schedules import conv2d_nchw
    from compiler.driver.build import current_options

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
        run, get = _te_build([x, w], [conv2d_nchw(x, w, (stride, stride), pads, (1, 1), groups,
                                                  options=current_options())], [xa, wa],
                             "conv")
    run()
    sess = _onnx_conv(xs, ws, pads, (stride, stride), groups)
    ref = sess.run(None, {"x": xa, "w": wa})[0]
    np.testing.assert_allclose(get(), ref, rtol=1e-3, atol=1e-3)
    fns = {"relayjit conv2d": run,
           f"onnxruntime Conv ({THREADS} thr)": lambda: sess.run(None, {"x": xa, "w": wa})}
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


def _onnx_int8(op: str, x_shape, w: np.ndarray, bias: np.ndarray | None, attrs: dict):
    """An onnxruntime session of one QLinearConv / QLinearMatMul (uint8 data, int8 weight,
    uint8 output) with the scales and zero points of _int8_params."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    xs, xz, ws, ys, yz = _int8_params(w.shape[0] if op == "QLinearConv" else w.shape[1])
    inits = [numpy_helper.from_array(np.array(xs, "f4"), "xs"),
             numpy_helper.from_array(np.array(xz, "u1"), "xz"),
             numpy_helper.from_array(w, "w"), numpy_helper.from_array(ws, "ws"),
             numpy_helper.from_array(np.zeros(ws.shape, "i1"), "wz"),
             numpy_helper.from_array(np.array(ys, "f4"), "ys"),
             numpy_helper.from_array(np.array(yz, "u1"), "yz")]
    inputs = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "b"))
        inputs.append("b")
    node = helper.make_node(op, inputs, ["y"], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(
        "x", TensorProto.UINT8, list(x_shape))], [helper.make_tensor_value_info(
            "y", TensorProto.UINT8, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    opts.inter_op_num_threads = 1
    return model, ort.InferenceSession(model.SerializeToString(), opts,
                                       providers=["CPUExecutionProvider"])


def _int8_params(channels: int) -> tuple:
    """(x scale, x zero point, per-channel weight scales, y scale, y zero point)."""
    ws = np.linspace(0.002, 0.004, channels).astype("f4")
    return 0.02, 128, ws, 0.5, 10


def _int8_bench(repeat: int, op: str, xa: np.ndarray, wa: np.ndarray, bias, attrs: dict,
                ops: float, label: str, ours: str) -> None:
    """One QLinear* node through relay.build (QLinear* -> QNN -> the int8 kernels) beside
    onnxruntime's, outputs equal, timed and reported in GOP/s."""
    model, sess = _onnx_int8(op, xa.shape, wa, bias, attrs)

    def expr(relay):
        mod, params = relay.frontend.from_onnx(model)
        return relay.bind(mod["main"], params) if params else mod["main"]

    run, get, why = _relay_build(expr, {"x": xa})
    if run is None:
        print(f"\n{label}: relay path failed: {why}")
        return
    feeds = {"x": xa}
    np.testing.assert_array_equal(get(), sess.run(None, feeds)[0])
    times = interleaved({ours: run, f"onnxruntime {op} ({THREADS} thr)":
                         lambda: sess.run(None, feeds)}, repeat)
    report(label, ops, "GOP/s", times, ours, "relay.build + graph executor")


def bench_int8_dense(repeat: int, m: int = 128, n: int = 3072, k: int = 768) -> None:
    """QLinearMatMul (uint8 x int8 per-channel -> uint8): the int8 GEMM + requantisation."""
    rng = np.random.default_rng(0)
    xa = rng.integers(0, 256, (m, k), dtype=np.uint8)
    wa = rng.integers(-127, 128, (k, n), dtype=np.int8)
    _int8_bench(repeat, "QLinearMatMul", xa, wa, None, {}, 2.0 * m * n * k,
                f"int8 dense M={m} N={n} K={k} (uint8 x int8 -> uint8, requantised; GOP/s)",
                "relayjit int8 dense")


def bench_int8_conv(repeat: int, xs=(1, 64, 56, 56), ws=(64, 64, 3, 3), pad: int = 1,
                    stride: int = 1, label: str = "ResNet-18 layer") -> None:
    """QLinearConv (uint8 x int8 per-channel + int32 bias -> uint8): the int8 conv with its
    requantisation fused."""
    rng = np.random.default_rng(0)
    xa = rng.integers(0, 256, xs, dtype=np.uint8)
    wa = rng.integers(-127, 128, ws, dtype=np.int8)
    bias = rng.integers(-5000, 5000, ws[0], dtype=np.int32)
    oh = (xs[2] + 2 * pad - ws[2]) // stride + 1
    ow = (xs[3] + 2 * pad - ws[3]) // stride + 1
    _int8_bench(repeat, "QLinearConv", xa, wa, bias,
                {"pads": [pad] * 4, "strides": [stride] * 2, "kernel_shape": list(ws[2:])},
                2.0 * ws[0] * oh * ow * ws[1] * ws[2] * ws[3],
                f"int8 conv2d {ws[2]}x{ws[3]}/{stride} {'x'.join(map(str, xs))} -> {ws[0]} "
                f"({label}), uint8 x int8 -> uint8 (GOP/s)", "relayjit int8 conv2d")


def bench_tiny_graph(repeat: int, layers: int = 60, width: int = 16) -> None:
    """Per-run overhead: an ONNX chain of `layers` tiny MatMul+Relu layers (one kernel each)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    import runtime
    from compiler import relay
    from compiler.transform import PassContext
    from runtime import graph_executor

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype("f4")
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Relu", [f"m{i}"], [f"r{i}"])]
        prev = f"r{i}"
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    xa = rng.standard_normal((1, width)).astype("f4")
    mod, params = relay.frontend.from_onnx(model)
    with PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    gm = graph_executor.GraphModule(lib["default"](runtime.cpu(0)))
    gm.set_input("x", xa)
    kernels = len(gm.module.steps)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    gm.run()
    np.testing.assert_allclose(gm.get_output(0).numpy(), sess.run(None, {"x": xa})[0],
                               rtol=1e-4, atol=1e-6)
    times = interleaved({"relayjit run()": gm.run,
                         f"onnxruntime run ({THREADS} thr)": lambda: sess.run(None, {"x": xa})},
                        repeat, number=200)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nper-run overhead: {layers} x (MatMul {width}x{width} + Relu), {kernels} kernels "
          f"(us per run; lower is better)")
    for k, v in med.items():
        print(f"  {k:28s} median {v * 1e6:8.1f} us   ours vs this: "
              f"{v / med['relayjit run()']:5.2f}x (median speed ratio)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1,
                    help="threads for relayjit, OpenBLAS and onnxruntime alike")
    args = ap.parse_args()
    from runtime import threadpool

    threadpool.set_num_threads(THREADS)
    import llvmlite.binding as llvm
    from runtime.target import host_info

    from compiler.driver.build import current_options

    from benchmarks.fma_peak import fma_peak_gflops, int8_peak_gops

    PEAK_GFLOPS["per core"] = fma_peak_gflops()[0]
    int8_peak = int8_peak_gops()
    PEAK_GOPS["per core"] = int8_peak[0] if int8_peak else 0.0
    info = host_info()
    print(f"float32 FMA peak {PEAK_GFLOPS['per core']:.1f} GFLOP/s per core "
          f"(benchmarks/fma_peak.py); conv figures count direct-convolution FLOPs, so a "
          f"Winograd layer can pass 100%")
    print(f"int8 vpdpbusd peak {PEAK_GOPS['per core']:.1f} GOP/s per core" if int8_peak else
          "int8: the CPU has no VNNI (the int8 kernels widen; no vpdpbusd peak)")
    print(f"host: {info.cpu}, {threadpool.available_cores()} cores, {THREADS} thread(s); "
          f"micro-kernel vector width {current_options().vector_width} floats; "
          f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(auto)')}; llvm "
          f"{'.'.join(map(str, llvm.llvm_version_info))}")
    bench_tiny_graph(args.repeat)
    bench_elementwise(args.repeat)
    bench_dense(args.repeat)
    bench_dense(args.repeat, 1, 1000, 4096)  # the batch-1 classifier of VGG / AlexNet
    bench_conv(args.repeat)
    bench_conv(args.repeat, (1, 256, 56, 56), (64, 256, 1, 1), 0, label="1x1 ResNet-50")
    bench_conv(args.repeat, (1, 3, 224, 224), (64, 3, 7, 7), 3, 2, label="first layer")
    bench_conv(args.repeat, (1, 128, 56, 56), (128, 1, 3, 3), 1, groups=128,
               label="depthwise")
    bench_int8_dense(args.repeat)  # a BERT-base FFN's first matmul, 128 tokens
    bench_int8_conv(args.repeat)
    bench_int8_conv(args.repeat, (1, 128, 28, 28), (128, 128, 3, 3))
    bench_int8_conv(args.repeat, (1, 256, 14, 14), (256, 256, 3, 3))
    bench_int8_conv(args.repeat, (1, 512, 7, 7), (512, 512, 3, 3))


if __name__ == "__main__":
    main()
