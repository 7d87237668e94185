"""A kernel set to object files: in this process, or shared among forked compile jobs.

Job k compiles share k (shares) to its own object, machine code included, so every LLVM stage
runs in parallel (codegen.compile_jobs forks and reaps the jobs). Each share holds the kernels
that call a common micro-kernel together, so every micro-kernel is compiled and emitted once.
The first object also holds the kernels' signature table (runtime.library.SIGNATURE_SYMBOL).
"""
from __future__ import annotations

import os
from typing import NamedTuple

import llvmlite.binding as llvm

from runtime.library import signature_table_ir
from runtime.target import TargetInfo

from .compile_jobs import (auto_compile_jobs, collect, fork_jobs, measure_busy_cores,
                           requested_compile_jobs, split_work)
from .compile_stats import CompileStats, note, record_compile_stats, recording, timed
from .kernel_families import Family
from .microkernel_objects import (MICROKERNEL_CALL, Microkernel, check_calls,
                                  find_microkernels, keep_microkernels)
from .optimise import Unit, compile_units, lead, optimised_kernels
from .options import CodegenOptions
from .tir.stmt import PrimFunc
from .tir.structural import kernel_text


class Share(NamedTuple):
    """What one compile job turns into one object file: kernels (and kernel families), and
    the micro-kernels they call (compiled by the same job when no cache has them)."""

    units: list[Unit]
    microkernels: list[str]

    def kernels(self) -> list[PrimFunc]:
        """The kernels the share's object defines (a family's members one by one)."""
        return [f for u in self.units
                for f in (u.members if isinstance(u, Family) else (u,))]


def _compile_share(share: Share, table: list[PrimFunc] | None, opt_level: int,
                   cpu: TargetInfo) -> tuple[bytes, bytes, dict[str, Microkernel]]:
    """One object file: the share's kernels optimised (their calls checked against the
    micro-kernels they call) and the signature table of the kernels `table` when given:
    (object code, the optimised bitcode it was emitted from, the micro-kernels compiled here,
    found in no cache)."""
    mod, tm = optimised_kernels(share.units, opt_level, cpu)
    compiled: dict[str, Microkernel] = {}
    check_calls(mod, find_microkernels(share.microkernels, cpu, compiled))
    if table is not None:
        with timed("link"):
            mod.link_in(_signature_table(table, tm))
    with timed("cache_write"):
        bitcode = mod.as_bitcode()
    with timed("machine_code"):
        obj = tm.emit_object(mod)
    return obj, bitcode, compiled


