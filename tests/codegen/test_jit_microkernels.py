"""Micro-kernels compile once per target CPU, apart from the kernels calling them, and link in."""
from __future__ import annotations

import numpy as np
import pytest
from llvmlite import ir

from codegen import cache, jit, te, tir
from codegen.compile_objects import shares as compile_shares
from codegen.compile_stats import record_compile_stats
from codegen.errors import CodegenError
from codegen.llvm import microkernels
from codegen.llvm.types import PTR
from codegen.lower import lower
from codegen.microkernel_objects import microkernels_called
from codegen.schedules import conv2d_nchw, dense_gemv
from runtime.library import KernelLibrary

from tests.schedule_helpers import dense_pack, host

RNG = np.random.default_rng(5)


def _conv(name: str, channels: int, relu: bool = False, size: int = 8):
    """A 3x3 conv (the schedule calls a conv micro-kernel), optionally with a ReLU epilogue."""
    x = te.placeholder((1, channels, size, size), name="x")
    w = te.placeholder((16, channels, 3, 3), name="w")
    y = conv2d_nchw(x, w, (1, 1), (1, 1, 1, 1), options=host())
    if relu:
        y = te.compute(y.shape, lambda *i: tir.max(y[i], tir.const(0.0, "float32")),
                       name="relu")
    return lower(name, [x, w], [y])


def _run(lib: KernelLibrary, func, channels: int, size: int = 8):
    x = RNG.standard_normal((1, channels, size, size)).astype("float32")
    w = RNG.standard_normal((16, channels, 3, 3)).astype("float32")
    out = np.empty((1, 16, size, size), "float32")
    lib[func.name](x, w, out)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros_like(out)
    for r in range(3):
        for s in range(3):
            want += np.einsum("nchw,kc->nkhw", xp[:, :, r:r + size, s:s + size], w[:, :, r, s])
    return out, want


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAYJIT_CACHE_DIR", str(tmp_path / "cache"))
    jit.clear_cache()
    cache.reset_disk_cache_stats()
    yield tmp_path / "cache"
    jit.clear_cache()


def test_kernel_modules_only_declare_micro_kernels():
    func = _conv("conv_decl", 8)
    names = microkernels_called([func])
    assert names and all(n.startswith("relayjit.ukr.conv_") for n in names)
    text = jit.get_llvm_ir([func], optimized=False, options=host())
    assert f'declare void @"{names[0]}"' in text
    assert f'define void @"{names[0]}"' not in text
    linked = jit.get_llvm_ir([func], options=host())  # optimised: the definition is linked in, internal
    assert f'define internal void @"{names[0]}"' in linked or \
        f"define internal void @{names[0]}" in linked


def test_micro_kernels_are_reused_across_kernel_sets_and_processes(cache_dir):
    plain, with_relu = _conv("conv_plain", 8), _conv("conv_relu", 8, relu=True)
    assert microkernels_called([plain]) == microkernels_called([with_relu])
    with record_compile_stats() as first:
        lib = jit.build_library([plain], options=host())
    assert first.microkernels_compiled == len(microkernels_called([plain]))
    out, want = _run(lib, plain, 8)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    jit.clear_cache()  # as a new process: only the disk cache remains
    with record_compile_stats() as second:
        lib = jit.build_library([with_relu], options=host())
    assert second.misses == 1 and second.microkernels_compiled == 0
    out, want = _run(lib, with_relu, 8)
    np.testing.assert_allclose(out, np.maximum(want, 0), rtol=1e-4, atol=1e-4)


def _gemv(name: str, n: int = 96, k: int = 64):
    """One row times a packed weight: the schedule calls a GEMV micro-kernel."""
    nt, kp, nr = dense_pack(1, n, k)
    x, wp = te.placeholder((1, k), name="x"), te.placeholder((nt, kp, nr), name="wp")
    return lower(name, [x, wp], [dense_gemv(x, wp, n, options=host())])


@pytest.mark.parametrize("first", [0, 3])
def test_micro_kernel_code_does_not_depend_on_the_build_that_compiled_it_first(cache_dir,
                                                                             first):
    """A micro-kernel's object code is a function of its name and the target CPU: compiled
    first by an O0 kernel set (as FoldConstant's) or an O3 one, into an empty cache, the
    micro-kernels a later O3 build loads are byte for byte those of a build that compiled
    them itself (issue 25: gemv_32_2 kept the O0 build's code, and an LSTM built after a
    GRU ran at half speed)."""
    funcs = [_gemv("gemv_order"), _conv("conv_order", 8)]
    names = microkernels_called(funcs)
    assert any(n.startswith("relayjit.ukr.gemv_") for n in names)
    with record_compile_stats() as stats:
        jit.compile_primfuncs(funcs, first, jobs=1, options=host())
    assert stats.microkernels_compiled == len(names)
    jit.clear_cache()  # as a new process: the micro-kernels come from the disk cache
    with record_compile_stats() as stats:
        later = jit.compile_primfuncs(funcs, 3, jobs=1, options=host())[-len(names):]
    assert stats.microkernels_compiled == 0
    jit.clear_cache()
    with cache.disabled(), record_compile_stats() as stats:
        alone = jit.compile_primfuncs(funcs, 3, jobs=1, options=host())[-len(names):]
    assert stats.microkernels_compiled == len(names)
    assert later == alone


SIZES = (4, 8, 12, 16)  # each size calls its own micro-kernel


def test_parallel_jobs_compile_each_micro_kernel_once():
    funcs = [_conv(f"conv_{k}", 8 + 8 * (k // 4 % 2), relu=k >= 8, size=SIZES[k % 4])
             for k in range(16)]
    distinct = microkernels_called(funcs)
    assert len(distinct) == len(SIZES)  # kernels share micro-kernels
    shares = compile_shares(funcs, 2)
    assert len(shares) == 2 and sorted(f.name for s in shares for f in s.kernels()) == \
        sorted(f.name for f in funcs)
    called = [set(microkernels_called(share.kernels())) for share in shares]
    assert called == [set(share.microkernels) for share in shares]
    assert not called[0] & called[1]  # no micro-kernel is compiled (or emitted) twice
    jit.clear_cache()
    with cache.disabled(), record_compile_stats() as stats:
        objects = jit.compile_primfuncs(funcs, 3, jobs=2, options=host())
    assert stats.jobs == 2 and len(objects) == 2 + len(distinct)  # then the micro-kernels
    assert stats.microkernels_compiled == len(distinct)
    lib = KernelLibrary(objects, [f.name for f in funcs])
    for k in (0, 5, 10, 15):
        size = SIZES[k % 4]
        out, want = _run(lib, funcs[k], 8 + 8 * (k // 4 % 2), size)
        np.testing.assert_allclose(out, np.maximum(want, 0) if k >= 8 else want,
                                   rtol=1e-4, atol=1e-4)


def test_a_definition_that_does_not_match_the_calls_is_refused(monkeypatch):
    func = _conv("conv_mismatch", 8)
    jit.clear_cache()

    def define_with_other_signature(module, kernel):
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]), kernel.symbol)
        ir.IRBuilder(fn.append_basic_block()).ret_void()
        return fn

    monkeypatch.setattr(microkernels, "define", define_with_other_signature)
    with cache.disabled(), pytest.raises(CodegenError, match="micro-kernel .* is called as"):
        jit.compile_primfuncs([func], 3, jobs=1, options=host())
    jit.clear_cache()
