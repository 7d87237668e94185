"""Static storage for a VM function's static-shaped tensors: the graph executor's memory plan
(compiler.backend.memory_plan) over the function's bytecode, after an escape analysis.

The emitter allocates each static-shaped kernel output as a placeholder, `(PLANNED, tensor,
destination register)`. Once the function's code is complete, plan_storage decides where
each lives:

  escape analysis  A tensor escapes when its value may outlive this activation of the
                   function or be seen by another: returned (Ret), passed to a call (Invoke,
                   InvokeClosure), captured by a closure (AllocClosure), moved into another
                   register (Move: an If's result), held in a tuple that is used other than
                   by GetField, or alive across a call (the callee may be this function, whose
                   static storage it would then overwrite). Views (ReshapeTensor) and fields
                   (GetField) of a tensor count as the tensor.
  memory plan      The other tensors are planned as relay.build plans a graph: the function's
                   instructions in code order are the steps (kernel calls write their outputs,
                   every other instruction reading a tensor is a step that reads it), with the
                   kernels' in-place pairs (a residual add writing over its input, where this
                   is its last reader). Jumps only go forward, so any run of the function
                   executes a subsequence of that order, and tensors whose ranges in it do not
                   overlap never live at the same time.
  rewrite          Each planned storage is a StaticStorage at the function's entry (a buffer
                   the VirtualMachine allocates once, so a run at the same shapes allocates
                   nothing and the VM can precompute kernel arguments over it); a planned
                   tensor is an AllocTensor in it. An escaping tensor gets storage of its own
                   from the VM's pool, as before (LoadConsti, AllocStorage, AllocTensor,
                   KillRegister). Jump offsets are re-linked around the inserted instructions.
"""
from __future__ import annotations

from dataclasses import dataclass

from compiler.backend.memory_plan import Step, StepKind, plan_memory
from runtime.vm import bytecode as bc
from runtime.vm.validate import reads_writes

PLANNED = -1  # the emitter's placeholder opcode: (PLANNED, tensor index, destination)
STORAGE_ALIGNMENT = 64

# instructions whose register operands let a value escape this activation
_ESCAPES = {bc.RET, bc.INVOKE, bc.INVOKE_CLOSURE, bc.ALLOC_CLOSURE, bc.MOVE}


@dataclass(frozen=True)
class PlannedTensor:
    """A static-shaped tensor the emitter allocated: its bytes, shape and dtype."""

    nbytes: int
    shape: tuple[int, ...]
    dtype: str


def plan_storage(code: list[tuple], tensors: list[PlannedTensor], num_registers: int,
                 kernels) -> tuple[list[tuple], int]:
    """(final code, register count) of a function whose code holds PLANNED placeholders;
    `kernels` (compiler.backend.vm.kernels.KernelArguments) says what each kernel takes (see
    the module docstring)."""
    if not tensors:
        return code, num_registers
    uses, escaping = _uses_and_escapes(code)
    steps, kept = _steps(code, uses, escaping, kernels)
    local = {t: i for i, t in enumerate(kept)}
    plan = plan_memory([tensors[t].nbytes for t in kept],
                       [Step(tuple(local[t] for t in ins), tuple(local[t] for t in outs), kind,
                             pairs) for _, ins, outs, kind, pairs in steps], [], [])
    storage_regs = list(range(num_registers, num_registers + len(plan.storage_sizes)))
    num_registers += len(storage_regs)
    prelude = [(bc.STATIC_STORAGE, _aligned(size), reg)
               for size, reg in zip(plan.storage_sizes, storage_regs)]
    expansions: dict[int, list[tuple]] = {}
    for pc, ins, outs, kind, _ in steps:  # concatenations laid out in place: nothing to do
        if kind == StepKind.CONCAT and _laid_out(plan, [local[t] for t in ins],
                                                 local[outs[0]], tensors, kept):
            expansions[pc] = []
    for pc, inst in enumerate(code):
        if inst[0] != PLANNED:
            continue
        _, t, dst = inst
        ty = tensors[t]
        if t in local:
            i = local[t]
            expansions[pc] = [(bc.ALLOC_TENSOR, storage_regs[plan.storage_ids[i]],
                               plan.offsets[i], ty.shape, ty.dtype, dst)]
        else:
            size, storage = num_registers, num_registers + 1
            num_registers += 2
            expansions[pc] = [(bc.LOAD_CONSTI, ty.nbytes, size),
                              (bc.ALLOC_STORAGE, size, STORAGE_ALIGNMENT, ty.dtype, storage),
                              (bc.ALLOC_TENSOR, storage, 0, ty.shape, ty.dtype, dst),
                              (bc.KILL_REGISTER, storage)]
    return prelude + relink(code, expansions), num_registers


def _laid_out(plan, ins: list[int], out: int, tensors, kept) -> bool:
    """Whether the plan put each input of a concatenation at its place inside the output."""
    at = plan.offsets[out]
    for i in ins:
        if plan.storage_ids[i] != plan.storage_ids[out] or plan.offsets[i] != at:
            return False
        at += tensors[kept[i]].nbytes
    return True