def compile_objects(funcs: list[PrimFunc], opt_level: int, jobs: int | None,
                    options: CodegenOptions) -> list[tuple[bytes, bytes]]:
    """The kernels compiled for options.cpu to object files, [(object code, bitcode)], the
    first with the signature table: one object, or one per compile job (jobs None:
    $RELAYJIT_COMPILE_JOBS, else auto_compile_jobs, asked only when the set has kernels
    enough to split).

    The parent does the first share itself; each forked child sends back its object, bitcode
    and the micro-kernels it compiled (after the seconds it spent, for
    CompileStats.jobs_seconds). A child that fails in any way is redone in the parent: same
    result, only slower. The micro-kernels' objects are not among these (codegen.jit's
    compile_primfuncs adds them).
    """
    stats = recording()
    if len(funcs) >= 2 * PARALLEL_MIN_KERNELS and opt_level > 0 and hasattr(os, "fork"):
        if jobs is None:
            jobs = requested_compile_jobs()
        if jobs is None:  # auto
            busy = measure_busy_cores()
            jobs = auto_compile_jobs(busy=busy)
            if stats is not None:
                stats.add(CompileStats(busy_cores=busy))
        jobs = min(jobs, len(funcs) // PARALLEL_MIN_KERNELS)
    else:
        jobs = 1
    with timed("digest"):
        units = compile_units(funcs, options.kernel_families)
        parts = shares(units, jobs)
    families = [u for u in units if isinstance(u, Family)]
    note(families=len(families), family_members=sum(len(f.members) for f in families))
    if stats is not None:
        stats.jobs = max(stats.jobs, len(parts))
    with timed("jobs_wait"):
        children = fork_jobs(_compile_forked, [(share, opt_level, options.cpu)
                                               for share in parts[1:]])
    try:
        obj, bitcode, compiled = _compile_share(parts[0], funcs, opt_level, options.cpu)
    finally:
        with timed("jobs_wait"):
            replies = [collect(child) for child in children]
    objects = [(obj, bitcode)]
    for child, (blobs, seconds) in zip(children, replies):
        if blobs is not None and len(blobs) >= 2 and (len(blobs) - 2) % 4 == 0:
            note(jobs_seconds=seconds)
            objects.append((blobs[0], blobs[1]))
            compiled.update((blobs[i].decode(), Microkernel(blobs[i + 1], blobs[i + 2],
                                                            blobs[i + 3].decode()))
                            for i in range(2, len(blobs), 4))
        else:  # the child failed: redo its share here
            share = child.share[0]
            obj, bitcode, more = _compile_share(share, None, opt_level, options.cpu)
            objects.append((obj, bitcode))
            compiled.update(more)
    keep_microkernels(compiled, options.cpu)
    return objects


def _compile_forked(work: tuple[Share, int, TargetInfo]) -> tuple[float, list[bytes]]:
    """A forked job's share: (seconds spent, [object, bitcode, then each micro-kernel it
    compiled as name, object, bitcode, signature])."""
    share, opt_level, cpu = work
    with record_compile_stats() as spent:
        obj, bitcode, compiled = _compile_share(share, None, opt_level, cpu)
    blobs = [obj, bitcode]
    for name, kernel in compiled.items():
        blobs += [name.encode(), kernel.object, kernel.bitcode, kernel.signature.encode()]
    return spent.llvm_seconds(), blobs


PARALLEL_MIN_KERNELS = 8  # fewer kernels per process than this: not worth a fork
# Estimated LLVM cost of a kernel in characters of its kernel_text: a fixed part plus its
# text, about 4 us a character on the Zen 4 VM (ResNet-50/DenseNet-121: 70 ms for a pooling
# kernel of 5k characters, 180 ms for a Winograd conv of 31k); a micro-kernel about 10k.
_KERNEL_COST, _MICROKERNEL_COST = 12_000, 10_000
_MEMBER_COST = 500  # a family member's wrapper


def shares(units: list[Unit], jobs: int) -> list[Share]:
    """The compile units in at most `jobs` shares of about equal estimated cost (split_work),
    each in library order; units that call a common micro-kernel share a share, so every
    micro-kernel is compiled and emitted once."""
    texts = [kernel_text(lead(u)) for u in units]
    calls = [list(dict.fromkeys(MICROKERNEL_CALL.findall(text))) for text in texts]
    if jobs < 2:
        return [Share(list(units), list(dict.fromkeys(n for names in calls for n in names)))]
    costs = [_KERNEL_COST + len(text) + _MEMBER_COST * len(getattr(u, "members", ()))
             for u, text in zip(units, texts)]
    return [Share([units[k] for k in share],
                  list(dict.fromkeys(n for k in share for n in calls[k])))
            for share in split_work(costs, calls, _MICROKERNEL_COST, jobs)]


def _signature_table(funcs: list[PrimFunc], tm: llvm.TargetMachine) -> llvm.ModuleRef:
    """A module defining the kernels' signature table (runtime.library.SIGNATURE_SYMBOL), in
    kernel order (by position, so a cached module renamed for other kernels keeps a valid
    table). It travels inside the object code, so a module file's graph is checked against
    what its machine code was built for, not against another editable section. A symbolic
    kernel's (codegen.symbolic) dims may be polynomials in its symbols."""
    mod = llvm.parse_assembly(signature_table_ir(
        (f.attrs.get("symbolic_signature") or tuple((b.shape, b.dtype) for b in f.params)
         for f in funcs),
        (dict(f.attrs.get("in_place", ())) for f in funcs)))
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    return mod
