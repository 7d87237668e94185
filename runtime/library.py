"""KernelLibrary: native kernels loaded from object code into an MCJIT engine, callable by address.

Calling convention (fixed; codegen emits it): each kernel is `int32_t fn(void **args)`, where
`args` points to an array of buffer data pointers, inputs first, then outputs, and the
return value is 0 on success. Shapes and dtypes are baked into the kernel; a library records
them per kernel (its signatures) so the runtime checks every buffer it passes against what
the kernel was compiled for, whatever a graph file says. A symbolic kernel (a VM's, for
dynamic dims) reads its loop bounds from its symbols instead: args[n], after its n buffers,
points to their int64 values, and its signature gives dims as polynomials in them
(runtime.symbolic_signature checks the buffers against them before every call).
"""
from __future__ import annotations

import ctypes
import json
from collections.abc import Iterable, Sequence

import llvmlite.binding as llvm
import numpy as np

from .errors import KernelError
from .native import native_support
from .ndarray import NDArray
from .objfile import check_object_set, unresolved_symbols
from .symbolic_signature import check_dim
from .target import TargetInfo, host_info, host_target_machine, new_target_machine

__all__ = [
    "KernelLibrary", "Kernel", "KERNEL_FUNCTYPE", "SIGNATURE_SYMBOL", "Signature",
    "check_signatures", "check_in_place", "InPlace", "signature_table_ir", "status_message",
    "STATUS_OUT_OF_MEMORY", "STATUS_INDEX_OUT_OF_RANGE",
    "host_target_machine", "new_target_machine"
]

# int32_t fn(void **args): the raw pointer type the graph executor calls in its hot loop.
KERNEL_FUNCTYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)

# Nonzero statuses a kernel returns (codegen emits them; statuses combine by bitwise or).
STATUS_OUT_OF_MEMORY = 2  # heap scratch could not be allocated (nothing ran)
STATUS_INDEX_OUT_OF_RANGE = 4  # a gather/scatter index outside its axis (result discarded)
STATUS_MESSAGES = {
    STATUS_OUT_OF_MEMORY: "out of memory for its scratch buffers",
    STATUS_INDEX_OUT_OF_RANGE: "an index is out of range for the axis it indexes (valid: "
                               "-n <= index < n for an axis of length n)",
}


def status_message(status: int) -> str:
    """What a kernel's nonzero status says (its number too, when it has bits not ours)."""
    known = [msg for bit, msg in STATUS_MESSAGES.items() if status & bit]
    if status & ~sum(STATUS_MESSAGES):
        known.append(f"status {status}")
    return "; ".join(known)


# What a kernel takes: (shape, dtype name) per buffer argument, inputs then outputs. A
# symbolic kernel's dims may be polynomials in its symbols (runtime.symbolic_signature); it
# then takes one more argument, the symbols' int64 values.
Signature = tuple[tuple[tuple[int, ...], str], ...]
# Which arguments a kernel may be given in one buffer: {output argument: input argument}.
# Such a kernel reads that input element by element, each just before it writes the output
# element at the same index and never after, so the two can share storage (a fused residual
# add then writes its result over the residual, as onnxruntime's Conv+Sum does).
InPlace = dict[int, int]
# The object code's table of signatures (codegen.jit writes it): a NUL-terminated JSON list,
# one [[shape, dtype], ...] per kernel in the order of the library's function names; an
# output argument the kernel may write over one of its inputs is [shape, dtype, input index].
SIGNATURE_SYMBOL = "relayjit_signatures"


def signature_table_ir(signatures: Iterable[Signature],
                       in_place: Iterable[InPlace] | None = None) -> str:
    """LLVM IR defining SIGNATURE_SYMBOL for kernels taking these buffers, in order (with
    each kernel's InPlace pairs, when given)."""
    signatures = list(signatures)
    in_place = list(in_place) if in_place is not None else [{}] * len(signatures)
    table = json.dumps([[[list(shape), dtype] + ([pairs[i]] if i in pairs else [])
                         for i, (shape, dtype) in enumerate(sig)]
                        for sig, pairs in zip(signatures, in_place)],
                       separators=(",", ":")).encode() + b"\0"
    text = "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else f"\\{c:02X}"
                   for c in table)
    return f'@{SIGNATURE_SYMBOL} = constant [{len(table)} x i8] c"{text}"\n'


