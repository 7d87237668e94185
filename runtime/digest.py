"""A digest of many large buffers: BLAKE3 (or SHA-256) pieces hashed on every core.

SHA-256 runs at about 1.6 GB/s per core on this machine kind (SHA-NI): VGG-19's 550 MB of
weights took 0.33 s to digest, more than the whole warm rebuild may take. BLAKE3 (the
`blake3` package, SIMD) digests the same in 0.09 s with the same 128-bit collision
resistance; without the package the pieces are SHA-256 and the result says so (ALGORITHM is
part of what is hashed, so the two never compare equal). hashlib and blake3 release the GIL
on large buffers, so the buffers are cut into pieces of at most CHUNK bytes, the pieces are
hashed on up to one thread per core, and the digest is the SHA-256 of the header and the
pieces' digests in order. Every byte and its position reach the result: each piece's digest
covers its bytes and length, and the pieces are cut and ordered by the buffers' sizes alone
(the same buffers always give the same pieces). Small buffers share a piece, so a model's
hundreds of biases cost one piece, not hundreds.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import struct
import threading
from collections.abc import Iterable

try:
    from blake3 import blake3 as _blake3
except ImportError:  # a dependency, but the runtime still works without it
    _blake3 = None

__all__ = ["content_digest", "algorithm", "CHUNK"]

CHUNK = 4 * 2**20  # bytes per piece: hundreds of pieces for a large model, little overhead
_MAX_THREADS = 8


def _threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, _MAX_THREADS))


def _pieces(buffers: Iterable[memoryview]) -> list[list[memoryview]]:
    """The buffers cut into pieces of at most CHUNK bytes; consecutive small buffers (or
    buffer tails) share a piece until it would exceed CHUNK."""
    pieces: list[list[memoryview]] = []
    current: list[memoryview] = []
    size = 0
    for buf in buffers:
        for start in range(0, max(len(buf), 1), CHUNK):
            part = buf[start:start + CHUNK]
            if current and size + len(part) > CHUNK:
                pieces.append(current)
                current, size = [], 0
            current.append(part)
            size += len(part)
    if current:
        pieces.append(current)
    return pieces


def algorithm() -> str:
    """What the pieces are hashed with: "blake3" when the package is there, else "sha256"."""
    return "sha256" if _blake3 is None else "blake3"


def _piece_digest(parts: list[memoryview]) -> bytes:
    h = hashlib.sha256() if _blake3 is None else _blake3()
    for part in parts:
        h.update(struct.pack("<Q", len(part)))
        h.update(part)
    return h.digest()


def _byte_view(buffer) -> memoryview:
    """`buffer`'s bytes as a flat view (an empty array's too: a view with a zero in its shape
    cannot be cast)."""
    if getattr(buffer, "dtype", None) is not None and buffer.dtype.kind == "V":
        buffer = buffer.reshape(-1).view("uint8")  # bfloat16 (ml_dtypes): no buffer format
    view = memoryview(buffer)
    if view.nbytes == 0:
        view.release()
        return memoryview(b"")
    return view.cast("B")


def content_digest(buffers: Iterable[memoryview | bytes], header: bytes = b"") -> str:
    """Hex SHA-256 over `header` and every byte of `buffers` (bytes-like, C-contiguous), in
    order; the pieces are hashed in parallel when there is more than one."""
    views = [_byte_view(b) for b in buffers]
    lengths = [len(view) for view in views]
    pieces = _pieces(views)
    try:
        digests = _hash_all(pieces)
    finally:  # let a caller close a memory map the views point into
        for parts in pieces:
            for part in parts:
                part.release()
        for view in views:
            view.release()
    h = hashlib.sha256(f"relayjit-content-digest-1:{algorithm()}\0".encode())
    h.update(struct.pack("<QQ", len(header), len(lengths)))
    h.update(header)
    h.update(b"".join(struct.pack("<Q", n) for n in lengths))
    for digest in digests:
        h.update(digest)
    return h.hexdigest()


def _hash_all(pieces: list[list[memoryview]]) -> list[bytes]:
    """Each piece's digest, on up to _threads() threads (plain threads, not a pool: a pool
    refuses work once the interpreter is exiting, when the build cache's writer may still
    be digesting)."""
    digests: list[bytes] = [b""] * len(pieces)
    workers = min(_threads(), len(pieces))
    if workers <= 1:
        return [_piece_digest(p) for p in pieces]
    order = itertools.count()  # next() is atomic under the GIL
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for i in iter(order.__next__, None):
                if i >= len(pieces):
                    return
                digests[i] = _piece_digest(pieces[i])
        except BaseException as err:  # re-raised in the caller
            errors.append(err)

    threads = [threading.Thread(target=work, name="relayjit-digest", daemon=True)
               for _ in range(workers - 1)]
    for t in threads:
        t.start()
    work()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return digests
