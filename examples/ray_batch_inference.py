"""Batch inference with Ray Data: run a compiled model over a directory of inputs.

    relayjit compile model.onnx --target "llvm -mcpu=x86-64-v3" -o model.rjit
    python examples/ray_batch_inference.py model.rjit inputs/ outputs/ --actors 2 --threads 1

Each input file is one request: a .npy (for a model with one input) or a .npz holding every
input by name, shaped as the model's inputs (or one sample of them, leading dimension 1, for a
model compiled for a batch size > 1: samples are then run batch-size at a time). Every output
file is outputs/<input name>.npz with output_0, output_1, ... `--generate N` first writes N
random inputs into the input directory, for a quick try.

Ray Data's map_batches hands the file names to a pool of actors; each actor loads the module
once (from bytes read here, so a cluster's nodes need no copy of the file; they do need the
input and output directories) and checks every input as the Python API does. Needs
`pip install 'relayjit[serve]'` (Ray Data).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import ray

from runtime.serving import ModelService


class Predictor:
    """One per Ray Data actor: the loaded module, applied to batches of file names."""

    def __init__(self, module_bytes: bytes, threads: int, output_dir: str) -> None:
        self.service = ModelService.from_bytes(module_bytes, threads)
        self.output_dir = output_dir

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        requests = [read_inputs(str(path), self.service) for path in batch["path"]]
        samples = [k for k, arrays in enumerate(requests) if self.service.is_sample(arrays)]
        outputs: list = [None] * len(requests)
        for k, result in zip(samples, self.service.run_samples([requests[k] for k in samples])):
            outputs[k] = result
        for k, arrays in enumerate(requests):
            if outputs[k] is None:
                outputs[k] = self.service.run(arrays)
        written = []
        for path, result in zip(batch["path"], outputs):
            stem = os.path.splitext(os.path.basename(str(path)))[0]
            out = os.path.join(self.output_dir, stem + ".npz")
            np.savez(out, **{f"output_{i}": value for i, value in enumerate(result)})
            written.append(out)
        return {"path": batch["path"], "output": np.array(written)}


def read_inputs(path: str, service: ModelService) -> dict[str, np.ndarray]:
    """A file's input arrays, checked against the model (ValueError naming the file)."""
    try:
        if path.endswith(".npz"):
            with np.load(path, allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in npz.files}
        else:
            if len(service.inputs) != 1:
                raise ValueError(f"a .npy holds one array; the model takes "
                                 f"{list(service.inputs)}: use .npz")
            arrays = {next(iter(service.inputs)): np.load(path, allow_pickle=False)}
        service.check(arrays)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    return arrays


def generate_inputs(service: ModelService, directory: str, count: int) -> None:
    """`count` random single-sample inputs (.npz) for the model."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(0)
    for k in range(count):
        arrays = {}
        for name, (shape, dtype) in service.inputs.items():
            if service.batch_size > 1:
                shape = (1, *shape[1:])
            arrays[name] = rng.standard_normal(shape).astype(dtype)
        np.savez(os.path.join(directory, f"input_{k:05d}.npz"), **arrays)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="the compiled model (.rjit)")
    parser.add_argument("input_dir", help="directory of .npy/.npz inputs")
    parser.add_argument("output_dir", help="directory the .npz outputs are written to")
    parser.add_argument("--actors", type=int, default=2, help="actors (default: 2)")
    parser.add_argument("--threads", type=int, default=1,
                        help="kernel threads per actor; each reserves as many CPUs (default: 1)")
    parser.add_argument("--batch-size", type=int, default=64,
                        help="files per map_batches call (default: 64)")
    parser.add_argument("--generate", type=int, metavar="N",
                        help="first write N random inputs into input_dir")
    parser.add_argument("--address", help="join this Ray cluster instead of starting one")
    args = parser.parse_args(argv)

    local = ModelService(args.module)  # checks the file (and this CPU) before Ray starts
    if args.generate:
        generate_inputs(local, args.input_dir, args.generate)
    files = sorted(os.path.abspath(os.path.join(args.input_dir, n))
                   for n in os.listdir(args.input_dir) if n.endswith((".npy", ".npz")))
    if not files:
        print(f"no .npy or .npz files in {args.input_dir}", file=sys.stderr)
        return 2
    os.makedirs(args.output_dir, exist_ok=True)
    with open(args.module, "rb") as f:
        module_bytes = f.read()

    ray.init(address=args.address, include_dashboard=False, logging_level="warning")
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        start = time.perf_counter()
        ds = ray.data.from_items([{"path": p} for p in files])
        ds = ds.map_batches(Predictor, fn_constructor_args=(module_bytes, args.threads,
                                                            os.path.abspath(args.output_dir)),
                            batch_size=args.batch_size, concurrency=args.actors,
                            num_cpus=args.threads)
        written = sum(len(batch["output"]) for batch in ds.iter_batches(batch_size=None))
        seconds = time.perf_counter() - start
    finally:
        ray.shutdown()
    print(f"{written} inputs -> {args.output_dir} in {seconds:.2f} s: "
          f"{written / seconds:.1f} inputs/s with {args.actors} actor(s) x {args.threads} "
          f"thread(s) (Ray start-up excluded, actor start-up included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
