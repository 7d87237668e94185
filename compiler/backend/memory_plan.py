"""Static memory planning: which storage (and where in it) each tensor of a program lives in.

The program is a sequence of steps in execution order (graph codegen's op nodes; a VM
compiler's kernel invocations), each reading and writing tensors known by index, with each
tensor's size in bytes. External tensors (graph inputs, constants) and results are given
apart. plan_memory answers with a StoragePlan: a storage id and a byte offset per tensor and
each storage's size. As TVM's GraphPlanMemory:

Every tensor gets a storage token. External tensors get their own tokens (ids 0, 1, ... in
the order given), never reused. Walking the steps in order, each output requests a free token
whose size is within a factor MATCH_RANGE of the need (the smallest big-enough first, else
the largest smaller one, which grows), or a new one; after the step, each input's token drops
one reference and returns to the free list at zero. A VIEW step's output takes its input's
token (a reshape: the same bytes). Results are pinned. The token index is the storage id, so
two tensors whose lifetimes do not overlap share one storage.

Outputs written in place (relayjit's addition): where a step says an output may share an
input's storage (Step.in_place; runtime.library.InPlace: a residual added in a conv's
epilogue) and this step is the last reader of that input's token, the output takes the
token, as onnxruntime's Conv+Sum writes over the residual: one stream of memory instead of two.

Concatenations without copies (relayjit's addition): a CONCAT step's output is its inputs'
bytes one after another. Where it can, the plan lays its inputs out inside its output
(_concat_layout: nested concatenations, as DenseNet's, inside the outermost one): the group's
token is requested by its first member's producer, holds the references of every member, and
each member gets a byte offset; the step then has nothing to do at run time.
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from compiler.errors import CompilerError
from runtime.graph_json import STORAGE_ALIGNMENT

__all__ = ["StepKind", "MATCH_RANGE", "Step", "StoragePlan", "plan_memory"]


class StepKind(enum.Enum):
    KERNEL = "kernel"  # writes its outputs from its inputs
    VIEW = "view"  # one input, one output with the same bytes (a reshape)
    CONCAT = "concat"  # one output: the inputs' bytes one after another


MATCH_RANGE = 16  # a free storage is reused for a need within this factor of its size


@dataclass(frozen=True)
class Step:
    """One step of the program: tensors read and written (indices), what kind of step, and
    (output position, input position) pairs whose output may overwrite that input."""

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    kind: StepKind = StepKind.KERNEL
    in_place: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class StoragePlan:
    """Per tensor its storage id and byte offset in it; per storage its size in bytes.
    Storages 0 .. num_external - 1 hold the external tensors, in the order given."""

    storage_ids: tuple[int, ...]
    offsets: tuple[int, ...]
    storage_sizes: tuple[int, ...]
    num_external: int

    @property
    def internal_bytes(self) -> int:
        """Bytes of the storages the plan allocates (not the external tensors')."""
        return sum(self.storage_sizes[self.num_external:])

    @property
    def external_bytes(self) -> int:
        return sum(self.storage_sizes[:self.num_external])


@dataclass(eq=False)
class _Token:
    size: int
    sid: int
    refs: int = 0
    pinned: bool = False


def plan_memory(sizes: Sequence[int], steps: Sequence[Step], external: Sequence[int],
                results: Iterable[int]) -> StoragePlan:
    """The storage plan of a program (see the module docstring): `sizes` in bytes per tensor;
    `external` tensors (inputs, constants) exist before the first step and keep their values;
    `results` live to the end. Every other tensor is written by exactly one step."""
    _check_program(sizes, steps, external)
    uses = [0] * len(sizes)
    for step in steps:
        for e in step.inputs:
            uses[e] += 1
    tokens: list[_Token] = []
    entry_token: list = [None] * len(sizes)
    free: list[_Token] = []

    def new_token(size: int, refs: int, pinned: bool) -> _Token:
        tok = _Token(size, len(tokens), refs, pinned)
        tokens.append(tok)
        return tok

    head_set = set(results)
    for e in external:
        entry_token[e] = new_token(sizes[e], uses[e], True)
    root, offsets = _concat_layout(sizes, steps, set(external) | head_set)
    members: dict[int, list[int]] = {}
    for e, r in root.items():
        members.setdefault(r, []).append(e)
    for step in steps:
        ins, outs = step.inputs, step.outputs
        if step.kind == StepKind.VIEW:
            tok = entry_token[ins[0]]
            tok.refs += uses[outs[0]]
            tok.pinned = tok.pinned or outs[0] in head_set
            entry_token[outs[0]] = tok
        else:
            for o, q in step.in_place:
                src, dst = ins[q], outs[o]
                tok = entry_token[src]
                if tok.refs == 1 and not tok.pinned and sizes[src] == sizes[dst] \
                        and src not in root and dst not in root and dst not in head_set:
                    tok.refs += uses[dst]  # the output takes over its last input's bytes
                    entry_token[dst] = tok
            for e in outs:
                if entry_token[e] is not None:  # in place, or in a placed concatenation
                    continue
                whole = root.get(e, e)
                group = members.get(whole, [e])
                tok = _request(free, sizes[whole], sum(uses[m] for m in group), new_token)
                tok.pinned = any(m in head_set for m in group)
                for m in group:
                    entry_token[m] = tok
        for e in ins:
            tok = entry_token[e]
            tok.refs -= 1
            if tok.refs == 0 and not tok.pinned:
                free.append(tok)
        for e in outs:  # an output nobody reads is dead right away
            tok = entry_token[e]
            if tok.refs == 0 and not tok.pinned and tok not in free:
                free.append(tok)
    return StoragePlan(tuple(entry_token[e].sid for e in range(len(sizes))),
                       tuple(offsets.get(e, 0) for e in range(len(sizes))),
                       tuple(t.size for t in tokens), len(external))


def _check_program(sizes: Sequence[int], steps: Sequence[Step], external: Sequence[int]) -> None:
    """Every tensor read is external or written by an earlier step; each written once."""
    written = [False] * len(sizes)
    for e in external:
        if not 0 <= e < len(sizes) or written[e]:
            raise CompilerError(f"memory plan: external tensor {e} is out of range or repeated "
                                f"({len(sizes)} tensors)")
        written[e] = True
    for k, step in enumerate(steps):
        if not isinstance(step.kind, StepKind):
            raise CompilerError(f"memory plan: step {k} is a {step.kind!r}; expected a StepKind")
        if step.kind == StepKind.VIEW and (len(step.inputs) != 1 or len(step.outputs) != 1):
            raise CompilerError(f"memory plan: view step {k} must map one tensor to one, got "
                                f"{len(step.inputs)} inputs, {len(step.outputs)} outputs")
        if step.kind == StepKind.CONCAT and len(step.outputs) != 1:
            raise CompilerError(f"memory plan: concat step {k} must write one tensor, got "
                                f"{len(step.outputs)}")
        for e in step.inputs:
            if not 0 <= e < len(sizes) or not written[e]:
                raise CompilerError(f"memory plan: step {k} reads tensor {e}, which no earlier "
                                    "step writes and is not external")
        for e in step.outputs:
            if not 0 <= e < len(sizes) or written[e]:
                raise CompilerError(f"memory plan: step {k} writes tensor {e}, which is out of "
                                    "range or already written")
            written[e] = True
        for o, q in step.in_place:
            if not (0 <= o < len(step.outputs) and 0 <= q < len(step.inputs)):
                raise CompilerError(f"memory plan: step {k} says output {o} may overwrite "
                                    f"input {q}; it has {len(step.outputs)} outputs and "
                                    f"{len(step.inputs)} inputs")
    if not all(written):
        raise CompilerError(f"memory plan: tensor {written.index(False)} is neither external "
                            "nor written by a step")


def _concat_layout(sizes: Sequence[int], steps: Sequence[Step],
                   fixed: set[int]) -> tuple[dict, dict]:
    """Concatenations laid out in place: ({tensor: the outermost concatenation output it
    lies in}, {tensor: its byte offset there}), roots mapping to themselves.

    An input is placed inside its concatenation's output when a kernel or another placed
    concatenation writes it, it is not external or a result, no other concatenation claims
    it, and its offset keeps kernels' buffers aligned; a concatenation places all its inputs
    or none (the runtime copies the rest)."""
    producer = {e: step.kind for step in steps for e in step.outputs}
    parent: dict[int, tuple[int, int]] = {}  # tensor -> (concat output, byte offset)
    for step in steps:
        if step.kind != StepKind.CONCAT:
            continue
        ins = step.inputs
        at, places = 0, []
        for e in ins:
            places.append(at)
            at += sizes[e]
        if len(set(ins)) == len(ins) and all(
                e not in fixed and e not in parent and producer.get(e) not in (None, StepKind.VIEW)
                and off % STORAGE_ALIGNMENT == 0 for e, off in zip(ins, places)):
            parent.update((e, (step.outputs[0], off)) for e, off in zip(ins, places))
    root: dict[int, int] = {}
    offsets: dict[int, int] = {}
    for e in parent:
        r, off = e, 0
        while r in parent:
            r, step_off = parent[r]
            off += step_off
        root[e], offsets[e] = r, off
        root.setdefault(r, r)
    return root, offsets


def _request(free: list[_Token], size: int, refs: int, new_token) -> _Token:
    """A free token for `size` bytes within MATCH_RANGE (growing a smaller one), else new."""
    bigger = [t for t in free if size <= t.size < size * MATCH_RANGE]
    if bigger:
        tok = min(bigger, key=lambda t: (t.size, t.sid))
    else:
        smaller = [t for t in free if size // MATCH_RANGE <= t.size < size]
        if not smaller:
            return new_token(size, refs, False)
        tok = max(smaller, key=lambda t: (t.size, -t.sid))
        tok.size = size
    free.remove(tok)
    tok.refs = refs
    return tok
