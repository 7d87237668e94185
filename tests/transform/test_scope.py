"""One mechanism behind `with Target(...)` and `with PassContext(...)` (compiler.transform.Scope,
a ContextVar stack): each thread and each asyncio task sees its own current target and
context, nested scopes restore the outer one, and exiting out of order is refused."""
from __future__ import annotations

import asyncio
import threading

import pytest

from compiler.errors import CompilerError
from compiler.target import Target
from compiler.transform import PassContext


def test_nested_scopes_restore_the_outer_one():
    assert Target.current() is None
    with Target("llvm") as outer:
        with Target("llvm -mcpu=x86-64-v3") as inner, PassContext(opt_level=1) as ctx:
            assert Target.current() is inner and PassContext.current() is ctx
        assert Target.current() is outer and PassContext.current().opt_level == 2
    assert Target.current() is None


def test_each_thread_sees_its_own_scopes():
    seen, ready, release = {}, threading.Event(), threading.Event()

    def worker():
        with Target("llvm -mcpu=x86-64-v3"), PassContext(opt_level=0):
            ready.set()
            release.wait(10)
            seen["target"], seen["opt"] = str(Target.current()), PassContext.current().opt_level

    with Target("llvm"), PassContext(opt_level=3):
        thread = threading.Thread(target=worker)
        thread.start()
        ready.wait(10)
        assert Target.current().mcpu == "" and PassContext.current().opt_level == 3
        release.set()
        thread.join()
    assert "x86-64-v3" in seen["target"] and seen["opt"] == 0


def test_each_asyncio_task_sees_its_own_scopes():
    async def task(opt_level: int) -> int:
        with PassContext(opt_level=opt_level):
            await asyncio.sleep(0.01)  # the other task enters its context meanwhile
            return PassContext.current().opt_level

    async def both():
        return await asyncio.gather(task(0), task(3))

    assert asyncio.run(both()) == [0, 3]


def test_exiting_out_of_order_is_refused():
    outer, inner = Target("llvm"), Target("llvm -mcpu=x86-64-v3")
    outer.__enter__()
    inner.__enter__()
    try:
        with pytest.raises(CompilerError, match="Target exited out of order"):
            outer.__exit__(None, None, None)
    finally:
        inner.__exit__(None, None, None)
        outer.__exit__(None, None, None)
    assert Target.current() is None
