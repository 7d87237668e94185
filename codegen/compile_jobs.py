"""Compile jobs: how many processes compile one kernel set, and running work in forked ones.

How many: $RELAYJIT_COMPILE_JOBS, a count or "auto" (the default). Auto takes one job per
core this process may run on, less the cores other work keeps busy *now*: /proc/stat's busy
time on those cores over a recent window, minus this process's own CPU time in that window
(its forked jobs included once reaped). The window opens at the first compile request of a
build (codegen.jit.build_library calls note_compile_request; relay.build's FoldConstant
kernels come first, so the window spans the passes before the main kernel set) and closes
when the jobs are chosen; a window shorter than MIN_WINDOW is replaced by a SHORT_WINDOW
sample taken then. Why not the load average (the earlier estimate): it decays over a minute,
so builds run back to back saw the previous builds' load and chose one job on an idle machine.
Without /proc/stat the load average, less this process's estimated share of it, stands in.

Splitting: split_work deals the kernels out by estimated cost, keeping the kernels that call
a common micro-kernel together.

Running: llvmlite serialises every LLVM call behind one process-wide lock, so threads cannot
overlap LLVM work; forked children can. fork_jobs starts one child per share of work; each
sends back the seconds it spent and a list of byte blobs through a pipe; collect reaps it.
"""
from __future__ import annotations

import math
import os
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import llvmlite.binding as llvm

from runtime.thread_config import available_cores

__all__ = ["JOBS_ENV", "requested_compile_jobs", "compile_jobs", "auto_compile_jobs",
           "CpuSample", "cpu_sample", "busy_cores_between", "measure_busy_cores",
           "load_average_busy", "note_compile_request", "split_work", "fork_jobs",
           "collect"]

JOBS_ENV = "RELAYJIT_COMPILE_JOBS"


def requested_compile_jobs() -> int | None:
    """$RELAYJIT_COMPILE_JOBS as a count, None for "auto" (or unset).

    Anything but "auto" or a whole number >= 1 is a ValueError naming the variable, so a typo
    does not silently change the plan.
    """
    value = os.environ.get(JOBS_ENV, "").strip()
    if value == "" or value.lower() == "auto":
        return None
    try:
        jobs = int(value)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise ValueError(f"environment variable {JOBS_ENV} must be 'auto' or a whole number of "
                         f"compile processes >= 1, got {value!r}")
    return jobs


def compile_jobs() -> int:
    """Processes that compile one kernel set: the requested count, else auto_compile_jobs()."""
    requested = requested_compile_jobs()
    return requested if requested is not None else auto_compile_jobs()


def auto_compile_jobs(cores: int | None = None, busy: float | None = None) -> int:
    """One job per core this process may run on, less the cores other work keeps busy (`busy`,
    by default measure_busy_cores()); at least 1.

    Measured on the 2-core VM (cold ResNet-50, opt_level 3): extra jobs pay on idle cores
    and cost when another process keeps a core busy, so a core more than half busy counts
    as taken.
    """
    if cores is None:
        cores = available_cores()
    if busy is None:
        busy = measure_busy_cores()
    return max(1, cores - round(busy))


# ---- how busy the cores are: /proc/stat over a window ---------------------------------------

MIN_WINDOW = 0.25   # seconds: shorter windows hold too few clock ticks (10 ms each) to trust
SHORT_WINDOW = 0.1  # seconds sampled on the spot when no window is open long enough
MAX_AGE = 10.0      # seconds: an older window start is replaced at the next compile request
_PROC_STAT = "/proc/stat"
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (guest is in user)


class CpuSample(NamedTuple):
    """One reading: wall clock, busy CPU seconds summed over this process's cores, and CPU
    seconds this process (and its reaped children) used."""

    wall: float
    busy: float
    own: float


def cpu_sample(stat: str | None = None, own: float | None = None, wall: float | None = None,
               cpus: Sequence[int] | None = None) -> CpuSample | None:
    """A CpuSample now (the arguments inject /proc/stat's text, own CPU seconds, the wall
    clock and the cores counted, for tests); None where /proc/stat is missing or unreadable."""
    if stat is None:
        try:
            with open(_PROC_STAT) as f:
                stat = f.read()
        except OSError:
            return None
    if cpus is None:
        try:
            cpus = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = range(os.cpu_count() or 1)
    wanted = {f"cpu{c}" for c in cpus}
    ticks, found = 0, 0
    for line in stat.splitlines():
        parts = line.split()
        if not parts or parts[0] not in wanted:
            continue
        try:
            values = [int(v) for v in parts[1:]]
            ticks += sum(values[i] for i in _BUSY_FIELDS if i < len(values))
        except ValueError:
            return None
        found += 1
    if found == 0:
        return None
    if own is None:
        t = os.times()
        own = t.user + t.system + t.children_user + t.children_system
    return CpuSample(time.monotonic() if wall is None else wall,
                     ticks / os.sysconf("SC_CLK_TCK"), own)


def busy_cores_between(start: CpuSample, end: CpuSample) -> float:
    """Cores other work kept busy from start to end: busy CPU seconds less our own, per second
    of wall time (>= 0)."""
    seconds = end.wall - start.wall
    if seconds <= 0:
        return 0.0
    return max(0.0, ((end.busy - start.busy) - (end.own - start.own)) / seconds)


