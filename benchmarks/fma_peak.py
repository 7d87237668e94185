"""The machine's float32 FMA peak and int8 dot-product (vpdpbusd) peak per core, measured: the
ceilings the conv and GEMM figures of benchmarks/kernels.py are read against.

    python benchmarks/fma_peak.py

A loop of independent vector FMAs on registers only (24 accumulators, enough to cover the FMA
latency on every x86 core we target), built for the host CPU at its widest vector (16 floats
with AVX-512, else 8), compiled by llvmlite, timed over ~0.2 s after a warm-up in this thread's
CPU time (on a shared machine wall time counts the other tenants). The int8 peak is the same
loop of vpdpbusd (64 uint8 x int8 products into 16 int32 lanes an instruction, counted as two
operations each) where the CPU has AVX512-VNNI or AVX-VNNI, at the width the int8 kernels use.
Figures only.
"""
from __future__ import annotations

import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

ACCUMULATORS = 24
TRIPS = 1 << 20


def _probe_ir(vw: int, int8: bool = False) -> str:
    """<scalar> probe(i64 trips, <scalar> seed): TRIPS x ACCUMULATORS dependent-per-accumulator
    FMAs (vpdpbusd with int8); the sum of the accumulators is returned so nothing is optimised
    away."""
    scalar = "i32" if int8 else "float"
    vt = f"<{vw} x {scalar}>"
    op = f"llvm.x86.avx512.vpdpbusd.{32 * vw}" if int8 else f"llvm.fma.v{vw}f32"
    lines = [f"declare {vt} @{op}({vt}, {vt}, {vt})",
             f"define {scalar} @probe(i64 %trips, {scalar} %seed) {{",
             "entry:",
             f"  %s0 = insertelement {vt} undef, {scalar} %seed, i32 0",
             f"  %s = shufflevector {vt} %s0, {vt} undef, <{vw} x i32> zeroinitializer",
             "  br label %loop", "loop:", "  %i = phi i64 [0, %entry], [%i1, %loop]"]
    for a in range(ACCUMULATORS):
        lines.append(f"  %a{a} = phi {vt} [%s, %entry], [%n{a}, %loop]")
    for a in range(ACCUMULATORS):
        lines.append(f"  %n{a} = call {vt} @{op}({vt} %a{a}, {vt} %s, {vt} %s)")
    lines += ["  %i1 = add i64 %i, 1", "  %c = icmp slt i64 %i1, %trips",
              "  br i1 %c, label %loop, label %done", "done:"]
    acc = "%n0"
    for a in range(1, ACCUMULATORS):
        lines.append(f"  %t{a} = {'add' if int8 else 'fadd'} {vt} {acc}, %n{a}")
        acc = f"%t{a}"
    lines += [f"  %r = extractelement {vt} {acc}, i32 0", f"  ret {scalar} %r", "}"]
    return "\n".join(lines)


def _probe_rate(ir_text: str, ctype) -> float:
    """Calls of probe(TRIPS) a second of this thread's CPU time, best of five."""
    import llvmlite.binding as llvm

    from runtime.target import ensure_llvm_initialized, host_info

    ensure_llvm_initialized()
    info = host_info()
    mod = llvm.parse_assembly(ir_text)
    tm = llvm.Target.from_triple(info.triple).create_target_machine(
        cpu=info.cpu, features=info.features, opt=2)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    probe = ctypes.CFUNCTYPE(ctype, ctypes.c_int64, ctype)(engine.get_function_address("probe"))
    probe(TRIPS // 8, ctype(1))  # warm-up: clocks up, code paged in
    best = float("inf")
    for _ in range(5):
        t = time.thread_time()
        probe(TRIPS, ctype(1))
        best = min(best, time.thread_time() - t)
    return 1.0 / best


def fma_peak_gflops() -> tuple[float, int]:
    """(GFLOP/s of one core, vector width in floats)."""
    from compiler.driver.build import current_options

    vw = current_options().vector_width  # as relay.build would use (RELAYJIT_VECTOR_WIDTH)
    rate = _probe_rate(_probe_ir(vw), ctypes.c_float)
    return rate * TRIPS * ACCUMULATORS * vw * 2 / 1e9, vw


def int8_peak_gops() -> tuple[float, int] | None:
    """(GOP/s of one core through vpdpbusd, int32 lanes a vector), or None when the CPU has
    no VNNI (the int8 kernels then widen: no dot-product peak to read them against)."""
    from codegen.schedules.int8_config import int8_lanes, vnni
    from compiler.driver.build import current_options

    options = current_options()
    lanes = int8_lanes(options)
    if not vnni(options, lanes):
        return None
    rate = _probe_rate(_probe_ir(lanes, int8=True), ctypes.c_int32)
    return rate * TRIPS * ACCUMULATORS * lanes * 4 * 2 / 1e9, lanes


def main() -> None:
    gflops, vw = fma_peak_gflops()
    print(f"float32 FMA peak, one core: {gflops:.1f} GFLOP/s ({vw}-float vectors, "
          f"{ACCUMULATORS} independent accumulators)")
    int8 = int8_peak_gops()
    if int8 is None:
        print("int8 dot-product peak: the CPU has no VNNI (vpdpbusd)")
    else:
        print(f"int8 vpdpbusd peak, one core: {int8[0]:.1f} GOP/s ({int8[1]}-lane int32 "
              f"vectors, {ACCUMULATORS} independent accumulators)")


if __name__ == "__main__":
    main()
