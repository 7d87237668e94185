"""The parent side: a worker subprocess that survives crashes and hangs of the code under test.

A case that kills the worker (segfault, abort) is a "crash" with the tail of the worker's
stderr (faulthandler's traceback); a case that does not answer within the timeout is a
"hang" and the worker is killed. Either way the next case gets a fresh worker.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

from .oracle import LEVELS
from .worker import RESULT_PREFIX, STAGE_PREFIX

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """`python -m tests.fuzz.worker`, restarted whenever it dies or hangs."""

    def __init__(self, timeout: float = 60.0, env: dict | None = None):
        self.timeout = timeout
        self.tmp = tempfile.TemporaryDirectory(prefix="relayjit-fuzz-")
        self.env = {**os.environ, **(env or {})}
        # the compile cache goes to our temporary directory unless the caller chose one
        self.env.setdefault("RELAYJIT_CACHE_DIR", str(Path(self.tmp.name) / "cache"))
        self.env.setdefault("PYTHONFAULTHANDLER", "1")
        self.proc: subprocess.Popen | None = None
        self.log = None
        self.restarts = 0

    # -- process --------------------------------------------------------------------------
    def _start(self) -> None:
        self.log = tempfile.TemporaryFile(mode="w+b")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.worker"], cwd=ROOT, env=self.env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, bufsize=0)

    def _stderr_tail(self, limit: int = 4000) -> str:
        if self.log is None:
            return ""
        self.log.seek(0, os.SEEK_END)
        size = self.log.tell()
        self.log.seek(max(0, size - limit))
        return self.log.read().decode(errors="replace")

    def _kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
        self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None

    def close(self) -> None:
        self._kill()
        self.tmp.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- requests -------------------------------------------------------------------------
    def request(self, payload: dict, timeout: float | None = None) -> dict:
        """Send one request; a dead or silent worker becomes a crash / hang result."""
        if self.proc is None or self.proc.poll() is not None:
            self._kill()
            self._start()
        timeout = self.timeout if timeout is None else timeout
        start = time.perf_counter()
        try:
            self.proc.stdin.write((json.dumps(payload) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._died(start)
        buf = b""
        self.stage = None
        while True:
            left = timeout - (time.perf_counter() - start)
            if left <= 0:
                tail = self._stderr_tail()
                self._kill()
                self.restarts += 1
                return {"status": "hang", "stage": self.stage,
                        "detail": f"no answer within {timeout:.0f} s (in {self.stage})",
                        "stderr": tail, "time": time.perf_counter() - start}
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                return self._died(start)
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                text = line.decode(errors="replace")
                if text.startswith(STAGE_PREFIX):
                    self.stage = text[len(STAGE_PREFIX):]
                elif text.startswith(RESULT_PREFIX):
                    return json.loads(text[len(RESULT_PREFIX):])

    def _died(self, start: float) -> dict:
        code = self.proc.wait() if self.proc else None
        tail = self._stderr_tail()
        self._kill()
        self.restarts += 1
        return {"status": "crash", "stage": self.stage,
                "detail": f"worker died (exit code {code}) in {self.stage}",
                "stderr": tail, "time": time.perf_counter() - start}

    def run_onnx(self, model: onnx.ModelProto, feeds: dict, levels=LEVELS, ort: bool = True,
                 timeout: float | None = None) -> dict:
        """One case; a crash or hang inside an oracle (not relayjit) is retried without
        onnxruntime, or reported as "oracle_crash"."""
        path = Path(self.tmp.name)
        onnx.save(model, path / "case.onnx")
        np.savez(path / "case.npz", **feeds)
        request = {"kind": "onnx", "model": str(path / "case.onnx"),
                   "feeds": str(path / "case.npz"), "levels": list(levels), "ort": ort}
        result = self.request(request, timeout)
        if result["status"] in ("crash", "hang") and result.get("stage") == "onnxruntime":
            again = self.request({**request, "ort": False}, timeout)
            again.setdefault("engines", {})["onnxruntime"] = {
                "status": "error", "detail": f"onnxruntime {result['status']}: "
                f"{result['detail']}"}
            return again
        if result["status"] in ("crash", "hang") and result.get("stage") == "reference":
            result["status"] = "oracle_crash"
        return result

    def run_relay(self, seed: int, steps: int | None = None, pipeline: list | None = None,
                  level: int | None = None, timeout: float | None = None) -> dict:
        return self.request({"kind": "relay", "seed": int(seed), "steps": steps,
                             "pipeline": pipeline, "level": level}, timeout)
