"""The executable's bytes: what Executable.save writes and load_exec reads (untrusted input).

Layout (integers little-endian):
    b"RJITVMEX"  uint32 format version (1)
    2 sections, each uint64 byte length + bytes:
        program JSON (UTF-8): {"functions": [{"name", "params", "param_types", "registers",
                                              "code": [[opcode name, field, ...], ...]}],
                               "kernels": [[name, kind, inputs, outputs], ...],
                               "shape_programs": [ShapeProgram.to_dict(), ...]}
        constants: a params blob (runtime.params layout) naming them "0", "1", ...
    32-byte SHA-256 of everything before it

Decoding only parses: the fields come back as Python values of the right kinds (or a
ValueError saying which is malformed), and Executable's constructor then validates the
program as a whole (runtime.vm.validate) before anything can run.

The single-file export (write_file / read_file) is a relayjit module file (runtime.export)
whose metadata says "executor": "vm": section 0 holds these bytes, the object files section
the kernels' object code; it is loaded with the same checks as a graph module (checksum,
triple, CPU features, object-code sanity, signature table) before the program is validated.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct

from ..export import read_module, write_sections
from ..library import KernelLibrary
from ..params import load_param_dict, save_param_dict
from ..shape_program import ShapeProgram, ShapeProgramFormatError
from .bytecode import FIELDS, NAMES, OPCODES
from .program import TENSOR, TUPLE, ANY, KernelEntry, VMFunction

MAGIC = b"RJITVMEX"
VERSION = 1
_DIGEST = 32
MAX_ITEMS = 1 << 24  # functions, instructions, registers, kernels: far above any real program


def encode(functions, constants, kernels, shape_programs) -> bytes:
    """The bytes of a program (see the module docstring)."""
    program = {
        "functions": [{"name": f.name, "params": list(f.params),
                       "param_types": [_type_json(t) for t in f.param_types],
                       "registers": f.num_registers,
                       "code": [_instruction_json(inst) for inst in f.code]}
                      for f in functions],
        "kernels": [[k.name, k.kind, k.num_inputs, k.num_outputs] for k in kernels],
        "shape_programs": [p.to_dict() for p in shape_programs],
    }
    sections = [json.dumps(program, separators=(",", ":")).encode("utf-8"),
                save_param_dict({str(i): c for i, c in enumerate(constants)})]
    body = MAGIC + struct.pack("<I", VERSION)
    body += b"".join(struct.pack("<Q", len(s)) + s for s in sections)
    return body + hashlib.sha256(body).digest()


def decode(code: bytes | bytearray | memoryview) -> tuple[list, list, list, list]:
    """(functions, constants, kernels, shape programs) of program bytes; ValueError naming
    what is malformed."""
    if not isinstance(code, (bytes, bytearray, memoryview)):
        raise TypeError(f"load_exec: code must be bytes, got {type(code).__name__}")
    data = bytes(code)
    try:
        program, blob = _sections(data)
        program = json.loads(program.decode("utf-8"))
        if not isinstance(program, dict):
            raise ValueError("the program section is not a JSON object")
        functions = [_function(f, i) for i, f in enumerate(_list(program, "functions"))]
        kernels = [_kernel(k, i) for i, k in enumerate(_list(program, "kernels"))]
        shape_programs = [_shape_program(p, i)
                          for i, p in enumerate(_list(program, "shape_programs"))]
        params = load_param_dict(blob)
        if list(params) != [str(i) for i in range(len(params))]:
            raise ValueError("constants must be named 0, 1, ... in order")
        constants = [params[str(i)]._view() for i in range(len(params))]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError) as err:
        raise ValueError(f"not a loadable VM executable: {err}") from None
    return functions, constants, kernels, list(shape_programs)


def write_file(path: str | os.PathLike, code: bytes, lib: KernelLibrary | None) -> None:
    """The single-file export of (code, lib): a relayjit module file with executor "vm"."""
    write_sections(path, code, b"", lib, "vm", {"executor": "vm"})


def _sections(data: bytes) -> tuple[bytes, bytes]:
    header = len(MAGIC) + 4
    if data[:len(MAGIC)] != MAGIC:
        raise ValueError(f"bad magic {data[:len(MAGIC)]!r}, expected {MAGIC!r}")
    if len(data) < header + _DIGEST:
        raise ValueError(f"truncated: {len(data)} bytes")
    (version,) = struct.unpack_from("<I", data, len(MAGIC))
    if version != VERSION:
        raise ValueError(f"format version {version}, this runtime reads version {VERSION}")
    body, digest = data[:-_DIGEST], data[-_DIGEST:]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("checksum mismatch: the code is corrupted")
    pos, sections = header, []
    for i in range(2):
        if pos + 8 > len(body):
            raise ValueError(f"truncated: section {i} length missing")
        (n,) = struct.unpack_from("<Q", body, pos)
        pos += 8
        if pos + n > len(body):
            raise ValueError(f"truncated: section {i} needs {n} bytes, {len(body) - pos} remain")
        sections.append(body[pos:pos + n])
        pos += n
    if pos != len(body):
        raise ValueError(f"{len(body) - pos} unexpected bytes after the last section")
    return sections[0], sections[1]


# ---- JSON forms --------------------------------------------------------------------------

def _type_json(ty: tuple) -> list:
    if ty[0] == TENSOR:
        return [TENSOR, [d if d is None else int(d) for d in ty[1]], ty[2]]
    if ty[0] == TUPLE:
        return [TUPLE, [_type_json(f) for f in ty[1]]]
    return [ANY]


def _instruction_json(inst: tuple) -> list:
    return [NAMES[inst[0]], *(list(v) if isinstance(v, tuple) else v for v in inst[1:])]


def _list(obj: dict, key: str) -> list:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, list):
        raise ValueError(f"{key!r} must be a list, got {type(value).__name__}")
    if len(value) > MAX_ITEMS:
        raise ValueError(f"{key!r} has {len(value)} entries, more than {MAX_ITEMS}")
    return value


def _int(value, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} must be an integer, got {value!r:.60}")
    return value


def _str(value, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {value!r:.60}")
    return value


def _function(obj, index: int) -> VMFunction:
    where = f"function {index}"
    if not isinstance(obj, dict):
        raise ValueError(f"{where} must be a JSON object, got {type(obj).__name__}")
    name = _str(obj.get("name"), f"{where} name")
    where = f"function {name!r}"
    params = tuple(_str(p, f"{where} parameter name") for p in _list(obj, "params"))
    types = tuple(_param_type(t, f"{where} parameter type") for t in _list(obj, "param_types"))
    registers = _int(obj.get("registers"), f"{where} register count")
    code = tuple(_instruction(inst, f"{where} instruction {pc}")
                 for pc, inst in enumerate(_list(obj, "code")))
    return VMFunction(name, params, types, registers, code)


def _param_type(obj, what: str, depth: int = 0) -> tuple:
    if depth > 32 or not isinstance(obj, list) or not obj:
        raise ValueError(f"{what}: expected [\"tensor\", dims, dtype], [\"tuple\", fields] or "
                         f"[\"any\"], got {obj!r:.60}")
    if obj[0] == TENSOR and len(obj) == 3 and isinstance(obj[1], list):
        dims = tuple(d if d is None else _int(d, f"{what} dim") for d in obj[1])
        return (TENSOR, dims, _str(obj[2], f"{what} dtype"))
    if obj[0] == TUPLE and len(obj) == 2 and isinstance(obj[1], list):
        return (TUPLE, tuple(_param_type(f, what, depth + 1) for f in obj[1]))
    if obj == [ANY]:
        return (ANY,)
    raise ValueError(f"{what}: expected [\"tensor\", dims, dtype], [\"tuple\", fields] or "
                     f"[\"any\"], got {obj!r:.60}")


def _instruction(obj, where: str) -> tuple:
    if not isinstance(obj, list) or not obj or obj[0] not in OPCODES:
        raise ValueError(f"{where}: expected [opcode, fields...] with an opcode of "
                         f"{sorted(OPCODES)}, got {obj!r:.60}")
    code = OPCODES[obj[0]]
    kinds = FIELDS[code]
    if len(obj) != len(kinds) + 1:
        raise ValueError(f"{where} ({obj[0]}): expected {len(kinds)} fields {list(kinds)}, "
                         f"got {len(obj) - 1}")
    fields = []
    for kind, value in zip(kinds, obj[1:]):
        what = f"{where} ({obj[0]}) field {kind}"
        if kind in ("regs", "ints"):
            if not isinstance(value, list) or len(value) > MAX_ITEMS:
                raise ValueError(f"{what} must be a list of integers, got {value!r:.60}")
            fields.append(tuple(_int(v, what) for v in value))
        elif kind in ("dtype", "message"):
            fields.append(_str(value, what))
        else:
            fields.append(_int(value, what))
    return (code, *fields)


def _shape_program(obj, index: int) -> ShapeProgram:
    try:
        return ShapeProgram.from_dict(obj)
    except ShapeProgramFormatError as err:
        raise ValueError(f"shape program {index}: {err}") from None


def _kernel(obj, index: int) -> KernelEntry:
    what = f"kernel {index}"
    if not isinstance(obj, list) or len(obj) != 4:
        raise ValueError(f"{what}: expected [name, kind, inputs, outputs], got {obj!r:.60}")
    return KernelEntry(_str(obj[0], f"{what} name"), _str(obj[1], f"{what} kind"),
                       _int(obj[2], f"{what} input count"), _int(obj[3], f"{what} output count"))


def read_file(path: str | os.PathLike, contents=None) -> tuple[bytes, KernelLibrary | None]:
    """(code, lib) of a single-file export (checked as any module file is)."""
    contents = contents if contents is not None else read_module(path)
    if contents.meta.get("executor") != "vm":
        raise ValueError(f"{os.fspath(path)}: a graph module, not a VM executable")
    lib = None
    if contents.objects:
        lib = KernelLibrary(contents.objects, contents.meta["function_names"],
                            target=contents.target)
        if lib.signatures is None:
            raise ValueError("its object code has no kernel signature table")
    return contents.code, lib