def check_signatures(value: object, names: Iterable[str]) -> dict[str, Signature]:
    """`value` (from a file: JSON-like lists) as {kernel name: Signature} covering every name;
    ValueError saying what is malformed."""
    if not isinstance(value, dict):
        raise ValueError(f"kernel signatures must be a mapping, got {type(value).__name__}")
    out: dict[str, Signature] = {}
    for name in names:
        if name not in value:
            raise ValueError(f"no signature for kernel {name!r}")
        sig = value[name]
        if not isinstance(sig, (list, tuple)):
            raise ValueError(f"signature of kernel {name!r} must be a list, got {sig!r:.60}")
        args = []
        for i, arg in enumerate(sig):
            ok = isinstance(arg, (list, tuple)) and len(arg) in (2, 3) \
                and isinstance(arg[0], (list, tuple)) and isinstance(arg[1], str)
            dims = [check_dim(d) for d in arg[0]] if ok else []
            if not ok or None in dims:
                raise ValueError(f"signature of kernel {name!r}, argument {i}: expected "
                                 f"[shape, dtype] or [shape, dtype, input index], got "
                                 f"{arg!r:.60}")
            args.append((tuple(dims), arg[1]))
        out[name] = tuple(args)
    return out


def check_in_place(value: dict, signatures: dict[str, Signature]) -> dict[str, InPlace]:
    """The InPlace pairs of the table `value` (check_signatures passed it): each names an
    earlier argument of the same shape and dtype; ValueError otherwise."""
    out: dict[str, InPlace] = {}
    for name, sig in signatures.items():
        pairs = {}
        for i, arg in enumerate(value[name]):
            if len(arg) < 3:
                continue
            j = arg[2]
            if not isinstance(j, int) or isinstance(j, bool) or not 0 <= j < i \
                    or sig[j] != sig[i]:
                raise ValueError(f"signature of kernel {name!r}, argument {i}: the input it "
                                 f"may share storage with must be an earlier argument of "
                                 f"its shape and dtype {sig[i]}, got {j!r:.20}")
            pairs[i] = j
        if pairs:
            out[name] = pairs
    return out


class Kernel:
    """One native kernel; calling it is a checked convenience, not the executor's fast path."""

    __slots__ = ("name", "address", "cfunc", "library")

    def __init__(self, name: str, address: int, library: KernelLibrary) -> None:
        self.name = name
        self.address = address
        self.cfunc = KERNEL_FUNCTYPE(address)
        self.library = library  # keeps the engine (and so the code) alive

    def __call__(self, *arrays: NDArray | np.ndarray) -> None:
        """Call with buffers (inputs then outputs); raise KernelError on a nonzero status."""
        ptrs = (ctypes.c_void_p * max(len(arrays), 1))()
        for i, arr in enumerate(arrays):
            ptrs[i] = _buffer_address(self.name, i, arr)
        status = self.cfunc(ptrs)
        if status != 0:
            raise KernelError(f"kernel {self.name!r} failed: {status_message(status)}")

    def __repr__(self) -> str:
        return f"Kernel({self.name!r} at {self.address:#x})"


def _buffer_address(kernel: str, index: int, arr: NDArray | np.ndarray) -> int:
    if isinstance(arr, NDArray):
        return arr.data_ptr
    if isinstance(arr, np.ndarray):
        if not arr.flags.c_contiguous or not arr.dtype.isnative:
            raise ValueError(
                f"kernel {kernel!r} argument {index}: expected a C-contiguous native-endian "
                f"array, got strides {arr.strides} dtype {arr.dtype}"
            )
        if not arr.flags.writeable:
            raise ValueError(f"kernel {kernel!r} argument {index}: array is read-only")
        return arr.ctypes.data
    raise TypeError(
        f"kernel {kernel!r} argument {index}: expected NDArray or numpy.ndarray, "
        f"got {type(arr).__name__}"
    )