def load_average_busy(load: float | None = None, own: float | None = None) -> float:
    """Busy cores from the 1-minute load average (`load`) less this process's own part (`own`,
    by default from its CPU time: a process busy for the last t seconds adds 1 - exp(-t/60)).
    The fallback where /proc/stat is missing: it lags by a minute."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # no load average on this platform
            load = 0.0
    if own is None:
        t = os.times()
        own = 1.0 - math.exp(-(t.user + t.system + t.children_user + t.children_system) / 60.0)
    return max(0.0, load - own)


_window_lock = threading.Lock()
_window_start: CpuSample | None = None


def note_compile_request() -> None:
    """Open the observation window unless one opened less than MAX_AGE seconds ago."""
    global _window_start
    now = cpu_sample()
    if now is None:
        return
    with _window_lock:
        if _window_start is None or now.wall - _window_start.wall > MAX_AGE:
            _window_start = now


def measure_busy_cores() -> float:
    """Cores other work keeps busy, over the window since the last note_compile_request or
    measurement (or SHORT_WINDOW sampled now); the load-average estimate without /proc/stat.
    The window closes here and the next one opens."""
    global _window_start
    end = cpu_sample()
    if end is None:
        return load_average_busy()
    with _window_lock:
        start = _window_start
    if start is None or end.wall - start.wall < MIN_WINDOW:
        time.sleep(SHORT_WINDOW)
        start, end = end, cpu_sample() or end
    with _window_lock:
        _window_start = end
    return busy_cores_between(start, end)


# ---- splitting the work ---------------------------------------------------------------------

def split_work(costs: Sequence[int], shared: Sequence[Sequence[str]], shared_cost: int,
               jobs: int) -> list[list[int]]:
    """Items (by index) in at most `jobs` shares of about equal cost, each share in index
    order, empty shares dropped. Item k costs costs[k] and needs the things named in
    shared[k] (micro-kernels), each costing shared_cost once per share that needs it: items
    needing a common thing go to one share, so nothing is made twice. The groups so formed
    are dealt largest first, each to the cheapest share so far."""
    group = list(range(len(costs)))  # union-find over items

    def root(k: int) -> int:
        while group[k] != k:
            group[k] = group[group[k]]
            k = group[k]
        return k

    first_user: dict[str, int] = {}
    for k, names in enumerate(shared):
        for name in names:
            group[root(k)] = root(first_user.setdefault(name, k))
    members: dict[int, list[int]] = {}
    for k in range(len(costs)):
        members.setdefault(root(k), []).append(k)
    cost = {g: sum(costs[k] for k in ks) + shared_cost * len({n for k in ks for n in shared[k]})
            for g, ks in members.items()}
    shares: list[list[int]] = [[] for _ in range(max(1, jobs))]
    load = [0] * len(shares)
    for g in sorted(members, key=lambda g: (-cost[g], g)):
        cheapest = load.index(min(load))
        shares[cheapest] += members[g]
        load[cheapest] += cost[g]
    return [sorted(share) for share in shares if share]


# ---- running shares of work in forked children -----------------------------------------------

# a child's message: seconds spent, then each blob after its length
_SECONDS = struct.Struct("<d")
_LENGTH = struct.Struct("<Q")


class ForkedJob(NamedTuple):
    """A child working on `share` (pid and read_fd None when no pipe could be made)."""

    pid: int | None
    read_fd: int | None
    share: object


def fork_jobs(work: Callable[[object], tuple[float, Sequence[bytes]]],
              shares: Sequence[object]) -> list[ForkedJob]:
    """One forked child per share running work(share) -> (seconds spent, blobs)."""
    jobs = []
    ffi_lock = getattr(getattr(llvm.ffi, "lib", None), "_lock", None)
    for share in shares:
        try:
            read_fd, write_fd = os.pipe()
        except OSError:
            jobs.append(ForkedJob(None, None, share))
            continue
        # no other thread may be inside LLVM while we fork (the child would inherit its lock)
        with ffi_lock if ffi_lock is not None else _NoLock():
            pid = os.fork()
        if pid == 0:  # child: do the work, send seconds + blobs, never return
            status = 1
            try:
                os.close(read_fd)
                seconds, blobs = work(share)
                with os.fdopen(write_fd, "wb") as out:
                    out.write(_SECONDS.pack(seconds))
                    for blob in blobs:
                        out.write(_LENGTH.pack(len(blob)))
                        out.write(blob)
                status = 0
            finally:
                os._exit(status)
        os.close(write_fd)
        jobs.append(ForkedJob(pid, read_fd, share))
    return jobs


def collect(job: ForkedJob) -> tuple[list[bytes] | None, float]:
    """(blobs, seconds) the child sent (blobs None if it failed in any way); reaps it."""
    if job.pid is None:
        return None, 0.0
    chunks = []
    try:
        with os.fdopen(job.read_fd, "rb") as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        _, status = os.waitpid(job.pid, 0)
    data = b"".join(chunks)
    if status != 0 or len(data) < _SECONDS.size:
        return None, 0.0
    blobs, at = [], _SECONDS.size
    while at + _LENGTH.size <= len(data):
        (n,) = _LENGTH.unpack_from(data, at)
        at += _LENGTH.size
        blobs.append(data[at:at + n])
        at += n
    if at != len(data):
        return None, 0.0
    return blobs, _SECONDS.unpack_from(data)[0]


class _NoLock:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