def _aligned(size: int) -> int:
    return -(-size // STORAGE_ALIGNMENT) * STORAGE_ALIGNMENT


def _uses_and_escapes(code: list[tuple]) -> tuple[list[list[frozenset]], set[int]]:
    """Per instruction, per register it reads, the tensors that register holds (views,
    fields and tuples resolved to their tensors); and the tensors that escape (module
    docstring)."""
    holds: dict[int, frozenset] = {}  # register -> tensors its value may hold
    fields: dict[int, tuple] = {}  # register of a tuple built here -> its field registers
    writes: dict[int, int] = {}
    escaping: set[int] = set()
    uses: list[list[frozenset]] = []
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    calls: list[int] = []
    for pc, inst in enumerate(code):
        op = inst[0]
        reads, dsts = _operands(inst) if op != bc.KILL_REGISTER else ([], [])
        per_read = [holds.get(r, frozenset()) for r in reads]
        held = frozenset().union(*per_read)
        uses.append(per_read)
        for t in held:
            last[t] = pc
        if op in _ESCAPES or (op not in (bc.GET_FIELD, bc.KILL_REGISTER, bc.ALLOC_ADT) and
                              any(r in fields for r in reads)):  # a tuple used as a whole
            escaping |= held
        if op in (bc.INVOKE, bc.INVOKE_CLOSURE):
            calls.append(pc)
        for r in dsts:
            writes[r] = writes.get(r, 0) + 1
        if op == PLANNED:
            holds[inst[2]] = frozenset((inst[1],))
            first[inst[1]] = pc
        elif op == bc.RESHAPE_TENSOR and held:
            holds[dsts[0]] = frozenset(holds.get(inst[1], ()))
        elif op == bc.ALLOC_ADT and held:
            holds[dsts[0]] = held
            fields[dsts[0]] = inst[2]
        elif op == bc.GET_FIELD and inst[1] in fields:
            field = fields[inst[1]][inst[2]] if inst[2] < len(fields[inst[1]]) else None
            if field in holds:
                holds[dsts[0]] = holds[field]
            if field in fields:
                fields[dsts[0]] = fields[field]
    for r, n in writes.items():  # a register written twice: its values cannot be told apart
        if n > 1 and r in holds:
            escaping |= holds[r]
    for t, start in first.items():
        end = last.get(t, start)
        if any(start < pc < end for pc in calls):
            escaping.add(t)
    return uses, escaping


def _operands(inst: tuple) -> tuple[list[int], list[int]]:
    """(registers read, registers written) of an instruction or a placeholder."""
    return ([], [inst[2]]) if inst[0] == PLANNED else reads_writes(inst)


def _steps(code: list[tuple], uses: list[list[frozenset]], escaping: set[int], kernels):
    """The memory plan's steps over the tensors that do not escape, as (pc, inputs, outputs,
    StepKind, in-place pairs), and those tensors in the order they are first written."""
    placeholder = {inst[2]: inst[1] for inst in code if inst[0] == PLANNED}
    steps, kept = [], []
    for pc, inst in enumerate(code):
        read = sorted(frozenset().union(*uses[pc]) - escaping)
        if inst[0] != bc.INVOKE_PACKED or inst[1] not in kernels.num_inputs:
            if read:
                steps.append((pc, read, [], StepKind.KERNEL, ()))
            continue
        kernel, args = inst[1], inst[3]
        n_in = kernels.num_inputs[kernel]
        outs = [placeholder[r] for r in args[n_in:]
                if r in placeholder and placeholder[r] not in escaping]
        direct = [placeholder.get(r) for r in args[:n_in]]
        if kernel in kernels.concats and outs and all(
                t is not None and t not in escaping for t in direct):
            steps.append((pc, direct, outs, StepKind.CONCAT, ()))
            kept.extend(outs)
            continue
        ins = [t for t in read if t not in outs]
        pairs = []
        for o, q in kernels.in_place.get(kernel, {}).items():
            out, src = placeholder.get(args[o]), direct[q]
            # the input passed once, directly: no other argument holds it too
            if out in outs and src in ins and \
                    sum(src in held for held in uses[pc][:n_in]) == 1:
                pairs.append((outs.index(out), ins.index(src)))
        kept.extend(outs)
        steps.append((pc, ins, outs, StepKind.KERNEL, tuple(pairs)))
    return steps, kept


def relink(code: list[tuple], expansions: dict[int, list[tuple]]) -> list[tuple]:
    """code with instruction pc replaced by expansions[pc], If and Goto offsets re-linked
    (a jump to an expanded instruction lands on the first of its replacement)."""
    new_pc, at = [], 0
    for pc in range(len(code)):
        new_pc.append(at)
        at += len(expansions.get(pc, (None,)))
    new_pc.append(at)
    out: list[tuple] = []
    for pc, inst in enumerate(code):
        if pc in expansions:
            out.extend(expansions[pc])
        elif inst[0] == bc.GOTO:
            out.append((bc.GOTO, new_pc[pc + inst[1]] - new_pc[pc]))
        elif inst[0] == bc.IF:
            out.append((bc.IF, inst[1], new_pc[pc + inst[2]] - new_pc[pc],
                        new_pc[pc + inst[3]] - new_pc[pc]))
        else:
            out.append(inst)
    return out
