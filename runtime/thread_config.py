"""How many threads the kernels use by default: RELAYJIT_NUM_THREADS, then TVM_NUM_THREADS,
else the cores this process may run on; and the check every thread count passes."""
from __future__ import annotations

import os

ENV_VARS = ("RELAYJIT_NUM_THREADS", "TVM_NUM_THREADS")
MAX_THREADS = 1024  # size of the pool's thread table


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def check_thread_count(n: object, what: str = "thread count") -> int:
    """n itself when it is an int in [1, MAX_THREADS], else a TypeError/ValueError naming `what`."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{what} must be an int number of threads, got {n!r}")
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(f"{what} must be between 1 and {MAX_THREADS}, got {n}")
    return n


def num_threads_from_env() -> int:
    """The thread count the environment asks for (the first variable of ENV_VARS that is set),
    or the available cores."""
    for name in ENV_VARS:
        value = os.environ.get(name)
        if value is None or value.strip() == "":
            continue
        try:
            n = int(value.strip())
        except ValueError:
            raise ValueError(f"environment variable {name} must be a whole number of threads "
                             f">= 1, got {value!r}") from None
        return check_thread_count(n, f"environment variable {name}")
    return available_cores()
