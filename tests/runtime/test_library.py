from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
import pytest

from runtime import KernelError, KernelLibrary, host_target_machine, nd

from tests.runtime import _runtime_kernels as K


@pytest.fixture(scope="module")
def lib():
    return K.library(8)


def test_kernel_call_numpy_and_ndarray(lib):
    a = np.arange(8, dtype=np.float32)
    b = nd.array(np.ones(8, np.float32))
    c = np.zeros(8, np.float32)
    lib["add"](a, b, c)
    np.testing.assert_array_equal(c, a + 1)
    assert lib.get_function("add") is lib["add"]
    assert lib.function_names == tuple(K.kernels_ir())
    assert "add" in lib and "nope" not in lib
    assert lib["add"].address != 0


def test_kernel_call_errors(lib):
    with pytest.raises(KernelError, match="'fail' failed: .*status 7"):
        lib["fail"]()
    a = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match="argument 0: expected a C-contiguous"):
        lib["relu"](a[::2], np.zeros(8, np.float32))
    with pytest.raises(TypeError, match="argument 1: expected NDArray or numpy.ndarray"):
        lib["relu"](a, [0.0])
    with pytest.raises(KeyError, match="no kernel named 'nope'"):
        lib["nope"]


def test_missing_function_name():
    obj, _ = K.object_code(8, ["add"])
    with pytest.raises(ValueError, match=r"does not define function\(s\) \['relu'\]"):
        KernelLibrary(obj, ["add", "relu"])


@pytest.mark.parametrize(
    "blob, message",
    [
        (b"garbage" * 10, "not ELF"),
        (b"", "too short"),
        (None, "truncated"),  # filled in below with a truncated real object
    ],
)
def test_bad_object_code(blob, message):
    if blob is None:
        blob = K.object_code(8, ["add"])[0][:200]
    with pytest.raises(ValueError, match=message):
        KernelLibrary(blob, ["add"])


def test_unresolved_symbol_is_rejected_not_a_crash():
    tm = host_target_machine()
    mod = llvm.parse_assembly(
        "declare float @no_such_symbol_xyz(float)\ndeclare float @expf(float)\n"
        "define i32 @f(ptr %a) {\n  %x = call float @no_such_symbol_xyz(float 1.0)\n"
        "  %y = call float @expf(float %x)\n  ret i32 0\n}"
    )
    mod.triple = tm.triple
    with pytest.raises(ValueError, match=r"lacks: \['no_such_symbol_xyz'\]"):
        KernelLibrary(tm.emit_object(mod), ["f"])


def test_libm_symbols_resolve():
    tm = host_target_machine()
    mod = llvm.parse_assembly(
        "declare float @expf(float)\n"
        "define i32 @e(ptr %args) {\n  %p = load ptr, ptr %args\n  %x = load float, ptr %p\n"
        "  %y = call float @expf(float %x)\n  store float %y, ptr %p\n  ret i32 0\n}"
    )
    mod.triple = tm.triple
    lib = KernelLibrary(tm.emit_object(mod), ["e"])
    x = np.array([1.0], np.float32)
    lib["e"](x)
    np.testing.assert_allclose(x, np.exp(np.float32(1.0)), rtol=1e-6)


def test_argument_types():
    with pytest.raises(TypeError, match="object_code must be bytes"):
        KernelLibrary("abc", ["f"])
    with pytest.raises(ValueError, match="duplicate function names"):
        KernelLibrary(K.object_code(8, ["add"])[0], ["add", "add"])
    with pytest.raises(ValueError, match="opt must be"):
        host_target_machine(7)


def test_engines_do_not_free_the_shared_target_machine():
    """Each engine owns its target machine; dropping engines must leave the cached one usable."""
    import gc

    obj, names = K.object_code(8, ["add"])
    for _ in range(10):
        lib = KernelLibrary(obj, names)
        lib["add"](np.zeros(8, np.float32), np.ones(8, np.float32), np.zeros(8, np.float32))
        del lib
        gc.collect()
    again, _ = K.object_code(8, ["add"])  # emits with the cached host_target_machine()
    assert again == obj
