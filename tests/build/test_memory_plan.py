"""compiler.backend.memory_plan on its own: reuse after the last use, outputs in place,
concatenations laid out in their output, and (over random programs) no two live tensors
sharing bytes."""
from __future__ import annotations

import random

import pytest

from compiler.backend.memory_plan import MATCH_RANGE, Step, StepKind, StoragePlan, plan_memory
from compiler.errors import CompilerError

KERNEL, VIEW, CONCAT = StepKind.KERNEL, StepKind.VIEW, StepKind.CONCAT


def _chain(n: int, size: int = 256) -> tuple[list[int], list[Step]]:
    """x -> t1 -> t2 -> ... -> tn, one kernel a step."""
    return [size] * (n + 1), [Step((k,), (k + 1,)) for k in range(n)]


def test_a_storage_is_reused_after_its_last_reader():
    sizes, steps = _chain(4)
    plan = plan_memory(sizes, steps, external=[0], results=[4])
    # t1 dies after step 1, so t3 (written in step 2) takes its storage; t2 and t4 likewise
    assert plan.storage_ids == (0, 1, 2, 1, 2)
    assert plan.storage_sizes == (256, 256, 256) and plan.num_external == 1
    assert plan.internal_bytes == 512 and plan.external_bytes == 256


def test_a_storage_still_read_later_is_not_reused():
    sizes = [256] * 4
    steps = [Step((0,), (1,)), Step((1,), (2,)), Step((1, 2), (3,))]  # t1 read again last
    plan = plan_memory(sizes, steps, external=[0], results=[3])
    assert len({plan.storage_ids[e] for e in (1, 2, 3)}) == 3


