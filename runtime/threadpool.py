"""The kernel thread count at run time (runtime.threadpool.set_num_threads(4)).

The pool itself is native code (runtime/native.ll); 1 thread means no worker threads at all.
The starting count comes from the environment (runtime/thread_config.py).
"""
from __future__ import annotations

from .native import native_support
from .thread_config import available_cores, check_thread_count, num_threads_from_env

__all__ = ["get_num_threads", "set_num_threads", "num_worker_threads", "available_cores",
           "num_threads_from_env"]


def get_num_threads() -> int:
    """Threads the kernels run on (the caller's thread included)."""
    return native_support().get_threads()


def set_num_threads(n: int) -> None:
    """Run kernels on n threads from now on (waits for a running parallel loop to finish)."""
    native_support().set_threads(check_thread_count(n, "set_num_threads(n)"))


def num_worker_threads() -> int:
    """Worker threads alive now (they start at the first parallel loop, stop on a change)."""
    return native_support().num_workers()
