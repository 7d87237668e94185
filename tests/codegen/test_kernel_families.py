"""Kernel families: kernels that differ only in an extent compile to one shared body."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import runtime
from codegen import cache, jit, te, tir
from codegen.compile_stats import record_compile_stats
from codegen.kernel_families import Family, find_families
from codegen.lower import lower
from codegen.microkernel_objects import microkernels_called
from codegen.optimise import compile_units
from codegen.schedules import conv2d_nchw_packed
from runtime import graph_executor
from tests.runtime import _runtime_kernels as K

from tests.schedule_helpers import conv_pack, host

RNG = np.random.default_rng(11)


def _bn_relu(name: str, channels: int, size: int = 6):
    """relu(x * scale[c] + shift[c]) over (1, C, size, size): DenseNet's BN+ReLU kernels."""
    x = te.placeholder((1, channels, size, size), name="x")
    scale = te.placeholder((channels, 1, 1), name="scale")
    shift = te.placeholder((channels, 1, 1), name="shift")
    y = te.compute(x.shape, lambda n, c, h, w: tir.max(
        x[n, c, h, w] * scale[c, 0, 0] + shift[c, 0, 0], tir.const(0.0, "float32")),
        name="bn_relu")
    return lower(name, [x, scale, shift], [y])


def _bn_relu_inputs(channels: int, size: int = 6):
    return (RNG.standard_normal((1, channels, size, size)).astype("float32"),
            RNG.standard_normal((channels, 1, 1)).astype("float32"),
            RNG.standard_normal((channels, 1, 1)).astype("float32"))


def _conv(name: str, channels: int, size: int = 14):
    """A 1x1 conv onto 64 channels on a pre-packed weight (DenseNet's bottleneck convs; the
    schedule calls a conv micro-kernel with the channel count as an argument)."""
    x = te.placeholder((1, channels, size, size), name="x")
    wp = te.placeholder(conv_pack(64, channels, 1, 1), name="wp")
    return lower(name, [x, wp], [conv2d_nchw_packed(x, wp, channels=64, options=host())])


