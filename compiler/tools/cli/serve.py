"""`relayjit serve model.rjit`: an exported module behind a Ray Serve HTTP endpoint
(runtime.serving) until Ctrl-C; `pip install 'relayjit[serve]'` brings Ray. Replicas load it
with compiler.tools.session.load_model, so a model with dynamic axes (a dynamic artefact, or
an ONNX file) takes requests of any valid shape, each new shape compiled on first sight."""
from __future__ import annotations

import argparse
import signal
import sys
import time

from compiler.tools.session import load_model
from runtime import serving
from runtime.thread_config import check_thread_count


def _count(text: str) -> int:
    try:
        return check_thread_count(int(text), "the count")
    except (TypeError, ValueError) as err:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r} ({err})")


def add_parser(sub) -> None:
    p = sub.add_parser("serve", help="serve a .rjit module over HTTP on Ray Serve")
    p.add_argument("model", help="the module file (.rjit) written by `relayjit compile` (or an "
                                 "ONNX model, compiled by each replica)")
    p.add_argument("--replicas", type=_count, default=1,
                   help="replicas (processes) behind the endpoint, each loading the module "
                        "once (default: 1)")
    p.add_argument("--threads", type=_count, default=1,
                   help="kernel threads per replica; each replica reserves as many Ray CPUs "
                        "(default: 1)")
    p.add_argument("--port", type=int, default=8000, help="HTTP port (default: 8000)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1; 0.0.0.0 for every interface)")
    p.add_argument("--address", help='join this Ray cluster ("auto", or "ray://HOST:PORT") '
                                     "instead of starting a local Ray instance")
    p.set_defaults(func=command)


def command(args) -> int:
    try:
        import ray  # noqa: F401  (only to say clearly when it is missing)
    except ImportError:
        print("relayjit: error: serving needs Ray: pip install 'relayjit[serve]'", file=sys.stderr)
        return 2
    # Ctrl-C and a supervisor's SIGTERM both stop cleanly (SIGINT is ignored when started
    # in the background by a non-interactive shell, so install Python's handler explicitly)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    server = serving.start(args.model, replicas=args.replicas, port=args.port,
                           threads=args.threads, address=args.address, host=args.host,
                           loader=load_model)
    try:
        print(f"serving {args.model} with {args.replicas} replica(s) x {args.threads} "
              f"thread(s) at {server.url}  (POST inputs as JSON or .npz; GET "
              f"{server.url}metadata, {server.url}healthz); Ctrl-C stops", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("stopping", file=sys.stderr)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut it short
        server.stop()
    return 0
