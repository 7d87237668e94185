"""A client of `relayjit serve`: random inputs from GET /metadata, POSTed as .npz by concurrent
clients; prints throughput and latency (how the README's serving figures were measured).

    relayjit serve model.rjit --replicas 2 --threads 1 --port 8000 &
    python examples/ray_serve_client.py http://127.0.0.1:8000/ --requests 400 --concurrency 8

Failed requests (connection errors, 5xx) are retried up to --retries times, as a client of a
service whose replicas may restart should; 4xx answers are reported and not retried.
"""
from __future__ import annotations

import argparse
import io
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import requests

NPZ_TYPE = "application/x-npz"


def random_request(metadata: dict, rng: np.random.Generator) -> bytes:
    """An .npz body with random inputs (one sample when the model batches)."""
    arrays = {}
    for name, spec in metadata["inputs"].items():
        shape = spec["shape"]
        if metadata["batch_size"] > 1:
            shape = [1, *shape[1:]]
        arrays[name] = rng.standard_normal(shape).astype(spec["dtype"])
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def post(session: requests.Session, url: str, body: bytes, retries: int) -> float:
    """Seconds the request took (retries included); raises after the last failed attempt."""
    start = time.perf_counter()
    for attempt in range(retries + 1):
        try:
            r = session.post(url, data=body, headers={"Content-Type": NPZ_TYPE}, timeout=60)
            if r.status_code < 500:
                break
        except requests.ConnectionError:
            if attempt == retries:
                raise
        time.sleep(0.1 * (attempt + 1))
    if r.status_code != 200:
        raise RuntimeError(f"HTTP {r.status_code}: {r.text}")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the server's URL, as `relayjit serve` prints it")
    parser.add_argument("--requests", type=int, default=400, help="requests timed (default: 400)")
    parser.add_argument("--concurrency", type=int, default=8,
                        help="clients sending at once (default: 8)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed requests first")
    parser.add_argument("--retries", type=int, default=3)
    args = parser.parse_args(argv)

    url = args.url.rstrip("/") + "/"
    metadata = requests.get(url + "metadata", timeout=60).json()
    bodies = [random_request(metadata, np.random.default_rng(k)) for k in range(16)]
    local = threading.local()

    def one(k: int) -> float:
        if not hasattr(local, "session"):
            local.session = requests.Session()
        return post(local.session, url, bodies[k % len(bodies)], args.retries)

    with ThreadPoolExecutor(args.concurrency) as pool:
        list(pool.map(one, range(args.warmup)))
        start = time.perf_counter()
        latencies = sorted(pool.map(one, range(args.requests)))
        seconds = time.perf_counter() - start
    p50, p99 = (latencies[int(q * (len(latencies) - 1))] * 1e3 for q in (0.5, 0.99))
    print(f"{args.requests} requests, {args.concurrency} concurrent: "
          f"{args.requests / seconds:.1f} requests/s, latency p50 {p50:.1f} ms, p99 {p99:.1f} ms "
          f"({metadata['threads']} kernel thread(s) per replica)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