def _pack(w: np.ndarray) -> np.ndarray:
    """w [K, C, 1, 1] -> Wp[1, K/KB, C, 1, 1, KB] (conv2d_pack_geometry)."""
    k, c = w.shape[:2]
    wp = np.zeros(conv_pack(k, c, 1, 1), np.float32)
    kb = wp.shape[-1]
    for kk in range(k):
        wp[0, kk // kb, :, :, :, kk % kb] = w[kk]
    return wp


@pytest.fixture(autouse=True)
def fresh_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAYJIT_CACHE_DIR", str(tmp_path / "cache"))
    jit.clear_cache()
    yield
    jit.clear_cache()


def test_kernels_differing_in_channels_share_one_body_and_each_runs_correctly():
    channels = (16, 24, 40)
    funcs = [_bn_relu(f"bn_relu_{c}", c) for c in channels]
    units = find_families(funcs)
    assert len(units) == 1 and isinstance(units[0], Family)
    assert units[0].members == tuple(funcs) and units[0].extents == channels
    text = jit.get_llvm_ir(funcs, options=host())
    bodies = [line for line in text.splitlines()
              if line.startswith("define") and "_family.body(" in line]
    assert len(bodies) == 1 and "noinline" in text  # one shared body, called by every member
    with record_compile_stats() as stats:
        lib = jit.build_library(funcs, options=host())
    assert (stats.families, stats.family_members) == (1, 3)
    for c, f in zip(channels, funcs):
        x, scale, shift = _bn_relu_inputs(c)
        out = np.empty_like(x)
        lib[f.name](x, scale, shift, out)
        np.testing.assert_allclose(out, np.maximum(x * scale + shift, 0), rtol=1e-6)
        assert lib.signatures[f.name][0] == ((1, c, 6, 6), "float32")  # each member its own


def test_conv_family_calls_the_micro_kernel_with_each_members_channels():
    channels = (96, 128, 160)
    funcs = [_conv(f"conv_{c}", c) for c in channels]
    units = find_families(funcs)
    assert [type(u) for u in units] == [Family] and units[0].extents == channels
    assert microkernels_called(funcs) == microkernels_called(funcs[:1])
    lib = jit.build_library(funcs, options=host())
    for c, f in zip(channels, funcs):
        x = RNG.standard_normal((1, c, 14, 14)).astype("float32")
        w = RNG.standard_normal((64, c, 1, 1)).astype("float32")
        out = np.empty((1, 64, 14, 14), "float32")
        lib[f.name](x, _pack(w), out)
        np.testing.assert_allclose(out, np.einsum("nchw,kc->nkhw", x, w[:, :, 0, 0]),
                                   rtol=1e-4, atol=1e-4)


def test_a_member_given_another_members_shape_is_refused_by_the_runtime():
    funcs = [_bn_relu("bn_relu_a", 16), _bn_relu("bn_relu_b", 24)]
    lib = jit.build_library(funcs, options=host())
    nodes = [K.null("x"), K.null("scale"), K.null("shift"),
             K.op("bn", "bn_relu_a", [[0, 0, 0], [1, 0, 0], [2, 0, 0]])]
    right = [[1, 16, 6, 6], [16, 1, 1], [16, 1, 1], [1, 16, 6, 6]]
    m = graph_executor.create(K.graph(nodes, [[3, 0]], right, [0, 1, 2, 3]), lib, runtime.cpu())
    x, scale, shift = _bn_relu_inputs(16)
    m.run(x=x, scale=scale, shift=shift)
    np.testing.assert_allclose(m.get_output(0).numpy(), np.maximum(x * scale + shift, 0),
                               rtol=1e-6)
    wrong = [[1, 24, 6, 6], [24, 1, 1], [24, 1, 1], [1, 24, 6, 6]]  # bn_relu_b's extent
    with pytest.raises(ValueError, match=r"argument 0 of kernel 'bn_relu_a' is \(1, 16, 6, 6\) "
                                         r"float32, the graph gives entry 0 as \(1, 24, 6, 6\)"):
        graph_executor.create(K.graph(nodes, [[3, 0]], wrong, [0, 1, 2, 3]), lib, runtime.cpu())


def test_only_affine_variation_forms_a_family():
    # channels and size vary independently: the kernels of one size form a family
    funcs = [_bn_relu("a", 16, 6), _bn_relu("b", 24, 6), _bn_relu("c", 16, 10),
             _bn_relu("d", 32, 6)]
    units = find_families(funcs)
    families = [u for u in units if isinstance(u, Family)]
    assert len(families) == 1 and [f.name for f in families[0].members] == ["a", "b", "d"]
    assert units[1] is funcs[2]  # alone, as it is
    # different computations never merge
    other = te.placeholder((1, 16, 6, 6), name="x")
    doubled = lower("doubled", [other], [te.compute(other.shape, lambda *i: other[i] * 2.0,
                                                    name="y")])
    assert find_families([funcs[0], doubled]) == [funcs[0], doubled]


def test_families_can_be_turned_off_and_the_cache_keys_differ():
    funcs = [_bn_relu("on_a", 16), _bn_relu("on_b", 24)]
    key_on = jit.structural_key(funcs, host(), 3)
    off = dataclasses.replace(host(), kernel_families=False)
    assert compile_units(funcs, False) == funcs
    assert jit.structural_key(funcs, off, 3) != key_on
    with record_compile_stats() as stats:
        lib = jit.build_library(funcs, options=off)
    assert stats.families == 0 and "_family" not in jit.get_llvm_ir(funcs, options=off)
    x, scale, shift = _bn_relu_inputs(24)
    out = np.empty_like(x)
    lib["on_b"](x, scale, shift, out)
    np.testing.assert_allclose(out, np.maximum(x * scale + shift, 0), rtol=1e-6)


def test_a_cached_family_loads_under_other_kernel_names():
    first = [_bn_relu("first_a", 16), _bn_relu("first_b", 24)]
    jit.build_library(first, options=host())
    jit.clear_cache()  # as a new process: only the disk cache remains
    cache.reset_disk_cache_stats()
    second = [_bn_relu("second_a", 16), _bn_relu("second_b", 24)]
    with record_compile_stats() as stats:
        lib = jit.build_library(second, options=host())
    assert stats.disk_hits == 1 and stats.misses == 0
    x, scale, shift = _bn_relu_inputs(24)
    out = np.empty_like(x)
    lib["second_b"](x, scale, shift, out)
    np.testing.assert_allclose(out, np.maximum(x * scale + shift, 0), rtol=1e-6)


def _guarded(name: str, channels: int, guard_x: bool):
    """y[c, i] = x[c, i] * (i < 4 ? g[i] : 1), or (guard_x) i < 4 ? x[c, i] : 0: a guarded
    load of a buffer whose shape is the same for every channel count, or of x, whose is not."""
    x = te.placeholder((channels, 8), name="x")
    g = te.placeholder((8,), name="g")
    one, zero = tir.const(1.0, "float32"), tir.const(0.0, "float32")
    if guard_x:
        y = te.compute(x.shape, lambda c, i: tir.ops.if_then_else(i < 4, x[c, i], zero) + g[i],
                       name="y")
    else:
        y = te.compute(x.shape, lambda c, i: x[c, i] * tir.ops.if_then_else(i < 4, g[i], one),
                       name="y")
    return lower(name, [x, g], [y])


def test_a_guarded_load_of_a_varying_buffer_keeps_the_kernels_apart():
    apart = [_guarded(f"apart_{c}", c, True) for c in (16, 24)]
    assert find_families(apart) == apart
    together = [_guarded(f"together_{c}", c, False) for c in (16, 24)]
    units = find_families(together)
    assert len(units) == 1 and isinstance(units[0], Family)
    lib = jit.build_library(together, options=host())
    for c, f in zip((16, 24), together):
        x = RNG.standard_normal((c, 8)).astype("float32")
        g = RNG.standard_normal(8).astype("float32")
        out = np.empty_like(x)
        lib[f.name](x, g, out)
        np.testing.assert_allclose(out, x * np.where(np.arange(8) < 4, g, 1), rtol=1e-6)


def test_kernels_dividing_by_the_varying_extent_stay_apart():
    def tiled(name: str, n: int):
        x = te.placeholder((n,), name="x")
        return lower(name, [x], [te.compute((64,), lambda i: x[i % n] * 2.0, name="y")])

    funcs = [tiled("tile_12", 12), tiled("tile_20", 20)]
    assert find_families(funcs) == funcs


def _column_sums(name: str, channels: int):
    """y[i] = sum over c of x[c, i]: the reduction's loop extent is the varying one."""
    x = te.placeholder((channels, 24), name="x")
    c = te.reduce_axis(channels, name="c")
    return lower(name, [x], [te.compute((24,), lambda i: te.sum(x[c, i], axis=c), name="y")])


def _transposed(name: str, channels: int):
    """y[i, c] = x[c, i] + 1: the output's strides vary with the channels."""
    x = te.placeholder((channels, 24), name="x")
    return lower(name, [x], [te.compute((24, channels), lambda i, c: x[c, i] + 1.0, name="y")])


@pytest.mark.parametrize("make, reference", [
    (_column_sums, lambda x: x.sum(axis=0)),
    (_transposed, lambda x: x.T + 1),
])
def test_varying_reduction_extents_and_output_strides(make, reference):
    channels = (5, 12, 33)
    funcs = [make(f"{make.__name__[1:]}_{c}", c) for c in channels]
    units = find_families(funcs)
    assert len(units) == 1 and isinstance(units[0], Family)
    lib = jit.build_library(funcs, options=host())
    for c, f in zip(channels, funcs):
        x = RNG.standard_normal((c, 24)).astype("float32")
        out = np.empty(f.params[-1].shape, "float32")
        lib[f.name](x, out)
        np.testing.assert_allclose(out, reference(x), rtol=1e-5, atol=1e-5)
