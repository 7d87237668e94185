from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
import pytest

from runtime import KernelError, KernelLibrary, host_target_machine, nd
from runtime.library import check_in_place, check_signatures, signature_table_ir

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
    with pytest.raises(TypeError, match="objects must be bytes or a list of bytes"):
        KernelLibrary("abc", ["f"])
    with pytest.raises(TypeError, match="objects must be bytes or a list of bytes"):
        KernelLibrary([K.object_code(8, ["add"])[0], None], ["add"])
    with pytest.raises(ValueError, match="at least one object file"):
        KernelLibrary([], ["add"])
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


def _object(text: str) -> bytes:
    tm = host_target_machine()
    mod = llvm.parse_assembly(text)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    return tm.emit_object(mod)


# calls @twice, which the object only declares
_CALLER = ("declare float @twice(float)\n"
           "define i32 @use_twice(ptr %args) {\n  %p = load ptr, ptr %args\n"
           "  %x = load float, ptr %p\n  %y = call float @twice(float %x)\n"
           "  store float %y, ptr %p\n  ret i32 0\n}")
_TWICE = "define float @twice(float %x) {\n  %y = fmul float %x, 2.0\n  ret float %y\n}"


def test_kernels_from_several_objects_load_into_one_library():
    irs = K.kernels_ir(8)
    table = signature_table_ir((((8,), "float32"),) * 3 for _ in range(2))
    objects = [_object(irs["add"] + "\n" + table), _object(irs["mul"])]
    lib = KernelLibrary(objects, ["add", "mul"])
    assert lib.objects == tuple(objects) and "2 objects" in repr(lib)
    a, b, c = np.arange(8, dtype=np.float32), np.full(8, 3, np.float32), np.zeros(8, np.float32)
    lib["add"](a, b, c)
    np.testing.assert_array_equal(c, a + 3)
    lib["mul"](a, b, c)
    np.testing.assert_array_equal(c, a * 3)
    assert lib.signatures == {name: (((8,), "float32"),) * 3 for name in ("add", "mul")}


def test_a_symbol_a_sibling_object_defines_is_resolved():
    lib = KernelLibrary([_object(_CALLER), _object(_TWICE)], ["use_twice"])
    x = np.array([1.5], np.float32)
    lib["use_twice"](x)
    assert x[0] == 3.0
    with pytest.raises(ValueError, match=r"lacks: \['twice'\]"):  # no sibling defines it
        KernelLibrary([_object(_CALLER), K.object_code(8, ["add"])[0]], ["use_twice"])


def test_a_symbol_two_objects_define_is_refused():
    with pytest.raises(ValueError, match="'twice' is defined by object 1 and by object 2 of 3"):
        KernelLibrary([_object(_CALLER), _object(_TWICE), _object(_TWICE)], ["use_twice"])
    add = K.object_code(8, ["add"])[0]
    with pytest.raises(ValueError, match="'add' is defined by object 0 and by object 1"):
        KernelLibrary([add, add], ["add"])
    with pytest.raises(ValueError, match="object code is not ELF"):
        KernelLibrary([add, b"garbage" * 10], ["add"])


def test_in_place_pairs_name_an_earlier_argument_of_the_same_type():
    ok = {"k": [[[4], "float32"], [[4], "float32"], [[4], "float32", 1]]}
    assert check_in_place(ok, check_signatures(ok, ["k"])) == {"k": {2: 1}}
    for bad in ([[[4], "float32"], [[4], "float32", 1]],        # itself
                [[[4], "float32"], [[5], "float32", 0]],        # another shape
                [[[4], "int32"], [[4], "float32", 0]],          # another dtype
                [[[4], "float32"], [[4], "float32", True]],     # not an index
                [[[4], "float32"], [[4], "float32", -1]]):
        table = {"k": bad}
        with pytest.raises(ValueError, match="share storage"):
            check_in_place(table, check_signatures(table, ["k"]))
