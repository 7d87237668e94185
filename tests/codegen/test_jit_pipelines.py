"""codegen.optimise: hand-scheduled kernels (calling micro-kernels) get a cheaper LLVM pipeline."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import jit, optimise, te, tir
from codegen.compile_stats import record_compile_stats
from codegen.microkernel_objects import microkernels_called
from codegen.optimise import Pipeline, pipeline_for
from codegen.lower import lower
from runtime.library import KernelLibrary
from tests.codegen.test_jit_microkernels import _conv, _run

from tests.schedule_helpers import host


def _add_relu(name: str, n: int = 1000):
    """A plain elementwise kernel (LLVM vectorises it; no micro-kernel)."""
    a = te.placeholder((n,), name="a")
    b = te.placeholder((n,), name="b")
    y = te.compute((n,), lambda i: tir.max(a[i] + b[i], tir.const(0.0, "float32")), name="y")
    return lower(name, [a, b], [y])


@pytest.fixture
def fresh(monkeypatch):
    """No compiled objects from other tests; the pipeline switch restored afterwards."""
    monkeypatch.setattr(optimise, "HAND_SCHEDULED_SPEED_LEVEL", optimise.HAND_SCHEDULED_SPEED_LEVEL)
    jit.clear_cache()
    yield
    jit.clear_cache()


def test_each_kernel_class_has_its_pipeline():
    conv, add = _conv("conv_p", 8, relu=True), _add_relu("add_p")
    assert pipeline_for(conv, 3) == Pipeline(optimise.HAND_SCHEDULED_SPEED_LEVEL) == Pipeline(1)
    assert pipeline_for(add, 3) == Pipeline(3, loop_vectorization=True, slp_vectorization=True)
    assert pipeline_for(add, 2) == Pipeline(2)
    assert pipeline_for(conv, 0) == pipeline_for(add, 0) == Pipeline(0)


def test_a_mixed_kernel_set_is_one_object_and_computes(fresh):
    """Both classes are optimised in modules of their own, linked into one object (then the
    conv's micro-kernel, an object of its own)."""
    conv, add = _conv("conv_mix", 8, relu=False), _add_relu("add_mix")
    with record_compile_stats() as stats:
        objects = jit.compile_primfuncs([conv, add], opt_level=3, jobs=1, options=host())
    assert len(objects) == 1 + len(microkernels_called([conv]))
    assert stats.kernels_compiled == 2 and stats.hand_scheduled_compiled == 1
    lib = KernelLibrary(objects, [conv.name, add.name])
    out, want = _run(lib, conv, 8)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    a, b = np.random.default_rng(0).standard_normal((2, 1000)).astype("float32")
    y = np.empty(1000, "float32")
    lib[add.name](a, b, y)
    np.testing.assert_array_equal(y, np.maximum(a + b, 0))
    ir_text = jit.get_llvm_ir([conv, add], options=host())
    assert "<16 x float>" in ir_text or "<8 x float>" in ir_text  # the vectorisers ran


def test_the_pipeline_is_part_of_the_cache_key(fresh, monkeypatch):
    """Objects compiled under one pipeline are never handed out for another."""
    conv, add = _conv("conv_key", 8), _add_relu("add_key")
    key = jit.structural_key([conv, add], host(), 3)
    add_only = jit.structural_key([add], host(), 3)
    monkeypatch.setattr(optimise, "HAND_SCHEDULED_SPEED_LEVEL", 3)
    assert pipeline_for(conv, 3) == Pipeline(3)
    assert jit.structural_key([conv, add], host(), 3) != key
    assert jit.structural_key([add], host(), 3) == add_only  # no hand-scheduled kernel in it


def test_an_empty_kernel_set_still_compiles(fresh):
    """A graph of reshapes and constants has no kernels: one empty module, one object."""
    objects = jit.compile_primfuncs([], opt_level=3, jobs=1, options=host())
    assert len(objects) == 1
    assert KernelLibrary(objects, []).function_names == ()
