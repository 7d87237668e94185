"""A fuzzing campaign: generate, run, classify, shrink new failures, summarise.

ONNX cases and Relay programs interleave (one Relay program per `relay_every` cases). A new
failure is shrunk (ONNX: node deletion, shrink.py; Relay: fewer steps, fewer passes) and its
minimal repro saved under <out>/repros; failures whose minimal repro has the same signature
(status, exception type, op types) count once as a bug. The summary goes to
<out>/summary.json and <out>/summary.txt.
"""
from __future__ import annotations

import json
import re
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path

from .generate import generate, validate
from .oracle import FAILURES, PASS
from .runner import Worker
from .shrink import failing_output, one_line, save_repro, shrink


def _error_types(result: dict) -> tuple:
    types = {e.get("error_type") for e in result.get("engines", {}).values()
             if e.get("status") in FAILURES and e.get("error_type")}
    if result.get("error_type"):
        types.add(result["error_type"])
    return tuple(sorted(t for t in types if t))


def _levels(result: dict) -> tuple:
    return tuple(sorted(k for k, e in result.get("engines", {}).items()
                        if k.startswith("relayjit") and e.get("status") in FAILURES))


def same_failure(want: dict, got: dict) -> bool:
    if got.get("status") != want.get("status"):
        return False
    return _error_types(got) == _error_types(want)


