"""Calibration for relay.quantize: the clipping threshold of a tensor from the values it took
on the calibration data (TVM's calibrate_mode and weight_scale), in numpy.

    global_scale    a fixed threshold (qconfig's global_scale), no data needed
    max             the largest magnitude seen (relayjit's "min/max" mode)
    percentile      the 99.99th percentile of the magnitudes
    kl_divergence   the threshold whose clipped, 128-level histogram is closest (KL
                    divergence) to the 2048-bin histogram of the magnitudes (TensorRT's method,
                    as TVM's _find_scale_by_kl)
Weights: "max" (the largest magnitude) or "power2" (that rounded up to a power of two).
"""
from __future__ import annotations

import math

import numpy as np

from compiler.errors import CompilerError

CALIBRATE_MODES = ("global_scale", "max", "percentile", "kl_divergence")
WEIGHT_SCALES = ("power2", "max")
PERCENTILE = 99.99
_BINS, _LEVELS = 2048, 128
_MIN_SAMPLES = _BINS


class Statistics:
    """Running statistics of one tensor over the calibration batches (magnitudes only:
    relay.quantize quantizes symmetrically)."""

    def __init__(self) -> None:
        self.samples: list = []
        self.max = 0.0

    def add(self, value: np.ndarray) -> None:
        magnitude = np.abs(np.asarray(value, np.float64)).reshape(-1)
        magnitude = magnitude[np.isfinite(magnitude)]
        if magnitude.size:
            self.max = max(self.max, float(magnitude.max()))
            self.samples.append(magnitude)

    def values(self) -> np.ndarray:
        return np.concatenate(self.samples) if self.samples else np.zeros(1)


def threshold(stats: Statistics, mode: str, global_scale: float) -> float:
    """The clipping threshold of an activation under calibrate_mode `mode`."""
    if mode == "global_scale":
        return float(global_scale)
    if mode == "max":
        value = stats.max
    elif mode == "percentile":
        value = float(np.percentile(stats.values(), PERCENTILE))
    elif mode == "kl_divergence":
        value = kl_threshold(stats.values())
    else:
        raise CompilerError(f"qconfig: calibrate_mode must be one of {list(CALIBRATE_MODES)}, "
                            f"got {mode!r}")
    return value if value > 0 else 1.0


def weight_threshold(weight: np.ndarray, mode: str) -> float:
    """The clipping threshold of a constant weight under weight_scale `mode`."""
    value = float(np.abs(weight).max()) if weight.size else 0.0
    if value <= 0:
        return 1.0
    if mode == "power2":
        return 2.0 ** math.ceil(math.log2(value))
    if mode == "max":
        return value
    raise CompilerError(f"qconfig: weight_scale must be one of {list(WEIGHT_SCALES)}, got "
                        f"{mode!r}")


def kl_threshold(magnitudes: np.ndarray) -> float:
    """TensorRT's entropy calibration over |x|: for each candidate bin count i (from 128 to
    2048), the reference P is the histogram's first i bins with the tail added to the last;
    Q is those i bins without the tail merged into 128 levels and spread back over P's
    non-empty bins; the threshold is the upper edge of the i with the smallest KL(P || Q).
    With fewer values than bins the histogram says little: the largest magnitude is kept."""
    magnitudes = magnitudes[magnitudes > 0]  # zeros (a ReLU's half) quantize exactly anyway
    top = float(magnitudes.max()) if magnitudes.size else 0.0
    if top <= 0 or magnitudes.size < _MIN_SAMPLES:
        return top  # too few values to estimate a distribution: no clipping
    hist, edges = np.histogram(magnitudes, bins=_BINS, range=(0.0, top))
    hist = hist.astype(np.float64)
    best, best_i = math.inf, _BINS
    for i in range(_LEVELS, _BINS + 1):
        p = hist[:i].copy()
        p[-1] += hist[i:].sum()
        bounds = (np.arange(_LEVELS + 1) * i) // _LEVELS
        level = np.repeat(np.arange(_LEVELS), np.diff(bounds))  # the level of each bin
        totals = np.bincount(level, weights=hist[:i], minlength=_LEVELS)  # without the tail
        used = np.bincount(level, weights=(p > 0).astype(np.float64), minlength=_LEVELS)
        q = np.where(p > 0, totals[level] / np.maximum(used[level], 1.0), 0.0)
        divergence = _kl(p, q)
        if divergence < best:
            best, best_i = divergence, i
    return float(edges[best_i])


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    p, q = p / p.sum(), q / max(q.sum(), 1e-300)
    mask = p > 0
    if np.any(q[mask] == 0):
        return math.inf
    return float(np.sum(p[mask] * np.log(p[mask] / q[mask])))
