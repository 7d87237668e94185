"""Many cores (issue 25 item 7): built for 16 threads (the pool's count at build time, as
RELAYJIT_NUM_THREADS=16 sets it), the kernels that take a real share of ResNet-50,
Inception-v1 and DenseNet-121 split into at least 16 chunks of similar size, and the models
give bitwise the 1-thread result. The split is read from the lowered kernels (the parallel
loops' extents and thread caps, chunked as the runtime's pool chunks them: contiguous ranges
that differ by one iteration), not timed: this machine has two cores."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler import relay
from compiler.backend.graph_codegen import function_calls
from compiler.driver import build as driver
from compiler.ir.expr import Call, Op
from compiler.ir.traversal import post_order
from compiler.passes.bind_params import bind_params_by_name
from compiler.tools.model_zoo import dummy_inputs, light_model_path
from compiler.transform import PassContext
from codegen.tir.stmt import Allocate, For, IfThenElse, LetStmt, SeqStmt
from runtime import cpu, graph_executor, threadpool

THREADS = 16
BIG = 0.015  # a kernel with at least this share of the model's FLOPs must split
MODELS = ["resnet50", "inception_v1", "densenet121"]


def _flops(func) -> int:
    total = 0
    for node in post_order(func.body):
        if type(node) is Call and isinstance(node.op, Op) and node.op.op_def.flops:
            total += node.op.op_def.flops([a.checked_type for a in node.args], node.attrs,
                                          node.checked_type)
    return total


def _parallel_loops(stmt) -> list[For]:
    out, stack = [], [stmt]
    while stack:
        s = stack.pop()
        if type(s) is For:
            if s.kind == "parallel":
                out.append(s)
            stack.append(s.body)
        elif type(s) is SeqStmt:
            stack.extend(s.stmts)
        elif type(s) is IfThenElse:
            stack += [b for b in (s.then_body, s.else_body) if b is not None]
        elif type(s) in (LetStmt, Allocate):
            stack.append(s.body)
    return out


def chunks(extent: int, threads: int, cap: int) -> list[int]:
    """The iterations of each chunk the pool runs a parallel loop in (runtime/native.ll)."""
    tasks = min(extent, threads, cap or threads)
    return [(k + 1) * extent // tasks - k * extent // tasks for k in range(tasks)]


def test_chunks_follow_the_pool():
    assert chunks(40, 16, 0) == [2, 3] * 8
    assert chunks(7, 16, 0) == [1] * 7 and chunks(64, 16, 3) == [21, 21, 22]


def _big_kernels(name: str):
    threadpool.set_num_threads(THREADS)
    model = onnx.load(light_model_path(name))
    mod, params = relay.frontend.from_onnx(model)
    mod = driver._to_module(mod)
    mod["main"] = bind_params_by_name(mod["main"], params)
    with PassContext(opt_level=3), driver.build_target(driver.resolve_target("llvm")) as opts:
        mod = driver.optimize(mod)
        names, prims = driver.lower_module(mod["main"], "default", opts)
    flops = {names[id(f)]: _flops(f) for _, f in function_calls(mod["main"]) if id(f) in names}
    total = sum(flops.values())
    return [(p, flops[p.name] / total) for p in prims if flops.get(p.name, 0) >= BIG * total]


@pytest.mark.parametrize("name", MODELS)
def test_big_kernels_split_into_16_similar_chunks(name, keep_thread_count):
    """Every parallel loop of a big kernel whose work pays for 16 threads runs as at least 16
    chunks, none more than 1.5x the mean; and each big kernel has such a loop."""
    kernels = _big_kernels(name)
    assert len(kernels) >= 10, [k.name for k, _ in kernels]
    for prim, share in kernels:
        heavy = [f for f in _parallel_loops(prim.body) if f.threads == 0 or f.threads >= THREADS]
        assert heavy, f"{prim.name} ({share:.1%} of the FLOPs) has no loop for 16 threads"
        for loop in heavy:
            sizes = chunks(loop.extent, THREADS, loop.threads)
            assert len(sizes) >= THREADS and max(sizes) <= 1.5 * sum(sizes) / len(sizes), (
                f"{prim.name} ({share:.1%}): loop {loop.var.name} of {loop.extent} "
                f"iterations runs as chunks {sizes}")


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n == "resnet50" else
                                               pytest.mark.slow) for n in MODELS])
def test_16_threads_give_the_1_thread_result_bitwise(name, keep_thread_count):
    model = onnx.load(light_model_path(name))
    mod, params = relay.frontend.from_onnx(model)
    threadpool.set_num_threads(THREADS)  # built for 16 threads
    with PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    module = graph_executor.GraphModule(lib["default"](cpu(0)))
    module.set_input(**dummy_inputs(model))
    outs = []
    for threads in (1, THREADS):
        threadpool.set_num_threads(threads)
        module.run()
        outs.append([module.get_output(i).numpy().copy()
                     for i in range(module.get_num_outputs())])
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)
