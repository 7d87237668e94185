"""relay.build's timing report (factory.build_timing), its progress reports and compile jobs."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

from codegen import compile_objects, jit
from codegen.compile_stats import record_compile_stats
from compiler import relay
from compiler.driver.build import build_progress
from compiler.driver.build_timing import COMPILE_STAGE_NAMES
from compiler.transform import PassContext, PassTimingInstrument

from tests.schedule_helpers import host

PIPELINE = ["InferType", "SimplifyInference", "FakeQuantizationToInteger", "FoldScaleAxis",
            "AlterOpLayout", "PackConstantWeights", "ConvertBlockedLayout", "FoldConstant",
            "EliminateCommonSubexpr",
            "FoldTransposeIntoBatchMatmul", "FuseLayerNorm", "FuseConvMaxPool",
            "FuseOps", "InlineQuantizationScalars"]
NO_DISK = {"relayjit.disable_disk_cache": True}


def small_net() -> relay.Function:
    """conv2d + bias + relu, a reshape and a dense: three kernels, constants to fold."""
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(1, 3, 8, 8))
    w = relay.const(rng.standard_normal((4, 3, 3, 3)).astype("float32"))
    scale = relay.const(rng.standard_normal((4, 1, 1, 1)).astype("float32"))
    y = relay.nn.conv2d(x, relay.multiply(w, scale), padding=(1, 1), channels=4,
                        kernel_size=(3, 3))
    y = relay.nn.relu(relay.add(y, relay.const(np.float32(0.5))))
    y = relay.nn.batch_flatten(y)
    d = relay.const(rng.standard_normal((10, 256)).astype("float32"))
    return relay.Function([x], relay.nn.softmax(relay.nn.dense(y, d)))


@pytest.fixture
def cold():
    jit.clear_cache()
    yield
    jit.clear_cache()


def test_report_covers_every_stage_within_the_wall_time(cold):
    start = time.perf_counter()
    with PassContext(opt_level=3, config=NO_DISK):
        factory = relay.build(small_net())
    wall = time.perf_counter() - start
    timing = factory.build_timing
    names = [s.name for s in timing.stages]
    expected = (["bind params"] + [f"pass {p}" for p in PIPELINE]
                + ["lower fused functions to PrimFuncs"] + list(COMPILE_STAGE_NAMES.values())
                + ["graph codegen + memory planning"])
    for name in expected:
        assert name in names, (name, names)
    assert all(s.seconds >= 0 for s in timing.stages)
    assert sum(s.seconds for s in timing.stages) <= timing.wall <= wall
    assert timing.other >= 0 and timing.frontend is None and timing.total == timing.wall
    # the pipeline's passes in order; the InferType each pass requires counts towards it
    passes = [n[len("pass "):] for n in names if n.startswith("pass ")]
    assert passes == PIPELINE + ["InferType"]


def test_counts_match_the_library_and_the_cache_outcome(cold):
    with PassContext(opt_level=3, config=NO_DISK):
        first = relay.build(small_net())
        second = relay.build(small_net())
    kernels = len(first.get_lib().function_names)
    c = first.build_timing.counts
    assert c["kernels"] == kernels >= 3
    assert c["fused_functions"] == kernels + c["reshape_only"]
    assert (c["cache_misses"], c["cache_memory_hits"], c["kernels_compiled"]) == (1, 0, kernels)
    assert c["compile_jobs"] == 1  # too few kernels to fork
    c = second.build_timing.counts
    assert c["kernels"] == len(second.get_lib().function_names) == kernels
    assert (c["cache_misses"], c["cache_memory_hits"], c["kernels_compiled"]) == (0, 1, 0)


def test_table_and_plain_data_forms():
    with PassContext(opt_level=3):
        timing = relay.build(small_net()).build_timing
    table = timing.table()
    assert str(timing) == table
    for stage in timing.stages:
        assert stage.name in table
    assert "other (untimed)" in table and "total" in table and "compile cache" in table
    data = json.loads(json.dumps(timing.as_dict()))
    assert [s["name"] for s in data["stages"]] == [s.name for s in timing.stages]
    assert data["counts"] == timing.counts
    with_frontend = type(timing)(timing.stages, timing.wall, timing.counts, frontend=0.25)
    assert with_frontend.total == pytest.approx(timing.wall + 0.25)
    assert with_frontend.table().splitlines()[2].startswith("frontend (ONNX import)")


def test_callers_pass_timing_instrument_keeps_its_figures():
    """The build's own instrument must not re-enter (and so reset) the caller's instruments."""
    timing = PassTimingInstrument()
    with PassContext(opt_level=3, instruments=[timing]):
        relay.build(small_net())
        rendered = timing.render()
        profiles = timing.profiles()
    assert "FoldConstant" in rendered and "FuseOps" in rendered
    assert [p.name for p in profiles] == ["relay.build"]
    assert [p.name for p in profiles[0].children][-3:] == ["FuseOps", "InlineQuantizationScalars",
                                                           "InferType"]


def test_compile_stats_blocks_nest(cold):
    with record_compile_stats() as outer:
        with PassContext(opt_level=3, config=NO_DISK):
            factory = relay.build(small_net())
    counts = factory.build_timing.counts
    assert outer.kernel_sets == 1 + counts["constant_kernel_sets"]
    assert outer.misses >= 1 and outer.llvm_seconds() > 0


def test_progress_reports_stages_and_optionally_each_function():
    stages, detailed = [], []
    with PassContext(opt_level=3):
        with build_progress(stages.append, detail=False):
            relay.build(small_net())
        with build_progress(detailed.append):
            relay.build(small_net())
    total = len(PIPELINE) + 1
    assert stages[:total] == [f"optimising (pass {i + 1}/{total} {name})"
                              for i, name in enumerate(PIPELINE + ["InferType"])]
    assert stages[total].startswith("lowering ") and "kernels with LLVM" in stages[total + 1]
    assert stages[-1] == "planning memory" and len(stages) == total + 3
    assert any(m.startswith("lowering fused functions 1/") for m in detailed)
    assert [m for m in detailed if not m.startswith("lowering fused functions ")] == stages


@pytest.mark.parametrize("value", ["0", "-2", "abc", "1.5"])
def test_bad_compile_jobs_is_an_error_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("RELAYJIT_COMPILE_JOBS", value)
    with pytest.raises(ValueError, match="RELAYJIT_COMPILE_JOBS"):
        relay.build(small_net())  # cached kernels or not, the value is checked


def test_forked_compile_jobs_report_their_time(monkeypatch, cold):
    from codegen import te
    from codegen.lower import lower

    monkeypatch.setenv("RELAYJIT_CACHE_DIR", "")
    monkeypatch.setenv("RELAYJIT_COMPILE_JOBS", "2")
    a = te.placeholder((8, 8), "float32", "a")
    funcs = []
    for k in range(2 * compile_objects.PARALLEL_MIN_KERNELS):
        b = te.compute((8, 8), lambda i, j, k=k: a[i, j] + float(k), name="b")
        funcs.append(lower(f"timed_{k}", [a], [b]))
    with record_compile_stats() as stats:
        lib = jit.build_library(funcs, options=host())
    assert len(lib.function_names) == len(funcs)
    assert (stats.jobs, stats.misses, stats.kernels_compiled) == (2, 1, len(funcs))
    assert stats.jobs_seconds > 0 and stats.optimise > 0 and stats.machine_code > 0
    assert len(lib.objects) == 2  # each job emitted its own machine code


def test_auto_compile_jobs_note_the_busy_cores_they_saw(monkeypatch, cold):
    from codegen import te
    from codegen.lower import lower
    from compiler.driver.build_timing import TimingRecorder
    from runtime.thread_config import available_cores

    monkeypatch.setenv("RELAYJIT_CACHE_DIR", "")
    monkeypatch.delenv("RELAYJIT_COMPILE_JOBS", raising=False)
    monkeypatch.setattr(compile_objects, "measure_busy_cores", lambda: 1.2)
    a = te.placeholder((8, 8), "float32", "a")
    funcs = [lower(f"auto_{k}", [a], [te.compute((8, 8), lambda i, j, k=k: a[i, j] - float(k),
                                                 name="b")])
             for k in range(2 * compile_objects.PARALLEL_MIN_KERNELS)]
    with record_compile_stats() as stats:
        jit.build_library(funcs, options=host())
    assert stats.busy_cores == 1.2 and stats.jobs == max(1, available_cores() - 1)
    recorder = TimingRecorder()
    recorder.add_compile_stats(stats)
    note = next(s.note for s in recorder._stages if s.name == COMPILE_STAGE_NAMES["jobs_wait"])
    assert note.endswith("(auto: 1.2 cores busy elsewhere)")
