"""relayjit compile --quantize int8 --calibration DIR: quantized on the folder's inputs, the
accuracy change reported, the module exported and runnable; errors in one line."""
from __future__ import annotations

import numpy as np
import pytest

from tests.cli.test_cli_commands import relayjit, tiny, workdir  # noqa: F401  (fixtures)


@pytest.fixture(scope="module")
def calibration(workdir):  # noqa: F811
    folder = workdir / "calibration"
    folder.mkdir()
    rng = np.random.default_rng(3)
    for i in range(5):
        np.save(folder / f"sample_{i}.npy", rng.standard_normal((1, 3, 8, 8)).astype("f4"))
    np.savez(folder / "sample_9.npz", x=rng.standard_normal((1, 3, 8, 8)).astype("f4"))
    return str(folder)


def test_quantize_reports_the_accuracy_change_and_exports(tiny, calibration, workdir):  # noqa: F811
    out = str(workdir / "tiny_int8.rjit")
    proc = relayjit("compile", tiny, "--quantize", "int8", "--calibration", calibration,
                    "--calibrate-mode", "percentile", "-o", out, "-q", cwd=workdir)
    assert "accuracy change on the 6 calibration samples (int8 vs float32)" in proc.stdout
    line = [ln for ln in proc.stdout.splitlines() if "output 0" in ln][0]
    assert "top-1 agreement" in line and "max |diff|" in line
    agreement = float(line.rsplit("agreement ", 1)[1].rstrip("%"))
    assert agreement >= 50.0
    run = relayjit("run", out, "--input", f"x={calibration}/sample_0.npy", cwd=workdir)
    assert "output 0: shape=(1, 10)" in run.stdout


@pytest.mark.parametrize("args, message", [
    (["--quantize", "int8"], "--quantize int8 needs --calibration DIR"),
    (["--calibration", "."], "--calibration is for --quantize int8"),
    (["--quantize", "int8", "--calibration", "nowhere"], "not a directory of .npy/.npz"),
])
def test_quantize_errors(tiny, workdir, args, message):  # noqa: F811
    proc = relayjit("compile", tiny, *args, "-o", str(workdir / "x.rjit"), cwd=workdir, code=2)
    assert message in proc.stderr and proc.stderr.count("\n") == 1