def test_reuse_only_within_the_match_range_and_a_smaller_storage_grows():
    steps = [Step((0,), (1,)), Step((1,), (2,)), Step((2,), (3,))]
    tiny = plan_memory([64, 1000, 64, 1000 // MATCH_RANGE - 1], steps, [0], [3])
    assert tiny.storage_ids[3] != tiny.storage_ids[1]  # 1000 bytes for 61: a new storage
    grown = plan_memory([64, 1000, 64, 1500], steps, [0], [3])
    assert grown.storage_ids[3] == grown.storage_ids[1]
    assert grown.storage_sizes[grown.storage_ids[3]] == 1500


def test_external_tensors_and_results_are_never_reused():
    sizes, steps = _chain(4)
    plan = plan_memory(sizes, steps, external=[0], results=[1, 4])
    assert plan.storage_ids.count(plan.storage_ids[0]) == 1
    assert plan.storage_ids.count(plan.storage_ids[1]) == 1


def test_an_output_takes_its_last_inputs_storage_in_place():
    sizes = [256] * 5
    residual = [Step((0,), (1,)), Step((0,), (2,)), Step((2, 1), (3,), in_place=((0, 1),)),
                Step((3,), (4,))]
    plan = plan_memory(sizes, residual, external=[0], results=[4])
    assert plan.storage_ids[3] == plan.storage_ids[1]
    assert plan.storage_ids[3] != plan.storage_ids[2]


@pytest.mark.parametrize("case", ["read later", "external", "other size", "result"])
def test_no_output_in_place_where_the_input_must_keep_its_bytes(case):
    sizes = [256] * 4
    steps = [Step((0,), (1,)), Step((1,), (2,), in_place=((0, 0),)), Step((2,), (3,))]
    external, results = [0], [3]
    if case == "read later":
        steps[2] = Step((2, 1), (3,))
    elif case == "external":
        steps[1] = Step((0,), (2,), in_place=((0, 0),))
    elif case == "other size":
        sizes[2] = 512
    else:
        results = [1, 3]
    plan = plan_memory(sizes, steps, external, results)
    src = steps[1].inputs[0]
    assert plan.storage_ids[2] != plan.storage_ids[src]


def test_a_view_shares_its_inputs_storage_and_keeps_it_alive():
    sizes = [256] * 5
    steps = [Step((0,), (1,)), Step((1,), (2,), VIEW), Step((0,), (3,)), Step((2, 3), (4,))]
    plan = plan_memory(sizes, steps, external=[0], results=[4])
    assert plan.storage_ids[2] == plan.storage_ids[1]
    assert plan.storage_ids[3] != plan.storage_ids[1]  # t1's bytes live on as t2


def test_a_concatenations_inputs_are_laid_out_inside_its_output():
    sizes = [256, 128, 192, 320, 320]
    steps = [Step((0,), (1,)), Step((0,), (2,)), Step((1, 2), (3,), CONCAT),
             Step((3,), (4,))]
    plan = plan_memory(sizes, steps, external=[0], results=[4])
    assert plan.storage_ids[1] == plan.storage_ids[2] == plan.storage_ids[3]
    assert (plan.offsets[1], plan.offsets[2], plan.offsets[3]) == (0, 128, 0)
    assert plan.storage_sizes[plan.storage_ids[3]] == 320


def test_nested_concatenations_lie_in_the_outermost_one():
    sizes = [64, 64, 64, 128, 64, 192]  # t3 = [t1, t2]; t5 = [t3, t4]
    steps = [Step((0,), (1,)), Step((0,), (2,)), Step((1, 2), (3,), CONCAT),
             Step((3,), (4,)), Step((3, 4), (5,), CONCAT)]
    plan = plan_memory(sizes, steps, external=[0], results=[5])
    assert len({plan.storage_ids[e] for e in range(1, 6)}) == 1
    assert [plan.offsets[e] for e in range(1, 6)] == [0, 64, 0, 128, 0]


@pytest.mark.parametrize("case", ["external input", "unaligned", "read twice", "result"])
def test_a_concatenation_not_laid_out_in_place_copies(case):
    sizes = [128, 128, 128, 256]
    steps = [Step((0,), (1,)), Step((0,), (2,)), Step((1, 2), (3,), CONCAT)]
    results = [3]
    if case == "external input":
        steps[2] = Step((0, 2), (3,), CONCAT)
    elif case == "unaligned":
        sizes = [128, 100, 128, 228]
    elif case == "read twice":
        sizes[3] = 384
        steps[2] = Step((1, 2, 1), (3,), CONCAT)
    else:
        results = [1, 3]
    plan = plan_memory(sizes, steps, external=[0], results=results)
    assert not any(plan.offsets)
    assert plan.storage_ids[2] != plan.storage_ids[3]


@pytest.mark.parametrize("sizes, steps, external, what", [
    ([4, 4], [Step((1,), (0,))], [], "reads tensor 1"),
    ([4, 4], [Step((0,), (1,)), Step((0,), (1,))], [0], "already written"),
    ([4, 4], [Step((0,), (1,), VIEW, ((0, 1),))], [0], "may overwrite input 1"),
    ([4, 4, 4], [Step((0,), (1, 2), VIEW)], [0], "one tensor to one"),
    ([4, 4], [Step((0,), (1,), "copy")], [0], "expected a StepKind"),
    ([4], [], [0, 0], "repeated"),
    ([4, 4], [], [0], "tensor 1 is neither external nor written"),
])
def test_a_malformed_program_is_refused(sizes, steps, external, what):
    with pytest.raises(CompilerError, match=what):
        plan_memory(sizes, steps, external, [])


# ---- property: over random programs, no two tensors alive at once share a byte ------------

def _random_program(rng: random.Random):
    sizes: list[int] = []

    def new(size: int) -> int:
        sizes.append(size)
        return len(sizes) - 1

    choices = (64, 128, 192, 256, 100, 1000, 4096)
    external = [new(rng.choice(choices)) for _ in range(rng.randint(1, 3))]
    steps, alive = [], list(external)
    for _ in range(rng.randint(1, 30)):
        kind = rng.choices((KERNEL, VIEW, CONCAT), (6, 1, 2))[0]
        if kind is VIEW:
            src = rng.choice(alive)
            steps.append(Step((src,), (new(sizes[src]),), VIEW))
        elif kind is CONCAT:
            ins = tuple(rng.choice(alive[-6:]) for _ in range(rng.randint(2, 3)))
            steps.append(Step(ins, (new(sum(sizes[e] for e in ins)),), CONCAT))
        else:
            ins = tuple(rng.choice(alive) for _ in range(rng.randint(1, 3)))
            outs, in_place = [], []
            for o in range(rng.randint(1, 2)):
                if rng.random() < 0.4:
                    q = rng.randrange(len(ins))
                    in_place.append((o, q))
                    outs.append(new(sizes[ins[q]]))
                else:
                    outs.append(new(rng.choice(choices)))
            steps.append(Step(ins, tuple(outs), KERNEL, tuple(in_place)))
        alive.extend(steps[-1].outputs)
    results = rng.sample(range(len(sizes)), rng.randint(1, 2))
    return sizes, steps, external, results


def _check_no_live_overlap(sizes, steps, external, results, plan: StoragePlan) -> None:
    """The oracle, written apart from the planner: each tensor fits its storage; tensors
    that are one value (a view and its input, a concatenation's input placed inside its
    output, an output written over its input) count as one; any two values alive at the same
    step (inclusive: a step reads its inputs while it writes its outputs) share no byte. An
    output written over its input is allowed only where the step may do so and is that
    input's last reader (an external tensor or result keeps its bytes)."""
    end = len(steps)
    for e, size in enumerate(sizes):
        assert plan.offsets[e] + size <= plan.storage_sizes[plan.storage_ids[e]], e
    value = list(range(len(sizes)))

    def find(e: int) -> int:
        while value[e] != e:
            e = value[e]
        return e

    span = {e: (plan.storage_ids[e], plan.offsets[e], plan.offsets[e] + sizes[e])
            for e in range(len(sizes))}
    for step in steps:
        if step.kind is VIEW:
            value[find(step.outputs[0])] = find(step.inputs[0])
        elif step.kind is CONCAT:
            sid, at, _ = span[step.outputs[0]]
            for e in step.inputs:
                if span[e] == (sid, at, at + sizes[e]):
                    value[find(e)] = find(step.outputs[0])
                at += sizes[e]
    first = {e: -1 for e in external}
    for k, step in enumerate(steps):
        for e in step.outputs:
            first[e] = k
    last = dict(first)
    for k, step in enumerate(steps):
        for e in step.inputs:
            last[e] = k
    for e in (*external, *results):
        last[e] = end

    def lives() -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for e in range(len(sizes)):
            life = out.setdefault(find(e), [first[e], last[e]])
            life[0], life[1] = min(life[0], first[e]), max(life[1], last[e])
        return out

    for k, step in enumerate(steps):
        for o, q in step.in_place:
            src, dst = step.inputs[q], step.outputs[o]
            live = lives()
            if span[src] == span[dst] and find(src) != find(dst) and live[find(src)][1] >= k:
                assert live[find(src)][1] == k, f"step {k} overwrites tensor {src}, read later"
                value[find(dst)] = find(src)
    live = lives()
    values = sorted(live)
    for i, a in enumerate(values):
        for b in values[i + 1:]:
            if live[a][1] < live[b][0] or live[b][1] < live[a][0]:
                continue
            for x in (e for e in range(len(sizes)) if find(e) == a):
                for y in (e for e in range(len(sizes)) if find(e) == b):
                    sx, sy = span[x], span[y]
                    assert sx[0] != sy[0] or sx[2] <= sy[1] or sy[2] <= sx[1], \
                        f"tensors {x} and {y} share storage {sx[0]} while both are alive"


def test_no_two_live_tensors_share_bytes_over_random_programs():
    placed = in_place = 0
    for seed in range(400):
        program = _random_program(random.Random(seed))
        plan = plan_memory(*program)
        _check_no_live_overlap(*program, plan)
        placed += any(plan.offsets)
        steps = program[1]
        in_place += any(plan.storage_ids[s.outputs[o]] == plan.storage_ids[s.inputs[q]]
                        for s in steps if s.kind is KERNEL for o, q in s.in_place)
    assert placed > 20 and in_place > 20  # the random programs exercise both


def test_the_oracle_catches_two_live_tensors_in_one_storage():
    sizes = [256] * 4
    steps = [Step((0,), (1,)), Step((1,), (2,)), Step((1, 2), (3,))]
    good = plan_memory(sizes, steps, [0], [3])
    _check_no_live_overlap(sizes, steps, [0], [3], good)
    ids = list(good.storage_ids)
    ids[2] = ids[1]  # t2 written while t1 is still to be read
    bad = StoragePlan(tuple(ids), good.offsets, good.storage_sizes, good.num_external)
    with pytest.raises(AssertionError, match="share storage"):
        _check_no_live_overlap(sizes, steps, [0], [3], bad)
