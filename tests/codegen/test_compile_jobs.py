"""How many compile jobs: $RELAYJIT_COMPILE_JOBS, and auto's estimate of the busy cores."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from codegen import compile_jobs as cj

# /proc/stat as Linux writes it: the total line, then one line per CPU (ticks: user nice
# system idle iowait irq softirq steal guest guest_nice)
STAT = """cpu  {u0_plus_u1} 0 0 0 0 0 0 0 0 0
cpu0 {u0} 1 2 1000 5 3 4 6 50 0
cpu1 {u1} 0 0 2000 0 0 0 0 0 0
intr 12345
"""
TICK = 1 / os.sysconf("SC_CLK_TCK")  # seconds per clock tick


def _stat(u0: int, u1: int) -> str:
    return STAT.format(u0=u0, u1=u1, u0_plus_u1=u0 + u1)


@pytest.mark.parametrize("value", ["0", "-2", "abc", "1.5"])
def test_bad_compile_jobs_is_an_error_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv(cj.JOBS_ENV, value)
    with pytest.raises(ValueError, match="RELAYJIT_COMPILE_JOBS") as info:
        cj.compile_jobs()
    assert repr(value) in str(info.value)


def test_compile_jobs_default_is_auto(monkeypatch):
    monkeypatch.delenv(cj.JOBS_ENV, raising=False)
    assert cj.requested_compile_jobs() is None and cj.compile_jobs() >= 1
    monkeypatch.setenv(cj.JOBS_ENV, " Auto ")
    assert cj.requested_compile_jobs() is None
    monkeypatch.setattr(cj, "measure_busy_cores", lambda: 0.0)
    assert cj.compile_jobs() == cj.auto_compile_jobs() == cj.available_cores()
    monkeypatch.setenv(cj.JOBS_ENV, "3")
    assert cj.compile_jobs() == 3


@pytest.mark.parametrize("cores, busy, jobs", [
    (2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 1.0, 1), (2, 5.0, 1), (8, 3.2, 5), (1, 0.0, 1)])
def test_auto_compile_jobs_leaves_busy_cores_alone(cores, busy, jobs):
    assert cj.auto_compile_jobs(cores=cores, busy=busy) == jobs


def test_a_sample_counts_busy_ticks_on_this_process_cores_only():
    sample = cj.cpu_sample(_stat(100, 40), own=1.5, wall=7.0, cpus=[0, 1])
    # cpu0: user 100 + nice 1 + system 2 + irq 3 + softirq 4 + steal 6 (guest is in user,
    # idle and iowait are not busy); cpu1: user 40
    assert sample == cj.CpuSample(7.0, (116 + 40) * TICK, 1.5)
    assert cj.cpu_sample(_stat(100, 40), own=0.0, wall=0.0, cpus=[1]).busy == pytest.approx(
        40 * TICK)
    assert cj.cpu_sample("intr 1\n", own=0.0, wall=0.0, cpus=[0]) is None  # no CPU lines
    assert cj.cpu_sample("cpu0 12 x 3\n", own=0.0, wall=0.0, cpus=[0]) is None


@pytest.mark.parametrize("busy, own, seconds, cores", [
    (0.0, 0.0, 1.0, 0.0),          # idle
    (1.0, 0.0, 1.0, 1.0),          # another process kept one core busy
    (1.0, 1.0, 1.0, 0.0),          # the busy core was this process
    (1.5, 0.5, 1.0, 1.0),          # both: only the others' share counts
    (0.25, 0.0, 0.5, 0.5),         # per second of wall time
    (0.1, 0.5, 1.0, 0.0),          # own time counted a tick late: never below 0
])
def test_busy_cores_are_others_busy_time_per_second(busy, own, seconds, cores):
    start = cj.CpuSample(10.0, 0.5, 2.0)
    end = cj.CpuSample(10.0 + seconds, 0.5 + busy, 2.0 + own)
    assert cj.busy_cores_between(start, end) == pytest.approx(cores)


def test_samples_from_injected_stat_texts_give_the_busy_cores():
    hz_ticks = round(1 / TICK)  # ticks in one second
    start = cj.cpu_sample(_stat(1000, 500), own=3.0, wall=100.0, cpus=[0, 1])
    end = cj.cpu_sample(_stat(1000 + hz_ticks, 500 + hz_ticks // 2), own=3.5, wall=101.0,
                        cpus=[0, 1])
    # 1.5 busy core-seconds in one second, 0.5 of them this process's: one core elsewhere
    assert cj.busy_cores_between(start, end) == pytest.approx(1.0)
    assert cj.auto_compile_jobs(cores=2, busy=cj.busy_cores_between(start, end)) == 1


@pytest.mark.parametrize("load, own, busy", [(0.4, 0.0, 0.4), (1.3, 0.9, 0.4), (0.2, 0.9, 0.0)])
def test_load_average_fallback_subtracts_this_process(load, own, busy):
    assert cj.load_average_busy(load=load, own=own) == pytest.approx(busy)


def test_without_proc_stat_the_load_average_decides(monkeypatch):
    monkeypatch.setattr(cj, "cpu_sample", lambda *a, **k: None)
    monkeypatch.setattr(cj, "load_average_busy", lambda: 1.7)
    assert cj.measure_busy_cores() == 1.7


@pytest.mark.skipif(cj.cpu_sample() is None, reason="needs /proc/stat (Linux)")
def test_a_process_spinning_on_a_core_leaves_one_job_for_two_cores(monkeypatch):
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # let it start spinning
        monkeypatch.setattr(cj, "_window_start", None)
        cj.note_compile_request()  # the window opens now...
        time.sleep(0.6)
        busy = cj.measure_busy_cores()  # ...and closes here
    finally:
        spinner.kill()
        spinner.wait()
    assert busy >= 0.7
    assert cj.auto_compile_jobs(cores=2, busy=busy) == 1


@pytest.mark.skipif(cj.cpu_sample() is None, reason="needs /proc/stat (Linux)")
def test_this_process_own_work_does_not_count_as_busy(monkeypatch):
    monkeypatch.setattr(cj, "_window_start", None)
    cj.note_compile_request()
    start = cj._window_start
    spun = time.process_time() + 0.5
    while time.process_time() < spun:  # this process keeps a core busy for 0.5 CPU seconds
        pass
    busy = cj.measure_busy_cores()
    end = cj._window_start
    assert end.own - start.own >= 0.45  # the samples see the loop's CPU time...
    seconds = end.wall - start.wall
    assert busy * seconds <= (end.busy - start.busy) - 0.45  # ...and leave it out


def test_a_short_window_is_sampled_on_the_spot(monkeypatch):
    samples = iter([cj.CpuSample(5.0, 1.0, 0.0), cj.CpuSample(5.1, 1.05, 0.0)])
    slept = []
    monkeypatch.setattr(cj, "cpu_sample", lambda: next(samples))
    monkeypatch.setattr(cj.time, "sleep", slept.append)
    monkeypatch.setattr(cj, "_window_start", cj.CpuSample(4.95, 0.0, 0.0))  # opened 50 ms ago
    assert cj.measure_busy_cores() == pytest.approx(0.5)
    assert slept == [cj.SHORT_WINDOW] and cj._window_start == cj.CpuSample(5.1, 1.05, 0.0)


def test_split_work_keeps_items_sharing_a_thing_together_and_balances_cost():
    costs = [5, 1, 1, 3, 2, 2, 6]
    shared = [["a"], ["a"], ["b"], [], ["b", "c"], ["c"], []]
    shares = cj.split_work(costs, shared, 1, 2)
    # groups: {0, 1} (a) cost 6+1, {2, 4, 5} (b, c) cost 5+2, {6} 6, {3} 3: largest first
    # to the cheapest share: 7 | 7, then 6 to the first, 3 to the second (13 | 10)
    assert shares == [[0, 1, 6], [2, 3, 4, 5]]
    for share in shares:  # each thing is needed by one share only
        others = [k for k in range(len(costs)) if k not in share]
        assert not {n for k in share for n in shared[k]} & {n for k in others for n in shared[k]}
    assert cj.split_work(costs, shared, 1, 1) == [list(range(7))]
    assert cj.split_work([1, 1], [["x"], ["x"]], 0, 4) == [[0, 1]]  # one group: one share
    assert cj.split_work([], [], 0, 2) == []
