"""The Relay VM against the graph executor on static models, beside onnxruntime, one thread.

    nice -n 10 python benchmarks/experiments/vm_overhead.py                 # squeezenet,
                                                  # resnet50, gen_mlp_b1 (default)
    nice -n 10 python benchmarks/experiments/vm_overhead.py gen_mlp_b1 --rounds 31
    nice -n 10 python benchmarks/experiments/vm_overhead.py --dynamic   # and each model with
                                                  # a dynamic batch dim on the VM ("dyn" rows)

Both executors run the same kernels (relay.vm.compile and relay.build share the pass pipeline
and the kernel table), so the difference is the VM's interpreter: argument checks, its
instructions, storage and the calls into native code. Each model is built for both, outputs
are checked against onnxruntime, then the three are timed in interleaved rounds of thread
CPU time (benchmarks/model_cpu_time.interleaved_medians): the graph executor's run(), the
VM's invoke of main with the same inputs (invoke_stateful: inputs set once, as the graph
executor's) and onnxruntime's run. Also the VM's pool allocations in a steady-state run.
With --dynamic, a "dyn" row runs the VM on the model imported with its batch dim dynamic
(shape programs, kernels specialised at run time, no weight packing: AlterOpLayout chooses
per static shape) against the static graph executor at the same shape.
"""
from __future__ import annotations

import argparse
import copy
import os
import sys

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from benchmarks.model_cpu_time import interleaved_medians, load  # noqa: E402
from compiler import relay  # noqa: E402
from compiler.transform import PassContext  # noqa: E402
from runtime import cpu, graph_executor, threadpool  # noqa: E402
from runtime.vm import VirtualMachine  # noqa: E402

DEFAULT_MODELS = ("squeezenet", "resnet50", "gen_mlp_b1")


def dynamic_batch(model):
    """The model with its inputs' leading dim declared dynamic ("batch"), so the VM runs it
    through shape programs and kernels specialised at run time."""
    model = copy.deepcopy(model)
    initializers = {t.name for t in model.graph.initializer}
    for info in model.graph.input:
        dims = info.type.tensor_type.shape.dim
        if info.name not in initializers and dims:
            dims[0].dim_param = "batch"
    return model


def measure(name: str, rounds: int, dynamic: bool = False) -> dict:
    model, feeds = load(name)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    mod, params = relay.frontend.from_onnx(model)
    with PassContext(opt_level=3):
        factory = relay.build(mod, target="llvm", params=params)
        if dynamic:
            mod, params = relay.frontend.from_onnx(dynamic_batch(model))
        exe = relay.vm.compile(mod, target="llvm", params=params)
    threadpool.set_num_threads(1)
    gm = graph_executor.GraphModule(factory["default"](cpu()))
    gm.set_input(**feeds)
    vm = VirtualMachine(exe, cpu())
    vm.set_input("main", **feeds)
    gm.run()
    for _ in range(2):  # the second run's result takes new storage: the first's is held
        vm.invoke_stateful("main")
    for i, expected in enumerate(want):
        np.testing.assert_allclose(gm.get_output(i).numpy(), expected, rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(vm.get_outputs()[i].numpy(), expected, rtol=1e-3, atol=1e-3)
    before = vm.pool.stats()["system_allocations"]
    times = interleaved_medians({"graph": gm.run, "vm": lambda: vm.invoke_stateful("main"),
                                 "ort": lambda: sess.run(None, feeds)}, rounds)
    times["new_allocations"] = vm.pool.stats()["system_allocations"] - before
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", default=list(DEFAULT_MODELS),
                    help="generated model names, light model names or ONNX files")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--dynamic", action="store_true",
                    help="also the VM on each model with a dynamic batch dim (relay.Any)")
    args = ap.parse_args()
    print(f"{'model':<14} {'graph ms':>9} {'vm ms':>9} {'ort ms':>9} {'vm/graph':>9} "
          f"{'vm/ort':>7} {'graph/ort':>9} {'new allocs':>10}")
    for name in args.models:
        for dynamic in (False, True) if args.dynamic else (False,):
            label = f"{name}{' dyn' if dynamic else ''}"
            try:
                t = measure(name, args.rounds, dynamic)
            except Exception as err:  # noqa: BLE001 - report and go on to the next row
                print(f"{label:<14} {type(err).__name__}: {str(err)[:150]}", flush=True)
                continue
            print(f"{label:<14} {t['graph']:>9.4g} {t['vm']:>9.4g} {t['ort']:>9.4g} "
                  f"{t['vm'] / t['graph']:>9.3f} {t['vm'] / t['ort']:>7.3f} "
                  f"{t['graph'] / t['ort']:>9.3f} {t['new_allocations']:>10}", flush=True)


if __name__ == "__main__":
    main()