class KernelLibrary:
    """Object code loaded once into an MCJIT engine; kernels are looked up by name.

    The code may come as several object files (codegen.jit emits one per compile job): they
    load into one engine, where a symbol one needs may be defined by a sibling, and the
    kernel signature table is defined by exactly one of them.
    """

    def __init__(
        self,
        objects: bytes | Sequence[bytes],
        function_names: Iterable[str],
        target: TargetInfo | None = None,
    ) -> None:
        if isinstance(objects, (bytes, bytearray)):
            objects = (objects,)
        if not isinstance(objects, (list, tuple)) or \
                not all(isinstance(o, (bytes, bytearray)) for o in objects):
            raise TypeError(f"objects must be bytes or a list of bytes (object files), got "
                            f"{type(objects).__name__}")
        names = list(function_names)
        for name in names:
            if not isinstance(name, str) or not name:
                raise TypeError(f"function names must be non-empty str, got {name!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate function names in {names}")
        self._objects = tuple(bytes(o) for o in objects)
        self._names = tuple(names)
        if target is not None and not isinstance(target, TargetInfo):
            raise TypeError(f"target must be the runtime.target.TargetInfo the code was "
                            f"compiled for, got {type(target).__name__}")
        # what the code was compiled for (hand-made libraries: the host)
        self.target = target if target is not None else host_info()
        # the params relay.build bound for this library's graph (set by its factory), so
        # graph_executor.create(graph_json, lib, dev) starts with them, as TVM's lib.lib does
        self.params: dict = {}
        self._engine = self._load_engine(self._objects)
        # from the object code's own table (compiled libraries have one); None only for
        # hand-made libraries, whose buffers cannot be checked
        table = self._signature_table()
        self.signatures = None if table is None else check_signatures(table, names)
        # {kernel: InPlace} for the kernels that may run in place
        self.in_place = {} if table is None else check_in_place(table, self.signatures)
        self._kernels: dict[str, Kernel] = {}
        missing = []
        for name in names:
            address = self._engine.get_function_address(name)
            if address == 0:
                missing.append(name)
            else:
                self._kernels[name] = Kernel(name, address, self)
        if missing:
            raise ValueError(f"object code does not define function(s) {missing}")

    def _load_engine(self, objects: tuple[bytes, ...]) -> llvm.ExecutionEngine:
        native_support()  # kernels' parallel loops call its pool: register it before loading
        tm = new_target_machine()  # owned by the engine from here on
        symbols = check_object_set(objects, tm.triple)
        if symbols is not None:
            absent = [n for n in self._names if n not in symbols.defined]
            if absent:
                raise ValueError(f"object code does not define function(s) {absent}")
        empty = llvm.parse_assembly("")
        empty.triple = tm.triple
        empty.data_layout = str(tm.target_data)
        # Creating the engine first makes the process's symbols (libm's expf, ...) resolvable.
        engine = llvm.create_mcjit_compiler(empty, tm)
        if symbols is not None:
            unresolved = unresolved_symbols(symbols)
            if unresolved:
                raise ValueError(f"object code calls symbols this process lacks: {unresolved}")
        self._object_files = [llvm.ObjectFileRef.from_data(o) for o in objects]
        for object_file in self._object_files:
            engine.add_object_file(object_file)
        engine.finalize_object()
        return engine

    def _signature_table(self) -> dict | None:
        address = self._engine.get_global_value_address(SIGNATURE_SYMBOL)
        if not address:
            return None
        try:
            table = json.loads(ctypes.string_at(address).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            raise ValueError(f"object code's kernel signature table is unreadable: {err}") \
                from None
        if not isinstance(table, list) or len(table) != len(self._names):
            raise ValueError(f"object code's kernel signature table does not list the "
                             f"{len(self._names)} kernels {list(self._names)}")
        return dict(zip(self._names, table))

    @property
    def function_names(self) -> tuple[str, ...]:
        """Names of the kernels this library exposes."""
        return self._names

    @property
    def objects(self) -> tuple[bytes, ...]:
        """The object files' bytes (what export_library stores)."""
        return self._objects

    def get_function(self, name: str) -> Kernel:
        """The kernel called `name`; KeyError lists the known names."""
        try:
            return self._kernels[name]
        except KeyError:
            raise KeyError(
                f"no kernel named {name!r} in library; known: {sorted(self._kernels)}"
            ) from None

    __getitem__ = get_function

    def get_source(self, fmt: str = "") -> str:
        """TVM's lib.get_source(): a relayjit library holds object code only (keeping every
        kernel's LLVM IR would double a build's memory), so this says where the text is."""
        raise NotImplementedError(
            f"get_source({fmt!r}): the library holds object code only; print the kernels' "
            "LLVM IR or assembly with `relayjit inspect MODEL --dump llvm|asm|tir`, or "
            "codegen.jit.get_llvm_ir / get_assembly on the functions "
            "compiler.driver.build.lower_module gives")

    def __contains__(self, name: object) -> bool:
        return name in self._kernels

    def __repr__(self) -> str:
        return (f"KernelLibrary({len(self._names)} kernels, {len(self._objects)} objects, "
                f"{sum(map(len, self._objects))} bytes)")
