"""The int8 conv2d schedule (codegen.schedules.conv2d_int8) against numpy's integer math,
exactly: every target kind, strides, dilation, padding with a run-time value, channels not in
whole groups of four or whole output blocks, partial pixel tiles and blocks, batches, and tile
configurations on both sides of the half-height transpose (tiles of at most lanes / 2 rows)."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import jit, te
from codegen.schedules.conv2d_int8 import conv2d_int8
from codegen.schedules.int8_config import Int8Config, int8_conv_geometry, resolve_int8
from compiler.op.nn_int8 import pack_conv2d_int8_weight

from tests.codegen.test_schedule_dense_int8 import DOT_OF, TARGETS, _options

RNG = np.random.default_rng(12)


def _reference(x, w, pad_value, strides, padding, dilation):
    pt, pl, pb, pr = padding
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pt, pb), (pl, pr)),
                constant_values=pad_value)
    k, _, r, s = w.shape
    (sh, sw), (dh, dw) = strides, dilation
    oh = (xp.shape[2] - dh * (r - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (s - 1) - 1) // sw + 1
    out = np.zeros((x.shape[0], k, oh, ow), np.int64)
    for rr in range(r):
        for ss in range(s):
            patch = xp[:, :, rr * dh:rr * dh + sh * (oh - 1) + 1:sh,
                       ss * dw:ss * dw + sw * (ow - 1) + 1:sw]
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, rr, ss].astype(np.int64))
    return out.astype(np.int32)


def _check(options, xs, ws, strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1),
           pad_value=7, config=None):
    cfg = resolve_int8(options, config, conv=True, columns=ws[0])
    x = te.placeholder(xs, "uint8", "x")
    w = te.placeholder(int8_conv_geometry(*ws, cfg.block()), "int8", "w")
    z = te.placeholder((), "int32", "z")
    y = conv2d_int8(x, w, z, strides, padding, dilation, ws[0], options=options, config=config)
    run = jit.build_te([x, w, z], [y], "conv2d_int8_test", options=options)
    xa = RNG.integers(0, 256, xs, dtype=np.uint8)
    wa = RNG.integers(-128, 128, ws, dtype=np.int8)
    got = run(xa, pack_conv2d_int8_weight(wa, cfg.block()), np.array(pad_value, "int32"))[0]
    np.testing.assert_array_equal(got, _reference(xa, wa, pad_value, strides, padding,
                                                  dilation))
    return cfg


CASES = [  # data, weight, strides, padding (top, left, bottom, right), dilation
    ((1, 8, 10, 10), (16, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((2, 5, 9, 7), (20, 5, 3, 3), (2, 2), (1, 0, 2, 1), (1, 1)),
    ((1, 3, 17, 17), (64, 3, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1)),
    ((1, 16, 12, 12), (70, 16, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((1, 16, 12, 12), (24, 16, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),
    ((1, 64, 7, 7), (130, 64, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((1, 6, 3, 83), (16, 6, 1, 3), (1, 2), (0, 1, 0, 2), (1, 1)),  # rows of 64 + 16 + 3 pixels
]


@pytest.mark.parametrize("kind", list(TARGETS))
@pytest.mark.parametrize("xs,ws,strides,padding,dilation", CASES)
def test_conv2d_int8_matches_numpy(kind, xs, ws, strides, padding, dilation):
    options = _options(kind)
    cfg = _check(options, xs, ws, strides, padding, dilation)
    assert cfg.dot == DOT_OF[kind]


@pytest.mark.parametrize("config", [Int8Config(tile_rows=12, tile_vectors=2),
                                    Int8Config(tile_rows=16, tile_vectors=1),
                                    Int8Config(tile_rows=1, tile_vectors=1),
                                    Int8Config(lanes=8, tile_rows=5, tile_vectors=3)])
def test_tile_shapes_on_both_sides_of_the_half_transpose(config):
    options = _options("avx512-vnni")
    cfg = _check(options, (2, 12, 9, 13), (40, 12, 3, 3), padding=(1, 2, 0, 1), pad_value=250,
                 config=config)
    assert (cfg.tile_rows, cfg.tile_vectors) == (config.tile_rows, config.tile_vectors)