class Campaign:
    """State of one campaign; `run(minutes)` fills `summary()`."""

    def __init__(self, seed: int = 0, out: Path | str = "fuzz-out", shrink_budget: float = 45.0,
                 relay_every: int = 4, timeout: float = 60.0, log=print):
        self.seed = seed
        self.out = Path(out)
        self.shrink_budget = shrink_budget
        self.relay_every = relay_every
        self.log = log
        self.worker = Worker(timeout=timeout)
        self.onnx_status: Counter = Counter()
        self.relay_status: Counter = Counter()
        self.ops: Counter = Counter()
        self.ops_passed: Counter = Counter()
        self.opsets: Counter = Counter()
        self.dtypes: Counter = Counter()
        self.unsupported: Counter = Counter()
        self.engines: dict = defaultdict(Counter)  # relayjit engine -> its statuses
        self.ort: Counter = Counter()
        self.ort_disagreements: list = []
        self.failures: list = []
        self.bugs: dict = {}
        self.generator_errors: list = []
        self.elapsed = 0.0
        self.shrink_time = 0.0

    # -- one case ---------------------------------------------------------------------------
    def onnx_case(self, seed: int) -> dict:
        try:
            case = generate(seed)
            validate(case)
        except Exception as err:  # noqa: BLE001 - a fuzzer bug, recorded and reported
            self.generator_errors.append({"seed": seed, "error": f"{type(err).__name__}: {err}",
                                          "traceback": traceback.format_exc()[-1500:]})
            self.onnx_status["generator_error"] += 1
            return {"status": "generator_error"}
        result = self.worker.run_onnx(case.model, case.feeds)
        status = result["status"]
        self.onnx_status[status] += 1
        self.opsets[case.opset] += 1
        for v in case.model.graph.input:
            self.dtypes[onnx_dtype(v)] += 1
        kinds = set(case.ops)
        self.ops.update(kinds)
        if status == PASS:
            self.ops_passed.update(kinds)
        elif status == "unsupported":
            self.unsupported[_short(result.get("detail", ""))] += 1
        for engine, outcome in result.get("engines", {}).items():
            if engine.startswith("relayjit"):
                self.engines[engine][outcome["status"]] += 1
                if outcome["status"] == "unsupported" and status == PASS:
                    self.unsupported[f"{engine}: {_short(outcome.get('detail', ''))}"] += 1
        ort = result.get("engines", {}).get("onnxruntime", {})
        self.ort[ort.get("status", "not run")] += 1
        if ort.get("status") == "disagrees" and len(self.ort_disagreements) < 50:
            self.ort_disagreements.append({"seed": seed, "detail": ort.get("detail", "")[:300]})
        if status in FAILURES:
            self._onnx_failure(seed, case, result)
        return result

    def _onnx_failure(self, seed: int, case, result: dict) -> None:
        entry = {"kind": "onnx", "seed": seed, "status": result["status"],
                 "detail": result.get("detail", "")[:600], "levels": _levels(result),
                 "errors": _error_types(result)}
        pre = quick_key(result, case.model)
        known = [b for b in self.bugs.values() if b.get("pre") == pre]
        if known:
            known[0]["seeds"].append(seed)
            entry["bug"] = known[0]["id"]
            self.failures.append(entry)
            return
        start = time.perf_counter()

        def fails(model, feeds) -> bool:
            return same_failure(result, self.worker.run_onnx(model, feeds))

        try:
            small, feeds, tries = shrink(case.model, case.feeds, fails, self.shrink_budget,
                                         failing_output(result.get("detail", "")))
        except Exception as err:  # noqa: BLE001 - keep the unshrunk case then
            self.log(f"  shrinking seed {seed} failed: {type(err).__name__}: {err}")
            small, feeds, tries = case.model, case.feeds, 0
        self.shrink_time += time.perf_counter() - start
        final = self.worker.run_onnx(small, feeds)
        if not same_failure(result, final):  # flaky? keep the original
            small, feeds, final = case.model, case.feeds, result
        ops = tuple(n.op_type for n in small.graph.node)
        sig = (final["status"], _error_types(final), tuple(sorted(set(ops))))
        bug = self.bugs.get(sig)
        if bug is None:
            stem = f"bug{len(self.bugs) + 1:02d}_{final['status']}_{'_'.join(ops)[:60]}"
            path = save_repro(self.out / "repros", stem, small, feeds, final,
                              {"seed": seed, "opset": case.opset, "shrink_tries": tries})
            bug = {"id": stem, "pre": quick_key(final, small), "signature": list(sig), "seeds": [],
                   "repro": str(path), "description": one_line(final, small),
                   "nodes_before": len(case.model.graph.node), "nodes_after": len(ops)}
            self.bugs[sig] = bug
            self.log(f"  new bug {stem}: {bug['description'][:300]}")
        bug["seeds"].append(seed)
        entry["bug"] = bug["id"]
        self.failures.append(entry)

    def relay_case(self, seed: int) -> dict:
        result = self.worker.run_relay(seed)
        status = result["status"]
        self.relay_status[status] += 1
        if status == "unsupported":
            self.unsupported["relay: " + _short(result.get("detail", ""))] += 1
        if status in FAILURES:
            self._relay_failure(seed, result)
        return result

    def _relay_failure(self, seed: int, result: dict) -> None:
        start = time.perf_counter()
        steps, pipeline, level = result.get("steps"), result.get("pipeline"), \
            result.get("build_opt_level")
        deadline = time.perf_counter() + self.shrink_budget
        if isinstance(steps, int):
            for k in range(1, steps):
                if time.perf_counter() > deadline:
                    break
                if same_failure(result, self.worker.run_relay(seed, k, pipeline, level)):
                    steps = k
                    break
        i = 0
        while pipeline and i < len(pipeline) and time.perf_counter() < deadline:
            fewer = pipeline[:i] + pipeline[i + 1:]
            if same_failure(result, self.worker.run_relay(seed, steps, fewer, level)):
                pipeline = fewer
            else:
                i += 1
        final = self.worker.run_relay(seed, steps, pipeline, level)
        self.shrink_time += time.perf_counter() - start
        if not same_failure(result, final):
            final = result
        sig = ("relay", final["status"], _error_types(final), tuple(pipeline or ()))
        bug = self.bugs.get(sig)
        if bug is None:
            stem = f"bug{len(self.bugs) + 1:02d}_relay_{final['status']}"
            directory = self.out / "repros"
            directory.mkdir(parents=True, exist_ok=True)
            line = (f"{final['status']}: relay seed {seed}, steps {steps}, pipeline {pipeline}, "
                    f"build opt_level {level}: {final.get('detail', '')[:400]}")
            (directory / f"{stem}.txt").write_text(line + "\n")
            (directory / f"{stem}.json").write_text(json.dumps(
                {**final, "seed": seed, "steps": steps, "pipeline": pipeline, "level": level},
                indent=1, default=str))
            bug = {"id": stem, "signature": list(sig), "seeds": [], "description": line,
                   "repro": str(directory / f"{stem}.txt"),
                   "relay": {"seed": seed, "steps": steps, "pipeline": pipeline, "level": level}}
            self.bugs[sig] = bug
            self.log(f"  new bug {stem}: {line[:300]}")
        bug["seeds"].append(seed)
        self.failures.append({"kind": "relay", "seed": seed, "status": final["status"],
                              "detail": final.get("detail", "")[:600], "bug": bug["id"]})

    # -- the loop ---------------------------------------------------------------------------
    def run(self, minutes: float) -> dict:
        start = time.perf_counter()
        deadline = start + minutes * 60
        i = 0
        try:
            while time.perf_counter() < deadline:
                seed = self.seed + i
                if self.relay_every and i % self.relay_every == self.relay_every - 1:
                    result = self.relay_case(seed)
                    kind = "relay"
                else:
                    result = self.onnx_case(seed)
                    kind = "onnx"
                if result["status"] not in (PASS, "unsupported"):
                    self.log(f"seed {seed} ({kind}): {result['status']}: "
                             f"{_short(result.get('detail', ''), 200)}")
                i += 1
        finally:
            self.worker.close()
            self.elapsed = time.perf_counter() - start
        return self.summary()

    def summary(self) -> dict:
        onnx_runs = sum(v for k, v in self.onnx_status.items() if k != "generator_error")
        fails = Counter(f["status"] for f in self.failures)
        return {
            "seed": self.seed, "seconds": round(self.elapsed, 1),
            "shrink_seconds": round(self.shrink_time, 1),
            "graphs_run": onnx_runs, "relay_programs_run": sum(self.relay_status.values()),
            "onnx": dict(self.onnx_status), "relay": dict(self.relay_status),
            "engines": {k: dict(v) for k, v in sorted(self.engines.items())},
            "passes": self.onnx_status[PASS] + self.relay_status[PASS],
            "unsupported": self.onnx_status["unsupported"] + self.relay_status["unsupported"],
            "mismatches": fails["mismatch"], "crashes": fails["crash"], "hangs": fails["hang"],
            "rejected": fails["rejected"],
            "ops_covered": len(self.ops), "ops": dict(self.ops.most_common()),
            "ops_never_passed": sorted(set(self.ops) - set(self.ops_passed)),
            "opsets": dict(sorted(self.opsets.items())), "input_dtypes": dict(self.dtypes),
            "onnxruntime": dict(self.ort), "ort_disagreements": self.ort_disagreements,
            "unsupported_reasons": dict(self.unsupported.most_common(20)),
            "generator_errors": self.generator_errors[:20],
            "bugs": [{k: v for k, v in b.items() if k != "pre"} for b in self.bugs.values()],
            "failures": self.failures,
        }


