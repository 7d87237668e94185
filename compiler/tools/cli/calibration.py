"""`relayjit compile --quantize int8 --calibration DIR`: the calibration data, quantizing the
model with relay.quantize, and the accuracy change it measures on that data."""
from __future__ import annotations

import os
import time

import numpy as np

from compiler import relay, transform
from compiler.driver.build import build_progress
from compiler.errors import CompilerError
from .common import CliError, Progress, executor
from .inputs import load_array_file


def read_calibration(directory: str, names: list[str]) -> list[dict]:
    """One sample per file of DIR, in name order: an .npz holds the inputs by name, an .npy
    the only input of a one-input model."""
    if not os.path.isdir(directory):
        raise CliError(f"bad --calibration {directory!r}: not a directory of .npy/.npz inputs")
    files = sorted(f for f in os.listdir(directory) if f.endswith((".npy", ".npz")))
    if not files:
        raise CliError(f"bad --calibration {directory!r}: no .npy or .npz files in it")
    samples = []
    for name in files:
        path = os.path.join(directory, name)
        data = load_array_file(path, path)
        if isinstance(data, np.lib.npyio.NpzFile):
            sample = dict(data.items())
        elif len(names) == 1:
            sample = {names[0]: data}
        else:
            raise CliError(f"bad --calibration file {path}: a .npy file holds one array but "
                           f"the model has {len(names)} inputs {names}; use .npz files")
        missing = sorted(set(names) - set(sample))
        if missing:
            raise CliError(f"bad --calibration file {path}: no array for input(s) {missing}")
        samples.append({k: sample[k] for k in names})
    return samples


def quantize_model(model, shapes: dict, opt_level: int, progress: Progress, target: str,
                   directory: str, calibrate_mode: str, weight_scale: str):
    """(int8 factory, float factory, samples, seconds): the model imported, quantized on the
    calibration data and built; the float build is for the accuracy report."""
    start = time.perf_counter()
    progress("importing ONNX graph")
    mod, params = relay.frontend.from_onnx(model, shape=shapes or None)
    names = [p.name_hint for p in mod["main"].params if p.name_hint not in params]
    samples = read_calibration(directory, names)
    progress(f"calibrating on {len(samples)} samples ({calibrate_mode})")
    try:
        with relay.quantize.qconfig(calibrate_mode=calibrate_mode, weight_scale=weight_scale):
            qmod = relay.quantize.quantize(mod, params, samples)
    except (CompilerError, ValueError, TypeError) as err:
        raise CliError(f"quantizing {len(samples)} calibration samples failed: {err}") from None
    with transform.PassContext(opt_level=opt_level), build_progress(progress, detail=progress.tty):
        factory = relay.build(qmod, target=target)
        float_factory = relay.build(mod, target=target, params=params)
    seconds = time.perf_counter() - start
    progress.done(seconds)
    return factory, float_factory, samples, seconds


def accuracy_report(factory, float_factory, samples: list[dict]) -> str:
    """Per output over the samples: max and mean |int8 - float32|, and for class scores
    (last axis longer than 1) the share of samples whose top-1 class agrees."""
    int8, fp32 = executor(factory), executor(float_factory)
    rows: dict = {}
    for sample in samples:
        for module in (int8, fp32):
            module.run(**sample)
        for i in range(fp32.get_num_outputs()):
            got = int8.get_output(i).numpy().astype(np.float64)
            want = fp32.get_output(i).numpy().astype(np.float64)
            row = rows.setdefault(i, {"max": 0.0, "sum": 0.0, "count": 0, "agree": 0,
                                      "rows": 0, "scale": 0.0})
            diff = np.abs(got - want)
            row["max"] = max(row["max"], float(diff.max()) if diff.size else 0.0)
            row["sum"] += float(diff.sum())
            row["count"] += diff.size
            row["scale"] = max(row["scale"], float(np.abs(want).max()) if want.size else 0.0)
            if want.ndim >= 1 and want.shape[-1] > 1:
                row["agree"] += int((got.argmax(-1) == want.argmax(-1)).sum())
                row["rows"] += int(np.prod(want.shape[:-1]))
    lines = [f"accuracy change on the {len(samples)} calibration samples (int8 vs float32):"]
    for i, row in rows.items():
        text = (f"  output {i}: max |diff| {row['max']:.4g}, mean |diff| "
                f"{row['sum'] / max(row['count'], 1):.4g} (float32 outputs reach "
                f"{row['scale']:.4g})")
        if row["rows"]:
            text += f", top-1 agreement {100.0 * row['agree'] / row['rows']:.1f}%"
        lines.append(text)
    return "\n".join(lines)
