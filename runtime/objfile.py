"""Sanity checks on object code before LLVM sees it: LLVM crashes on malformed objects and on
calls to symbols it could not resolve, so we reject those here with a ValueError.

A kernel library may hold several objects (one per compile job) loaded into one engine: a
symbol one of them needs is resolved when a sibling defines it, and a global two of them
define is an error (which definition a call reached would depend on load order)."""
from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

import llvmlite.binding as llvm

_ELF_MAGIC = b"\x7fELF"
_EM_X86_64 = 62
_EM_AARCH64 = 183
_SHT_SYMTAB = 2
_SHT_NOBITS = 8
_STB_WEAK = 2


class ObjectSymbols(NamedTuple):
    """Global symbols an object defines and the ones it needs from the process."""

    defined: frozenset[str]
    undefined: frozenset[str]


def check_object_code(data: bytes, machine: str) -> ObjectSymbols | None:
    """Validate `data` as an object file for the host; None when the format is not ELF-parsed."""
    if len(data) < 4:
        raise ValueError(f"object code is {len(data)} bytes: too short to be an object file")
    if data[:4] != _ELF_MAGIC:
        if machine.endswith("-linux-gnu") or "linux" in machine:
            raise ValueError(f"object code is not ELF (starts with {data[:4]!r})")
        return None  # Mach-O / COFF hosts: LLVM parses; we only check ELF in depth
    return _check_elf(data, machine)


def _check_elf(data: bytes, triple: str) -> ObjectSymbols:
    if len(data) < 64:
        raise ValueError(f"ELF object truncated: {len(data)} bytes, header needs 64")
    if data[4] != 2 or data[5] != 1:
        raise ValueError("ELF object is not 64-bit little-endian")
    e_machine = struct.unpack_from("<H", data, 18)[0]
    expected = _EM_AARCH64 if triple.startswith("aarch64") else _EM_X86_64
    if e_machine != expected:
        raise ValueError(f"ELF object is for machine {e_machine}, host {triple} needs {expected}")
    shoff, = struct.unpack_from("<Q", data, 40)
    shentsize, shnum = struct.unpack_from("<HH", data, 58)
    if shentsize != 64 or shoff + shnum * 64 > len(data):
        raise ValueError(
            f"ELF object truncated or corrupted: section table at {shoff} x {shnum} "
            f"does not fit in {len(data)} bytes"
        )
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + 64 * i) for i in range(shnum)]
    for i, (_n, sh_type, _f, _a, off, size, *_rest) in enumerate(sections):
        if sh_type != _SHT_NOBITS and off + size > len(data):
            raise ValueError(f"ELF object truncated or corrupted: section {i} ends past the file")
    defined: set[str] = set()
    undefined: set[str] = set()
    for _n, sh_type, _f, _a, off, size, link, _i, _al, entsize in sections:
        if sh_type != _SHT_SYMTAB:
            continue
        if entsize != 24 or link >= shnum:
            raise ValueError("ELF object corrupted: bad symbol table header")
        str_off, str_size = sections[link][4], sections[link][5]
        for k in range(size // 24):
            name_off, info, _other, shndx = struct.unpack_from("<IBBH", data, off + 24 * k)
            if info >> 4 == 0 or name_off == 0:  # local symbols are resolved inside the object
                continue
            if name_off >= str_size:
                raise ValueError("ELF object corrupted: symbol name outside the string table")
            end = data.find(b"\0", str_off + name_off, str_off + str_size)
            name = data[str_off + name_off : end].decode("utf-8", "replace")
            if shndx != 0:
                defined.add(name)
            elif info >> 4 != _STB_WEAK:
                undefined.add(name)
    return ObjectSymbols(frozenset(defined), frozenset(undefined))


def check_object_set(objects: Sequence[bytes], machine: str) -> ObjectSymbols | None:
    """check_object_code for each object, and their symbols as one: defined by any, undefined
    by some and defined by none; ValueError naming a global two objects define. None when an
    object's format is not ELF-parsed."""
    if not objects:
        raise ValueError("no object code: a kernel library needs at least one object file")
    found = [check_object_code(data, machine) for data in objects]
    if any(symbols is None for symbols in found):
        return None
    owner: dict[str, int] = {}
    for index, symbols in enumerate(found):
        for name in sorted(symbols.defined):
            if name in owner:
                raise ValueError(f"symbol {name!r} is defined by object {owner[name]} and by "
                                 f"object {index} of {len(objects)}: each must be defined once")
            owner[name] = index
    needed = frozenset().union(*(symbols.undefined for symbols in found))
    return ObjectSymbols(frozenset(owner), needed - owner.keys())


def unresolved_symbols(symbols: ObjectSymbols) -> list[str]:
    """Undefined symbols the process cannot supply (calling them would jump to address 0)."""
    return sorted(s for s in symbols.undefined if not llvm.address_of_symbol(s))
