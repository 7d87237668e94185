"""Run time of a model built as one object (1 compile job) versus one object per job (2).

    nice python benchmarks/experiments/split_objects_runtime.py resnet50 densenet121 --rounds 15

Both libraries are built in this process with the disk cache off (RELAYJIT_COMPILE_JOBS=1,
then 2); the graph executors then run at one thread, interleaved round by round, each run
timed with time.thread_time() (CPU time of this thread, so other processes on the shared
machine disturb it less than wall time), and onnxruntime (intra_op_num_threads=1) runs
beside them as the reference. Prints the medians and the outputs' largest difference (the
kernels are the same code split differently, so the outputs must be identical).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def _build(model, jobs: str):
    from codegen import jit
    from compiler import relay
    from compiler.transform import PassContext

    os.environ["RELAYJIT_COMPILE_JOBS"] = jobs
    jit.clear_cache()
    mod, params = relay.frontend.from_onnx(model)
    config = {"relayjit.disable_disk_cache": True}
    with PassContext(opt_level=3, config=config):
        factory = relay.build(mod, params=params)
    return factory


def compare(name: str, rounds: int) -> None:
    import numpy as np
    import onnx
    import onnxruntime as ort

    from compiler.tools.model_zoo import light_model_path
    from runtime import cpu, graph_executor

    path = light_model_path(name)
    model = onnx.load(path)
    feeds = {}
    weights = {init.name for init in model.graph.initializer}
    for inp in (i for i in model.graph.input if i.name not in weights):
        dims = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        feeds[inp.name] = np.random.default_rng(0).standard_normal(dims).astype("float32")
    modules, objects = {}, {}
    for jobs in ("1", "2"):
        factory = _build(model, jobs)
        objects[jobs] = len(factory.get_lib().objects)
        gmod = graph_executor.GraphModule(factory["default"](cpu(0)))
        gmod.set_input(**feeds)
        modules[jobs] = gmod
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    runners = {f"{jobs} job(s), {objects[jobs]} object(s)": modules[jobs].run
               for jobs in modules}
    runners["onnxruntime"] = lambda: session.run(None, feeds)
    times = {label: [] for label in runners}
    for run in runners.values():
        run()  # warm up
    for _ in range(rounds):
        for label, run in runners.items():
            start = time.thread_time()
            run()
            times[label].append(time.thread_time() - start)
    outs = [modules[j].get_output(0).numpy() for j in modules]
    print(f"{name}: median ms over {rounds} interleaved rounds (thread CPU time, 1 thread); "
          f"outputs differ by {float(np.max(np.abs(outs[0] - outs[1]))):g}")
    for label, values in times.items():
        print(f"  {label:<26} {1000 * statistics.median(values):8.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=["resnet50", "densenet121"])
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args()
    os.environ.setdefault("RELAYJIT_NUM_THREADS", "1")
    for name in args.models:
        compare(name, args.rounds)


if __name__ == "__main__":
    main()
