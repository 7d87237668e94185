"""The int8 dense schedule (codegen.schedules.dense_int8) and its Int8Dot micro-kernel against
numpy's integer math, exactly: every target kind (VNNI on 16 or 8 lanes, AVX-VNNI; without
VNNI vpmaddwd on AVX512BW or AVX2, plain widening multiplies below), odd shapes (partial row
tiles and panels, K not a multiple of four), epilogues that change the dtype."""
from __future__ import annotations

import re

import numpy as np
import pytest

from codegen import jit, te, tir
from codegen.lower import lower
from codegen.options import CodegenOptions
from codegen.schedules.dense_int8 import dense_int8
from codegen.schedules.int8_config import (Int8Config, dot_instruction, int8_dense_geometry,
                                           resolve_int8, vnni)
from compiler.op.nn_int8 import pack_dense_int8_weight
from runtime.target import host_info, resolve_cpu_target

RNG = np.random.default_rng(11)

# (cpu, mattr): the target kinds the int8 kernels choose between, all runnable on a host with
# AVX512-VNNI; each is skipped where the host lacks its features
TARGETS = {
    "avx512-vnni": ("x86-64-v4", ("+avx512vnni",)),
    "avx512": ("x86-64-v4", ()),
    "avx2-avxvnni": ("x86-64-v3", ("+avxvnni",)),
    "avx2": ("x86-64-v3", ()),
    "sse4": ("x86-64-v2", ()),
}
# the dot-product instruction each target kind's kernels use
DOT_OF = {"avx512-vnni": "vpdpbusd", "avx512": "vpmaddwd", "avx2-avxvnni": "vpdpbusd",
          "avx2": "vpmaddwd", "sse4": "widen"}


def _options(kind: str) -> CodegenOptions:
    cpu, mattr = TARGETS[kind]
    target = resolve_cpu_target(cpu, mattr)
    host = set(host_info().enabled_features())
    missing = set(target.enabled_features()) - host
    if missing:
        pytest.skip(f"the host lacks {sorted(missing)}")
    return CodegenOptions.for_cpu(target)


def _run(options: CodegenOptions, lead: tuple, n: int, k: int, epilogue=None,
         config: Int8Config | None = None):
    x = te.placeholder((*lead, k), "uint8", "x")
    cfg = resolve_int8(options, config, columns=n)
    w = te.placeholder(int8_dense_geometry(n, k, cfg.block()), "int8", "w")
    y = dense_int8(x, w, n, options=options, config=config)
    if epilogue is not None:
        y = te.compute(y.shape, lambda *i: epilogue(y[i]), name="epilogue")
    run = jit.build_te([x, w], [y], "dense_int8_test", options=options)
    xa = RNG.integers(0, 256, (*lead, k), dtype=np.uint8)
    wa = RNG.integers(-128, 128, (n, k), dtype=np.int8)
    got = run(xa, pack_dense_int8_weight(wa, cfg.block()))[0]
    want = (xa.reshape(-1, k).astype(np.int64) @ wa.T.astype(np.int64)).reshape(*lead, n)
    return got, want.astype(np.int32), cfg


@pytest.mark.parametrize("kind", list(TARGETS))
@pytest.mark.parametrize("lead,n,k", [((16,), 48, 64), ((7,), 50, 33), ((1, 13), 77, 130),
                                      ((2, 3, 5), 17, 4), ((1,), 1, 1)])
def test_dense_int8_matches_numpy(kind, lead, n, k):
    options = _options(kind)
    got, want, cfg = _run(options, lead, n, k)
    assert cfg.dot == DOT_OF[kind]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["avx512-vnni", "avx2"])
def test_dense_int8_epilogue_changes_dtype(kind):
    """The int32 tile through a requantisation-like epilogue into uint8, stored once."""
    options = _options(kind)

    def requant(v):
        f = tir.round(tir.cast(v, "float32") * tir.const(1 / 64, "float32"))
        clamped = tir.min(tir.max(f + tir.const(7.0, "float32"), tir.const(0.0, "float32")),
                          tir.const(255.0, "float32"))
        return tir.cast(clamped, "uint8")

    got, want, _ = _run(options, (9,), 40, 36, requant)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, np.clip(np.rint(want / 64) + 7, 0, 255).astype("u8"))


def test_tile_configuration_is_honoured():
    options = _options("avx512-vnni")
    cfg = Int8Config(lanes=8, tile_rows=3, tile_vectors=2)
    got, want, resolved = _run(options, (10,), 40, 20, config=cfg)
    assert resolved == Int8Config(8, 3, 2, "vpdpbusd")
    np.testing.assert_array_equal(got, want)


def test_the_dot_instruction_follows_the_target_features():
    assert vnni(_options("avx512-vnni"), 16) and vnni(_options("avx512-vnni"), 8)
    assert vnni(_options("avx2-avxvnni"), 8)
    assert not vnni(_options("avx512"), 16) and not vnni(_options("avx2"), 8)
    for kind, dot in DOT_OF.items():
        options = _options(kind)
        assert dot_instruction(options, options.vector_width) == dot
    with pytest.raises(ValueError, match="has"):
        resolve_int8(_options("avx2"), Int8Config(dot="vpdpbusd"))
    assert resolve_int8(_options("avx2"), Int8Config(dot="widen")).dot == "widen"


@pytest.mark.parametrize("kind,dot", [("avx512-vnni", r"vpdpbusd\s+%zmm"),
                                      ("avx2-avxvnni", r"\{vex\}\s*vpdpbusd\s+%ymm"),
                                      ("avx2", r"vpmaddwd\s+%ymm"),
                                      ("avx512", r"vpmaddwd\s+%zmm"), ("sse4", None)])
def test_dot_product_instruction_comes_from_the_target(kind, dot):
    options = _options(kind)
    x = te.placeholder((8, 64), "uint8", "x")
    cfg = resolve_int8(options, columns=64)
    w = te.placeholder(int8_dense_geometry(64, 64, cfg.block()), "int8", "w")
    func = lower("dense_int8_asm", [x, w], [dense_int8(x, w, 64, options=options)])
    asm = jit.get_assembly([func], options=options)
    if dot is None:
        assert "vpdpbusd" not in asm and "vpmaddwd" not in asm
    else:
        assert re.search(dot, asm), f"no {dot} in the {kind} kernel"