def quick_key(result: dict, model) -> tuple:
    """(status, exception types, culprit op): the op a compiler error names ("node 'x' (Op)"),
    or the op producing the first differing output. Failures with a known key are not
    shrunk again."""
    detail = result.get("detail", "")
    match = re.search(r"node '[^']*' \((\w+)\)", detail)
    culprit = match.group(1) if match else None
    if culprit is None:
        name = failing_output(detail)
        culprit = next((n.op_type for n in model.graph.node if name in n.output), None)
    return result["status"], _error_types(result), culprit


def onnx_dtype(info) -> str:
    from onnx import helper
    return helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type).name


def _short(text: str, limit: int = 160) -> str:
    return " ".join(text.split())[:limit]


def render(summary: dict) -> str:
    """The text summary."""
    lines = [
        f"relayjit differential fuzzing: seed {summary['seed']}, {summary['seconds']} s "
        f"({summary['shrink_seconds']} s shrinking)",
        f"ONNX graphs run       {summary['graphs_run']:6d}   {summary['onnx']}",
        f"Relay programs run    {summary['relay_programs_run']:6d}   {summary['relay']}",
        f"passes                {summary['passes']:6d}",
        f"unsupported           {summary['unsupported']:6d}",
        f"mismatches            {summary['mismatches']:6d}",
        f"crashes               {summary['crashes']:6d}",
        f"hangs                 {summary['hangs']:6d}",
        f"rejected (valid model refused without an 'unsupported' reason) {summary['rejected']}",
        f"ops covered           {summary['ops_covered']:6d}   opsets {summary['opsets']}",
        f"input dtypes          {summary['input_dtypes']}",
        f"onnxruntime           {summary['onnxruntime']} (disagreements are the reference's win)",
        f"ops never seen passing: {', '.join(summary['ops_never_passed']) or '-'}",
        "", f"bugs ({len(summary['bugs'])} distinct):"]
    for bug in summary["bugs"]:
        lines.append(f"  {bug['id']}  seeds {bug['seeds'][:8]}{'...' if len(bug['seeds']) > 8 else ''}")
        lines.append(f"    {bug['description'][:500]}")
        lines.append(f"    repro: {bug['repro']}")
    if summary["unsupported_reasons"]:
        lines += ["", "unsupported, by reason:"]
        lines += [f"  {n:4d}  {r}" for r, n in summary["unsupported_reasons"].items()]
    if summary["generator_errors"]:
        lines += ["", f"generator errors ({len(summary['generator_errors'])}):"]
        lines += [f"  seed {g['seed']}: {g['error'][:200]}" for g in summary["generator_errors"]]
    lines += ["", "ops: " + ", ".join(f"{k} {v}" for k, v in summary["ops"].items())]
    return "\n".join(lines) + "\n"
