"""GraphExecutor: storage pools, input bookkeeping and the kernel loop behind GraphModule.

Setup resolves everything once: one 64-byte-aligned pool per storage_id (all in one arena),
each entry a view into its pool (at its storage_offset), and per graph node a step: a native
function and a ctypes array of buffer addresses. `run` is one ctypes call into the runtime's
native run loop (native.ll), which calls every step's function in order with the GIL
released; `run_stepwise` does the same from Python, one call per node (for profiling and
debugging).
"""
from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .benchmark import BenchmarkResult, time_calls
from .device import Device
from .dtypes import numpy_dtype
from .errors import KernelError
from .graph_json import CONCAT, NOP, GraphPlan, OpNode, parse_graph
from .library import KERNEL_FUNCTYPE, KernelLibrary, status_message
from .memory import ALIGNMENT, aligned_bytes, check_memory, view_as
from .native import native_support
from .ndarray import NDArray

# One step of the run loop: raw function, its argument (an address), node name for errors.
Step = tuple[Callable[[int], int], int, str]


class GraphExecutor:
    """The runtime module a factory's `lib["default"](dev)` returns; GraphModule wraps it."""

    def __init__(self, graph_json: str, lib: KernelLibrary, device: Device,
                 shared_params: Mapping[str, np.ndarray] | None = None) -> None:
        """shared_params: arrays the graph reads in place instead of copies of them (see
        _shareable); their inputs count as set and may not be set again."""
        if not isinstance(lib, KernelLibrary):
            raise TypeError(f"lib must be a KernelLibrary, got {type(lib).__name__}")
        if not isinstance(device, Device):
            raise TypeError(f"device must be a runtime Device, got {type(device).__name__}")
        self.graph_json = graph_json
        self.lib = lib
        self.device = device
        self.plan: GraphPlan = parse_graph(graph_json)
        self.in_place = _in_place_pairs(self.plan, lib)
        _check_storage_plan(self.plan, self.in_place)
        self.input_index = {name: i for i, name in enumerate(self.plan.input_names)}
        shared = _shareable(self.plan, self.input_index, shared_params or {})
        self.entries: list[np.ndarray] = _allocate(self.plan, shared)
        self.input_set = [False] * len(self.plan.input_names)
        self.input_needed = _inputs_read(self.plan)
        self.shared_names = frozenset(name for name, _ in shared.values())
        self.param_names: set[str] = set(self.shared_names)
        for name in self.shared_names:
            self.input_set[self.input_index[name]] = True
        self._keepalive: list[Any] = [array for _, array in shared.values()]
        self.steps: list[Step] = [step for op in self.plan.ops for step in self._steps(op)]
        self._native = native_support()
        n = max(len(self.steps), 1)
        self._fns = (ctypes.c_void_p * n)(*(ctypes.cast(fn, ctypes.c_void_p).value
                                            for fn, _, _ in self.steps))
        self._args = (ctypes.c_void_p * n)(*(arg for _, arg, _ in self.steps))

    def _steps(self, op: OpNode) -> list[Step]:
        if op.func_name == NOP:
            return self._nop_steps(op)
        if op.func_name == CONCAT:
            return self._concat_steps(op)
        try:
            kernel = self.lib.get_function(op.func_name)
        except KeyError:
            raise ValueError(
                f"graph node {op.name!r} calls {op.func_name!r}, which the library lacks; "
                f"library has {list(self.lib.function_names)}"
            ) from None
        self._check_signature(op)
        addrs = [self.entries[e].ctypes.data for e in op.inputs + op.outputs]
        args = (ctypes.c_void_p * max(len(addrs), 1))(*addrs)
        self._keepalive.append(args)
        return [(kernel.cfunc, ctypes.addressof(args), op.name)]

    def _check_signature(self, op: OpNode) -> None:
        """The buffers the graph gives node `op` are exactly what its kernel was compiled for
        (a graph file could say anything), and none of its outputs shares an input's storage."""
        sigs = self.lib.signatures
        if sigs is None:
            return
        sig = sigs[op.func_name]
        entries = op.inputs + op.outputs
        if len(entries) != len(sig):
            raise ValueError(f"graph node {op.name!r}: kernel {op.func_name!r} takes {len(sig)} "
                             f"buffers, the graph gives it {len(entries)}")
        for i, (e, (shape, dtype)) in enumerate(zip(entries, sig)):
            got_shape, got_dtype = self.plan.shapes[e], self.plan.dtypes[e]
            if tuple(got_shape) != shape or got_dtype != dtype:
                raise ValueError(
                    f"graph node {op.name!r}: argument {i} of kernel {op.func_name!r} is "
                    f"{shape} {dtype}, the graph gives entry {e} as {tuple(got_shape)} "
                    f"{got_dtype}")
        spans = [(e, _byte_span(self.plan, e)) for e in op.inputs]
        for out in op.outputs:
            sid, lo, hi = _byte_span(self.plan, out)
            if any(s == sid and a < hi and lo < b and (e, out) not in self.in_place
                   for e, (s, a, b) in spans):
                raise ValueError(f"graph node {op.name!r}: an output overlaps an input in "
                                 f"storage {sid}, and its kernel does not run in place on "
                                 f"that input")

    def _nop_steps(self, op: OpNode) -> list[Step]:
        """A reshape-only node: shares its input's storage, or copies when the plan split them."""
        (src,), (dst,) = op.inputs, op.outputs
        a, b = self.entries[src], self.entries[dst]
        if a.nbytes != b.nbytes:
            raise ValueError(
                f"graph node {op.name!r} is __nop (reshape-only) but maps {a.shape} {a.dtype} "
                f"({a.nbytes} bytes) to {b.shape} {b.dtype} ({b.nbytes} bytes)"
            )
        if _byte_span(self.plan, src) == _byte_span(self.plan, dst):
            return []  # same pool, same bytes: the output already aliases the input
        return [self._copy_step(b, a, op.name)]

    def _concat_steps(self, op: OpNode) -> list[Step]:
        """A concatenation of byte runs (graph_json checked the shapes): inputs the plan laid
        out in place cost nothing, the others are copied to their place."""
        (dst,) = op.outputs
        sid, base, _ = _byte_span(self.plan, dst)
        out = self.entries[dst].reshape(-1).view(np.uint8)
        steps, at = [], 0
        for e in op.inputs:
            n = self.entries[e].nbytes
            if _byte_span(self.plan, e) != (sid, base + at, base + at + n):
                steps.append(self._copy_step(out[at:at + n], self.entries[e], op.name))
            at += n
        return steps

    def _copy_step(self, dst: np.ndarray, src: np.ndarray, name: str) -> Step:
        args = (ctypes.c_void_p * 3)(dst.ctypes.data, src.ctypes.data, src.nbytes)
        self._keepalive.append(args)
        copy = KERNEL_FUNCTYPE(native_support().copy_step_address)
        return (copy, ctypes.addressof(args), name)

    # ---- inputs -------------------------------------------------------------------------

    def resolve_input(self, key: int | str) -> int:
        """Input index for a name or index; KeyError / IndexError name what is known."""
        if isinstance(key, str):
            if key not in self.input_index:
                raise KeyError(
                    f"unknown input {key!r}; graph inputs are {list(self.plan.input_names)}"
                )
            return self.input_index[key]
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if not 0 <= key < len(self.plan.input_names):
                raise IndexError(
                    f"input index {key} out of range; graph has "
                    f"{len(self.plan.input_names)} inputs"
                )
            return int(key)
        raise TypeError(f"input key must be a name or an index, got {type(key).__name__}")

    def input_array(self, index: int) -> np.ndarray:
        """The live storage of input `index`."""
        return self.entries[self.plan.input_entries[index]]

    def set_input(self, key: int | str, value: Any) -> None:
        """Copy `value` into input `key`'s storage after checking shape and dtype exactly."""
        index = self.resolve_input(key)
        if self.plan.input_names[index] in self.shared_names:
            raise ValueError(f"input {self.plan.input_names[index]!r} is a param this executor "
                             "shares with others (read in place); it cannot be set")
        dst = self.input_array(index)
        value = check_input_value(self.plan.input_names[index], value, dst.shape, dst.dtype.name)
        np.copyto(dst, value)  # also handles non-contiguous and byte-swapped sources
        self.input_set[index] = True

    def load_params(self, params: Mapping[str, NDArray | np.ndarray]) -> None:
        """Copy params into their inputs' storage; names the graph does not use are skipped."""
        for name, value in params.items():
            if name in self.input_index:
                self.set_input(name, value)
                self.param_names.add(name)

    # ---- running ------------------------------------------------------------------------

    def check_inputs_set(self) -> None:
        """Raise naming every input the graph reads that was never given a value (an input
        nothing reads may stay unset, as in TVM)."""
        missing = [n for n, ok, needed in zip(self.plan.input_names, self.input_set,
                                              self.input_needed) if needed and not ok]
        if missing:
            raise ValueError(f"input(s) never set before run: {missing}")

    def run(self) -> None:
        """Call every kernel in order: one native call."""
        if not all(self.input_set):
            self.check_inputs_set()
        status = ctypes.c_int32(0)
        failed = self._native.run_steps(self._fns, self._args, len(self.steps), status)
        if failed:
            self._fail(failed - 1, status.value)

    def run_stepwise(self) -> None:
        """run(), one Python-level call per graph node (what a profiler times)."""
        if not all(self.input_set):
            self.check_inputs_set()
        for i, (fn, arg, _) in enumerate(self.steps):
            status = fn(arg)
            if status:
                self._fail(i, status)

    def run_step(self, index: int) -> None:
        """Call step `index` alone (the debug executor runs node by node); a nonzero status
        raises as in run(). Inputs are checked by the caller, once per run."""
        fn, arg, _ = self.steps[index]
        status = fn(arg)
        if status:
            self._fail(index, status)

    def time_steps(self, number: int) -> list[float]:
        """Each step's mean seconds over `number` back-to-back calls, steps in order (what the
        debug executor's profile repeats); a kernel's nonzero status raises as in run()."""
        if not all(self.input_set):
            self.check_inputs_set()
        times = []
        for i, (fn, arg, _) in enumerate(self.steps):
            start = time.perf_counter()
            for _ in range(number):
                status = fn(arg)
                if status:
                    self._fail(i, status)
            times.append((time.perf_counter() - start) / number)
        return times

    def time_evaluator(self, func_name: str, dev: Device, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, limit_zero_time_iterations: int = 100,
                       cooldown_interval_ms: float = 0, repeats_to_cooldown: int = 1,
                       f_preproc: str = "") -> Callable[[], BenchmarkResult]:
        """TVM's `module.module.time_evaluator("run", dev, number, repeat)`: a function that
        times run() (BenchmarkResult: .results, .mean). Cooldowns are accepted; rounds run
        back to back."""
        if func_name != "run":
            raise ValueError(f"time_evaluator: a graph module times 'run', got {func_name!r}")
        if f_preproc:
            raise ValueError(f"time_evaluator: f_preproc {f_preproc!r} is not supported")
        return lambda: time_calls(self.run, repeat, number, min_repeat_ms)

    def _fail(self, step: int, status: int) -> None:
        why = status_message(status)
        raise KernelError(f"kernel of graph node {self.steps[step][2]!r} returned a nonzero "
                          f"status: {why}")

    def output_array(self, index: int) -> np.ndarray:
        """The live storage of output `index`."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"output index must be an int, got {type(index).__name__}")
        n = len(self.plan.outputs)
        if not 0 <= index < n:
            raise IndexError(f"output index {index} out of range; graph has {n} outputs")
        return self.entries[self.plan.outputs[index]]


def _allocate(plan: GraphPlan, shared: dict[int, tuple[str, np.ndarray]]) -> list[np.ndarray]:
    """Entry views into one arena, except in the storages `shared` gives (storage id ->
    (param name, array)), which are those arrays' own bytes."""
    sizes = entry_sizes(plan)
    pool_bytes: dict[int, int] = {}
    for sid, offset, size in zip(plan.storage_ids, plan.storage_offsets, sizes):
        pool_bytes[sid] = max(pool_bytes.get(sid, 0), offset + size)
    own = {sid: n for sid, n in pool_bytes.items() if sid not in shared}
    check_memory(sum(own.values()),
                 f"the graph's storage ({len(own)} pools for {len(sizes)} tensors)")
    # one arena for all pools (aligned_bytes backs a large one with huge pages: a conv
    # reads a line from each of hundreds of channel planes, a 4 KB page apiece)
    starts, total = {}, 0
    for sid, n in own.items():
        starts[sid] = total
        total += -(-n // ALIGNMENT) * ALIGNMENT
    arena = aligned_bytes(total, huge_pages=True)
    pools = {sid: arena[at:at + own[sid]] for sid, at in starts.items()}
    pools.update((sid, array.reshape(-1).view(np.uint8)) for sid, (_, array) in shared.items())
    return [
        view_as(pools[sid][offset:], shape, numpy_dtype(dt))
        for sid, offset, shape, dt in zip(plan.storage_ids, plan.storage_offsets,
                                          plan.shapes, plan.dtypes)
    ]


def _shareable(plan: GraphPlan, input_index: dict[str, int],
               params: Mapping[str, np.ndarray]) -> dict[int, tuple[str, np.ndarray]]:
    """storage id -> (name, array) for each given param the graph can read in place: a graph
    input alone in its storage (no other input, no output, nothing any node writes there but
    reshape-only views of it), at offset 0, whose array is exactly its shape and dtype,
    C-contiguous and 64-byte aligned. Kernels never write such a storage, so executors of
    one model at several shapes can read one copy of the weights. Params that do not qualify
    are left out (the caller copies them)."""
    # kernel and concatenation outputs, and reshape-only outputs a copy fills
    written = {e for op in plan.ops for e in op.outputs
               if op.func_name != NOP or _byte_span(plan, e) != _byte_span(plan, op.inputs[0])}
    by_sid: dict[int, list[int]] = {}
    for e, sid in enumerate(plan.storage_ids):
        by_sid.setdefault(sid, []).append(e)
    inputs, outputs = set(plan.input_entries), set(plan.outputs)
    shared = {}
    for name, array in params.items():
        if name not in input_index or not isinstance(array, np.ndarray):
            continue
        e = plan.input_entries[input_index[name]]
        sid = plan.storage_ids[e]
        others = [x for x in by_sid[sid] if x != e]
        if (plan.storage_offsets[e] != 0 or array.shape != tuple(plan.shapes[e])
                or array.dtype.name != plan.dtypes[e] or not array.flags.c_contiguous
                or array.ctypes.data % ALIGNMENT or sid in shared
                or any(x in inputs for x in others)
                or any(x in outputs or x in written or _byte_span(plan, x)[2] > array.nbytes
                       for x in [e, *others])):
            continue
        shared[sid] = (name, array)
    return shared


def check_input_value(name: str, value: Any, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """`value` as an ndarray when it has exactly this shape and dtype; else the TypeError or
    ValueError set_input raises (the serving wrapper answers requests with the same words)."""
    if isinstance(value, NDArray):
        value = value._view()
    elif not isinstance(value, np.ndarray):
        raise TypeError(f"input {name!r}: expected numpy.ndarray or NDArray, got "
                        f"{type(value).__name__}")
    if value.shape != tuple(shape) or value.dtype.name != dtype:
        raise ValueError(f"input {name!r}: expected shape {tuple(shape)} dtype {dtype}, got "
                         f"shape {value.shape} dtype {value.dtype.name}")
    return value


def _inputs_read(plan: GraphPlan) -> list[bool]:
    """Per graph input: whether a kernel reads it or it is itself an output."""
    read = {e for op in plan.ops for e in op.inputs} | set(plan.outputs)
    return [e in read for e in plan.input_entries]


def entry_sizes(plan: GraphPlan) -> list[int]:
    """Bytes of each entry."""
    return [math.prod(shape) * numpy_dtype(dt).itemsize
            for shape, dt in zip(plan.shapes, plan.dtypes)]


def _byte_span(plan: GraphPlan, e: int) -> tuple[int, int, int]:
    """(storage id, first byte, end byte) of entry e."""
    start = plan.storage_offsets[e]
    return plan.storage_ids[e], start, start + math.prod(plan.shapes[e]) * \
        numpy_dtype(plan.dtypes[e]).itemsize


def _in_place_pairs(plan: GraphPlan, lib: KernelLibrary) -> set[tuple[int, int]]:
    """(input entry, output entry) pairs the plan puts in the same bytes where the node's
    kernel may run in place on them (KernelLibrary.in_place). The input must be an
    intermediate that no later node reads: graph inputs and params keep their values between
    runs, and a later reader would see the output instead."""
    last_read: dict[int, int] = {}
    for i, op in enumerate(plan.ops):
        for e in op.inputs:
            last_read[e] = i
    kept = set(plan.input_entries) | set(plan.outputs)
    pairs = set()
    for i, op in enumerate(plan.ops):
        for o, q in lib.in_place.get(op.func_name, {}).items():
            if not len(op.inputs) <= o < len(op.inputs) + len(op.outputs) or q >= len(op.inputs):
                continue  # not this node's input and output: _check_signature says so
            src, dst = op.inputs[q], op.outputs[o - len(op.inputs)]
            if _byte_span(plan, src) != _byte_span(plan, dst):
                continue
            if src in kept:
                why = "keeps its value between runs"
            elif last_read[src] != i:
                why = f"graph node {plan.ops[last_read[src]].name!r} reads later"
            elif op.inputs.count(src) > 1:
                why = "the node also reads as another argument"
            else:
                pairs.add((src, dst))
                continue
            raise ValueError(f"graph node {op.name!r} writes its output over its input "
                             f"entry {src}, which {why}")
    return pairs


def _check_storage_plan(plan: GraphPlan, in_place: set[tuple[int, int]] = frozenset()) -> None:
    """No two tensors alive at the same time share bytes (a graph file could say anything).

    A tensor lives from the node that writes it to the last node that reads it; graph inputs
    and params live through the whole run (they keep their values between runs), outputs to
    its end. A reshape (__nop) whose output has its input's bytes makes them one tensor; so
    does a __concat with each input laid out in place inside its output, and a kernel's
    output written over its last input (in_place, from _in_place_pairs).
    """
    n_ops, forever = len(plan.ops), len(plan.ops) + 1
    alias = list(range(len(plan.shapes)))  # entry -> the tensor it is (part of)

    def root(e: int) -> int:
        while alias[e] != e:
            e = alias[e]
        return e

    for src, dst in in_place:
        alias[root(dst)] = root(src)
    for op in plan.ops:
        if op.func_name == NOP and _byte_span(plan, op.inputs[0])[:2] == \
                _byte_span(plan, op.outputs[0])[:2]:  # same start (_nop_steps checks the size)
            alias[root(op.outputs[0])] = root(op.inputs[0])
        elif op.func_name == CONCAT:
            sid, at, _ = _byte_span(plan, op.outputs[0])
            for e in op.inputs:
                span = _byte_span(plan, e)
                if span == (sid, at, at + span[2] - span[1]) and root(e) != root(op.outputs[0]):
                    alias[root(e)] = root(op.outputs[0])
                at += span[2] - span[1]
    start = {e: -1 for e in plan.input_entries}
    end = {e: forever for e in (*plan.input_entries, *plan.outputs)}
    for i, op in enumerate(plan.ops):
        for e in op.outputs:
            start.setdefault(e, i)
        for e in op.inputs:
            end[e] = max(end.get(e, i), i)
    lives: dict[int, list[int]] = {}  # tensor -> [first, last]
    for e in range(len(plan.shapes)):
        first, last = start.get(e, n_ops), end.get(e, start.get(e, n_ops))
        span = lives.setdefault(root(e), [first, last])
        span[0], span[1] = min(span[0], first), max(span[1], last)
    by_sid: dict[int, list[tuple[int, int, int]]] = {}
    for t, (first, last) in lives.items():
        by_sid.setdefault(plan.storage_ids[t], []).append((first, last, t))
    for sid, tensors in by_sid.items():
        tensors.sort()
        active: list[tuple[int, int, int]] = []
        for first, last, t in tensors:
            active = [a for a in active if a[1] >= first]
            _, lo, hi = _byte_span(plan, t)
            for f0, l0, t0 in active:
                _, lo0, hi0 = _byte_span(plan, t0)
                if lo < hi0 and lo0 < hi:
                    raise ValueError(f"graph JSON: entries {t0} and {t} share bytes of storage "
                                     f"{sid} while both are alive (nodes {f0}..{l0} and "
                                     f"{first}..{last})")
            active.append((first, last, t))


def create_executor(graph_json: str, lib: KernelLibrary, device: Device) -> GraphExecutor:
    """Build a GraphExecutor (what `create` and factories hand to GraphModule)."""
    return GraphExecutor(graph_json, lib, device)
