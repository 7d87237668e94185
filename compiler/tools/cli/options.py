"""The options several subcommands take, and their argument types."""
from __future__ import annotations

import argparse

from runtime import threadpool
from runtime.thread_config import MAX_THREADS

MODEL_HELP = "the ONNX model (.onnx) or a module written by `relayjit compile` (.rjit)"
INPUT_HELP = ("an input value: NAME=FILE.npy, or FILE.npz holding arrays named after the "
              "inputs (repeatable); inputs not given are invented (arange(n)/n) and announced")


def _thread_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of threads, got {text!r}")
    if not 1 <= n <= MAX_THREADS:
        raise argparse.ArgumentTypeError(f"expected 1 to {MAX_THREADS} threads, got {n}")
    return n


def positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {n}")
    return n


def build_options(p: argparse.ArgumentParser, shapes: bool = True, target: bool = True) -> None:
    """--shape, --opt-level, --target and --quiet: how the model is compiled."""
    if shapes:
        p.add_argument("--shape", action="append", metavar="NAME=D1,D2,...",
                       help="static shape of an input (repeatable)")
    p.add_argument("--opt-level", type=int, default=3, choices=range(4),
                   help="optimisation level of the build, as PassContext(opt_level) "
                        "(default: 3)")
    if target:
        p.add_argument("--target", default="llvm",
                       help='compile for this target: "llvm" (the host CPU, the default) '
                            'or a TVM-style string such as "llvm -mcpu=x86-64-v3"')
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress display and no notes on stderr")


def input_option(p: argparse.ArgumentParser, prefix: str = "") -> None:
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy|FILE.npz",
                   help=prefix + INPUT_HELP)


def threads_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--threads", type=_thread_count, metavar="N",
                   help=f"{what} (default: $RELAYJIT_NUM_THREADS, $TVM_NUM_THREADS, or the "
                        "cores this process may use)")


def apply_threads(args) -> int:
    """Set the kernel thread count from --threads (if given); the count in force."""
    if args.threads is not None:
        threadpool.set_num_threads(args.threads)
    return threadpool.get_num_threads()


def timing_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timing", action="store_true",
                   help="print where the compile time went: frontend, each pass, lowering, "
                        "LLVM stages, kernel loading, memory planning; kernel and cache counts")


def json_option(p: argparse.ArgumentParser, keys: str) -> None:
    p.add_argument("--json", action="store_true",
                   help=f"print one JSON object on stdout instead of text; keys: {keys}")
