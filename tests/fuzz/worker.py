"""The worker process: runs cases for runner.Worker, one JSON request per stdin line.

    {"kind": "onnx", "model": path, "feeds": path.npz, "levels": [0, 3, "vm", ...], "ort": true}
    {"kind": "relay", "seed": 7, "steps": null, "pipeline": null, "level": null}
    {"kind": "ping"}
    {"kind": "selftest", "action": "sleep" | "segfault" | "raise"}   (the runner's own tests)

Each answer is one stdout line "@@fuzz-result <json>", after "@@fuzz-stage <engine>" lines
naming each engine as it starts (how the parent tells which engine killed the worker). Anything else a library prints goes
to stderr, so it cannot corrupt the protocol; a native crash leaves its faulthandler
traceback there for the parent to report.
"""
from __future__ import annotations

import faulthandler
import json
import os
import sys
import traceback

RESULT_PREFIX = "@@fuzz-result "
STAGE_PREFIX = "@@fuzz-stage "


def handle(request: dict, progress=lambda stage: None) -> dict:
    kind = request.get("kind")
    if kind == "ping":
        return {"status": "pong"}
    if kind == "selftest":
        action = request.get("action")
        if action == "sleep":
            import time
            time.sleep(float(request.get("seconds", 60)))
        elif action == "segfault":
            import ctypes
            ctypes.string_at(0)
        elif action == "raise":
            raise ValueError("selftest")
        return {"status": "pong"}
    if kind == "onnx":
        import numpy as np
        import onnx

        from .oracle import LEVELS, evaluate
        model = onnx.load(request["model"])
        with np.load(request["feeds"], allow_pickle=False) as data:
            feeds = {k: data[k] for k in data.files}
        return evaluate(model, feeds, tuple(request.get("levels", LEVELS)),
                        bool(request.get("ort", True)), progress)
    if kind == "relay":
        from .relay_fuzz import run_relay_case
        return run_relay_case(int(request["seed"]), request.get("steps"),
                              request.get("pipeline"), request.get("level"))
    raise ValueError(f"unknown request kind {kind!r}")


def main() -> None:
    faulthandler.enable()
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to stderr
    sys.stdout = sys.stderr

    def progress(stage: str) -> None:
        protocol.write(STAGE_PREFIX + stage + "\n")
        protocol.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            result = handle(json.loads(line), progress)
        except Exception as err:  # noqa: BLE001 - reported to the parent as a crash
            result = {"status": "crash", "detail": f"worker: {type(err).__name__}: {err}",
                      "traceback": traceback.format_exc()[-3000:]}
        protocol.write(RESULT_PREFIX + json.dumps(result, default=str) + "\n")
        protocol.flush()


if __name__ == "__main__":
    main()
