"""Micro-kernel descriptors (codegen.llvm.microkernels.descriptors): frozen records naming one
specialised micro-kernel, whose symbol carries every field, whose declared argument types
the definitions and the calls follow, and whose code is a function of the record alone."""
from __future__ import annotations

import random
from dataclasses import fields

import pytest
from llvmlite import ir

from codegen.llvm.microkernels import (I64, PTR, Conv, ConvBlocked, ConvRows, Gemm, GemmRows,
                                       Gemv, by_symbol, define)
from codegen.llvm.microkernels.common import llvm_args
from codegen.schedules.common import addr, ukr_call
from codegen.tir.stmt import Buffer

EXAMPLES = [
    (Gemm(6, 16, 8), "gemm_6x16"),
    (Gemm(8, 48, 16), "gemm_8x48x16"),
    (GemmRows(12, 32, 16), "gemm_12x32_rows"),
    (GemmRows(8, 48, 16, prefetch_rows=True), "gemm_8x48x16_rows_pf"),
    (Gemv(48, 16), "gemv_48x16"),
    (Gemv(32, 16, 2), "gemv_32_2"),
    (Gemv(16, 8, 2), "gemv_16_2"),
    (Conv(16, 8, 6, 3, 3, 58, 3364, 1, 1, True, 3), "conv_16_6_3_3_58_3364_1_1_1_3"),
    (Conv(48, 16, 8, 3, 3, 30, 900, 1, 1, False, 2, 1), "conv_48x16_8_3_3_30_900_1_1_0_2_1"),
    (ConvBlocked(32, 16, 8, 3, 3, 480, 7200, 1, 16, 16, 2, 16),
     "convb_32x16_8_3_3_480_7200_1_16_16_2_16"),
    (ConvRows(8, 3, 16, 16, 3, 3, 1, 16, 1, 1, 1, 1, 22, 50, True),
     "convrows_8_3_16_16_3_3_1_16_1_1_1_1_22_50_1"),
]


@pytest.mark.parametrize("kernel,name", EXAMPLES, ids=[n for _, n in EXAMPLES])
def test_symbols_name_the_fields_and_look_the_record_up(kernel, name):
    assert kernel.symbol == "relayjit.ukr." + name
    assert by_symbol(kernel.symbol) == kernel and hash(by_symbol(kernel.symbol)) == hash(kernel)
    assert type(kernel)(*(getattr(kernel, f.name) for f in fields(kernel))) == kernel


@pytest.mark.parametrize("kind", [Gemm, GemmRows, Gemv, Conv, ConvBlocked, ConvRows],
                         ids=lambda k: k.kind)
def test_one_symbol_one_record(kind):
    """Random records of a kind: equal symbols only for equal records (the caches key code
    by the symbol; making a record whose symbol another one holds raises)."""
    rng = random.Random(kind.kind)
    records = set()
    for _ in range(600):
        vw = rng.choice((4, 8, 16))
        values = {}
        for f in fields(kind):
            values[f.name] = rng.random() < 0.5 if f.type == "bool" else vw \
                if f.name == "vw" else vw * rng.choice((2, 3)) if f.name in ("kb", "nr") \
                else rng.randrange(0, 4) * rng.choice((1, 1, 8, 16)) + rng.randrange(1, 3)
        try:
            records.add(kind(**values))
        except ValueError:  # a combination the definition does not implement
            continue
    assert len(records) > 50
    assert len({r.symbol for r in records}) == len(records)


def test_fields_are_checked():
    with pytest.raises(TypeError, match="int >= 0"):
        Gemm(6, 16, True)
    with pytest.raises(TypeError, match="int >= 0"):
        Gemv(32, -16)
    with pytest.raises(TypeError, match="bool"):
        GemmRows(6, 16, 8, prefetch_rows=1)
    with pytest.raises(ValueError, match="whole vectors"):
        Gemm(6, 20, 8)
    with pytest.raises(ValueError, match="two or three vectors"):
        Conv(64, 8, 6, 3, 3, 58, 3364, 1, 1, True)
    assert Gemv(32, 16).panels == 1 and type(Gemm(6, 16, 8).mr) is int


@pytest.mark.parametrize("kernel", [k for k, _ in EXAMPLES], ids=[n for _, n in EXAMPLES])
def test_definitions_take_the_declared_arguments_and_depend_on_the_record_alone(kernel):
    texts = []
    for _ in range(2):
        module = ir.Module(name="m")
        fn = define(module, kernel)
        assert fn.name == kernel.symbol
        assert list(fn.function_type.args) == llvm_args(kernel)
        texts.append(str(module))
    assert texts[0] == texts[1]
    assert len(kernel.args) == len(llvm_args(kernel)) and set(kernel.args) <= {PTR, I64}


def test_calls_follow_the_declaration():
    """ukr_call refuses a value where the descriptor declares an address, and a wrong count."""
    kernel = Gemv(32, 16)
    x, w, c = (Buffer(n, (64,), "float32") for n in ("x", "w", "c"))
    call = ukr_call(kernel, 64, addr(x, 0), addr(w, 0), addr(c, 0), 2048)
    assert call.value.name == kernel.symbol
    with pytest.raises(ValueError, match="argument 1 is declared ptr"):
        ukr_call(kernel, 64, 0, addr(w, 0), addr(c, 0), 2048)
    with pytest.raises(ValueError, match="takes 5 arguments"):
        ukr_call(kernel, 64, addr(x, 0), addr(w, 0), addr(c, 0))
