"""Run all nine light models and print one line per model (the slow exhaustive run)."""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compiler.model_zoo import LIGHT_MODELS  # noqa: E402
from test_light_models import build_and_run  # noqa: E402


def main() -> int:
    failures = 0
    for name in LIGHT_MODELS:
        start = time.perf_counter()
        try:
            _, out, expected = build_and_run(name)
            ok = out.shape == expected.shape and np.allclose(out, expected, rtol=1e-3, atol=1e-7)
            detail = f"max abs err {np.max(np.abs(out - expected)):.3g}"
        except Exception as err:  # report every model, then fail
            ok, detail = False, f"{type(err).__name__}: {err}"[:200]
        failures += not ok
        print(f"{name:14s} {'ok  ' if ok else 'FAIL'} {time.perf_counter() - start:6.1f} s  {detail}",
              flush=True)
    print(f"{len(LIGHT_MODELS) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
