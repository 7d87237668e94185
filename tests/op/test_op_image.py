"""image.grid_sample and vision.roi_align: references against ONNX's reference implementation,
lowered kernels against the references, and hostile coordinates that must not read out of
bounds."""
from __future__ import annotations

import numpy as np
import pytest
from onnx.reference.ops.op_grid_sample import GridSample
from onnx.reference.ops.op_roi_align import RoiAlign

from tests.codegen_ops.lowering_harness import run_op
from tests.op._opcheck import check
from compiler.errors import TypeInferenceError
from compiler.ir.expr import var
from compiler.op import image, vision

OPS_TESTED = ["image.grid_sample", "vision.roi_align"]
RNG = np.random.default_rng(5)
_ONNX_MODE = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}


def onnx_grid_sample(x, grid_last, method, padding, align):
    op = GridSample.__new__(GridSample)
    op.mode, op.padding_mode, op.align_corners = _ONNX_MODE[method], padding, int(align)
    return op._run(x, grid_last, mode=_ONNX_MODE[method], padding_mode=padding,
                   align_corners=int(align))[0]


def _grid(n, *out, nd=2, scale=1.3):
    return (RNG.uniform(-scale, scale, (n,) + out + (nd,))).astype("float32")


def _channel_first(grid_last):
    nd = grid_last.shape[-1]
    return np.ascontiguousarray(np.moveaxis(grid_last, -1, 1)), nd


@pytest.mark.parametrize("method", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_2d_matches_onnx(method, padding, align):
    x = RNG.standard_normal((2, 3, 4, 5)).astype("float32")
    g = _grid(2, 3, 6)
    grid, _ = _channel_first(g)
    call = image.grid_sample(var("x", shape=x.shape), var("g", shape=grid.shape), method=method,
                             padding_mode=padding, align_corners=align)
    ref = check(call, x, grid)
    np.testing.assert_allclose(ref, onnx_grid_sample(x, g, method, padding, align), rtol=1e-4,
                               atol=1e-5)
    got, (expected,) = run_op("image.grid_sample", [x, grid], method=method,
                              padding_mode=padding, align_corners=align)
    np.testing.assert_allclose(got[0], expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_grid_sample_3d_matches_onnx(method):
    x = RNG.standard_normal((1, 2, 3, 4, 5)).astype("float32")
    g = _grid(1, 2, 3, 4, nd=3)
    grid, _ = _channel_first(g)
    attrs = dict(method=method, layout="NCDHW", padding_mode="zeros", align_corners=False)
    ref = check(image.grid_sample(var("x", shape=x.shape), var("g", shape=grid.shape), **attrs),
                x, grid)
    np.testing.assert_allclose(ref, onnx_grid_sample(x, g, method, "zeros", False), rtol=1e-4,
                               atol=1e-5)
    got, (expected,) = run_op("image.grid_sample", [x, grid], **attrs)
    np.testing.assert_allclose(got[0], expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_hostile_coordinates_stay_in_bounds(padding):
    x = RNG.standard_normal((1, 1, 3, 3)).astype("float32")
    grid = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 7.5, -9.25, 0.0],
                    "float32").reshape(1, 2, 2, 2)
    got, (expected,) = run_op("image.grid_sample", [x, grid], method="bicubic",
                              padding_mode=padding, align_corners=False)
    assert np.isfinite(got[0][np.isfinite(expected)]).all()
    if padding == "zeros":  # every sample here lies outside the image (or is NaN): all zero
        assert np.all(got[0] == 0) and np.all(expected == 0)


def test_grid_sample_errors_name_the_op():
    x, grid = var("x", shape=(1, 1, 4, 4)), var("g", shape=(1, 2, 3, 3))
    with pytest.raises(TypeInferenceError, match="image.grid_sample.*method"):
        check(image.grid_sample(x, grid, method="area"), np.zeros((1, 1, 4, 4), "f4"),
              np.zeros((1, 2, 3, 3), "f4"))
    bad = var("g", shape=(1, 3, 3, 3))
    with pytest.raises(TypeInferenceError, match="grid"):
        check(image.grid_sample(x, bad), np.zeros((1, 1, 4, 4), "f4"),
              np.zeros((1, 3, 3, 3), "f4"))


def onnx_roi_align(x, rois5, mode, aligned, size, scale, ratio):
    op = RoiAlign.__new__(RoiAlign)
    return op._run(x, rois5[:, 1:], rois5[:, 0].astype(np.int64),
                   coordinate_transformation_mode="half_pixel" if aligned
                   else "output_half_pixel", mode=mode, output_height=size[0],
                   output_width=size[1], sampling_ratio=ratio, spatial_scale=scale)[0]


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("aligned", [False, True])
def test_roi_align_matches_onnx(mode, aligned):
    x = RNG.standard_normal((2, 3, 8, 9)).astype("float32")
    rois = np.array([[0, 0.5, 1.0, 6.0, 7.5], [1, -3.0, -2.0, 12.0, 11.0], [1, 4, 4, 4.2, 4.1],
                     [0, 20, 20, 30, 30]], "float32")
    attrs = dict(pooled_size=(3, 2), spatial_scale=0.75, sample_ratio=2, mode=mode,
                 aligned=aligned)
    ref = check(vision.roi_align(var("x", shape=x.shape), var("r", shape=rois.shape), **attrs),
                x, rois)
    np.testing.assert_allclose(ref, onnx_roi_align(x, rois, mode, aligned, (3, 2), 0.75, 2),
                               rtol=1e-4, atol=1e-5)
    got, (expected,) = run_op("vision.roi_align", [x, rois], **attrs)
    np.testing.assert_allclose(got[0], expected, rtol=1e-4, atol=1e-5)


def test_roi_align_hostile_batch_index_and_adaptive_ratio():
    x = RNG.standard_normal((1, 1, 4, 4)).astype("float32")
    rois = np.array([[np.nan, 0, 0, 3, 3], [5e9, 0, 0, np.inf, 3]], "float32")
    got, _ = run_op("vision.roi_align", [x, rois], pooled_size=(2, 2), spatial_scale=1.0,
                    sample_ratio=1)
    assert got[0].shape == (2, 1, 2, 2)
    with pytest.raises(TypeInferenceError, match="sample_ratio"):
        check(vision.roi_align(var("x", shape=(1, 1, 4, 4)), var("r", shape=(1, 5)), (2, 2),
                               1.0, sample_ratio=0), x, rois[:1])
