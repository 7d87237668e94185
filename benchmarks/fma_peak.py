"""The machine's float32 FMA peak per core, measured: the ceiling the conv and GEMM figures of
benchmarks/kernels.py are read against.

    python benchmarks/fma_peak.py

A loop of independent vector FMAs on registers only (24 accumulators, enough to cover the FMA
latency on every x86 core we target), built for the host CPU at its widest vector (16 floats
with AVX-512, else 8), compiled by llvmlite, timed over ~0.2 s after a warm-up in this thread's
CPU time (on a shared machine wall time counts the other tenants). Figures only.
"""
from __future__ import annotations

import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

ACCUMULATORS = 24
TRIPS = 1 << 20


def _probe_ir(vw: int) -> str:
    """i64 probe(i64 trips, float seed): TRIPS x ACCUMULATORS dependent-per-accumulator FMAs;
    the sum of the accumulators is returned (as bits) so nothing is optimised away."""
    vt = f"<{vw} x float>"
    lines = [f"declare {vt} @llvm.fma.v{vw}f32({vt}, {vt}, {vt})",
             "define float @probe(i64 %trips, float %seed) {",
             "entry:",
             f"  %s0 = insertelement {vt} undef, float %seed, i32 0",
             f"  %s = shufflevector {vt} %s0, {vt} undef, <{vw} x i32> zeroinitializer",
             "  br label %loop", "loop:", "  %i = phi i64 [0, %entry], [%i1, %loop]"]
    for a in range(ACCUMULATORS):
        lines.append(f"  %a{a} = phi {vt} [%s, %entry], [%n{a}, %loop]")
    for a in range(ACCUMULATORS):
        lines.append(f"  %n{a} = call {vt} @llvm.fma.v{vw}f32({vt} %a{a}, {vt} %s, {vt} %s)")
    lines += ["  %i1 = add i64 %i, 1", "  %c = icmp slt i64 %i1, %trips",
              "  br i1 %c, label %loop, label %done", "done:"]
    acc = "%n0"
    for a in range(1, ACCUMULATORS):
        lines.append(f"  %t{a} = fadd {vt} {acc}, %n{a}")
        acc = f"%t{a}"
    lines += [f"  %r = extractelement {vt} {acc}, i32 0", "  ret float %r", "}"]
    return "\n".join(lines)


def fma_peak_gflops() -> tuple[float, int]:
    """(GFLOP/s of one core, vector width in floats)."""
    import llvmlite.binding as llvm

    from compiler.driver.build import current_options
    from runtime.target import ensure_llvm_initialized, host_info

    ensure_llvm_initialized()
    vw = current_options().vector_width  # as relay.build would use (RELAYJIT_VECTOR_WIDTH)
    info = host_info()
    mod = llvm.parse_assembly(_probe_ir(vw))
    tm = llvm.Target.from_triple(info.triple).create_target_machine(
        cpu=info.cpu, features=info.features, opt=2)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    probe = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64, ctypes.c_float)(
        engine.get_function_address("probe"))
    probe(TRIPS // 8, 1.0)  # warm-up: clocks up, code paged in
    best = float("inf")
    for _ in range(5):
        t = time.thread_time()
        probe(TRIPS, 1e-9)
        best = min(best, time.thread_time() - t)
    flops = TRIPS * ACCUMULATORS * vw * 2
    return flops / best / 1e9, vw


def main() -> None:
    gflops, vw = fma_peak_gflops()
    print(f"float32 FMA peak, one core: {gflops:.1f} GFLOP/s ({vw}-float vectors, "
          f"{ACCUMULATORS} independent accumulators)")


if __name__ == "__main__":
    main()
