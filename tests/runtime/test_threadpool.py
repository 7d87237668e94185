"""The native thread pool and the executor under threads: thread count from the environment and
at run time, two modules from one library in two Python threads, fork, exit, no leaked threads."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import runtime
from compiler import relay
from compiler.ir.module import IRModule
from compiler.transform import PassContext
from runtime import KernelError, graph_executor, threadpool

from tests.schedule_helpers import host

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.default_rng(3)


pytestmark = pytest.mark.usefixtures("keep_thread_count")


def _os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.fixture(scope="module")
def cnn():
    """conv (large heap scratch) -> relu -> dense: the kernels that kept static scratch once."""
    x = relay.var("x", shape=(1, 32, 40, 40))
    w = relay.const(RNG.standard_normal((64, 32, 3, 3)).astype("f4") * 0.1)
    d = relay.const(RNG.standard_normal((10, 64 * 40 * 40)).astype("f4") * 0.01)
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))
    out = relay.nn.dense(relay.reshape(y, (1, -1)), d)
    with PassContext(opt_level=3):
        return relay.build(IRModule.from_expr(relay.Function([x], out)), target="llvm")


def _module(lib):
    return graph_executor.GraphModule(lib["default"](runtime.cpu()))


def _expected(lib, x):
    threadpool.set_num_threads(1)
    m = _module(lib)
    m.run(x=x)
    return m.get_output(0).numpy()


def test_thread_count_at_run_time():
    threadpool.set_num_threads(3)
    assert threadpool.get_num_threads() == 3
    threadpool.set_num_threads(1)
    assert threadpool.get_num_threads() == 1
    assert threadpool.num_worker_threads() == 0
    for bad in (0, -2, 1025):
        with pytest.raises(ValueError, match="set_num_threads"):
            threadpool.set_num_threads(bad)
    for bad in ("2", 2.0, None):
        with pytest.raises(TypeError, match="set_num_threads"):
            threadpool.set_num_threads(bad)
    assert threadpool.get_num_threads() == 1


def test_results_equal_at_every_thread_count_and_no_leaked_threads(cnn):
    x = RNG.standard_normal((1, 32, 40, 40)).astype("f4")
    expected = _expected(cnn, x)
    threadpool.set_num_threads(1)
    baseline = _os_threads()
    m = _module(cnn)
    for t in (2, 3, 8, 2):
        threadpool.set_num_threads(t)
        m.run(x=x)
        np.testing.assert_array_equal(m.get_output(0).numpy(), expected)
        assert threadpool.num_worker_threads() == t - 1
        assert _os_threads() == baseline + t - 1
    threadpool.set_num_threads(1)
    assert threadpool.num_worker_threads() == 0
    assert _os_threads() == baseline


def test_idle_workers_block_instead_of_spinning(cnn):
    threadpool.set_num_threads(2)
    m = _module(cnn)
    m.run(x=np.zeros((1, 32, 40, 40), "f4"))
    assert threadpool.num_worker_threads() == 1
    time.sleep(0.1)  # past the spin phase (well under a millisecond of spinning)
    cpu = time.process_time()  # CPU time of every thread of the process
    time.sleep(0.4)
    assert time.process_time() - cpu < 0.05


def test_two_modules_from_one_library_in_two_python_threads(cnn):
    inputs = [RNG.standard_normal((1, 32, 40, 40)).astype("f4") for _ in range(2)]
    expected = [_expected(cnn, x) for x in inputs]
    threadpool.set_num_threads(2)
    modules = [_module(cnn) for _ in inputs]
    errors: list[str] = []
    start = threading.Barrier(2)

    def worker(k: int) -> None:
        start.wait()
        for i in range(25):
            modules[k].run(x=inputs[k])
            if not np.array_equal(modules[k].get_output(0).numpy(), expected[k]):
                errors.append(f"module {k}, run {i}: wrong result")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []


def test_the_gil_is_released_while_kernels_run(cnn):
    """A Python thread makes progress while another thread runs kernels."""
    threadpool.set_num_threads(1)
    m = _module(cnn)
    x = RNG.standard_normal((1, 32, 40, 40)).astype("f4")
    m.run(x=x)
    done = threading.Event()
    ticks = []

    def spin():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0)

    t = threading.Thread(target=spin)
    t.start()
    try:
        start = time.perf_counter()
        while time.perf_counter() - start < 0.3:
            m.module.run()  # no Python between kernel calls: only native code runs here
    finally:
        done.set()
        t.join()
    assert len(ticks) > 50


def _run_script(body: str, env: dict | None = None, timeout: float = 120):
    code = textwrap.dedent(body)
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("value", ["0", "-1", "abc", "2.5"])
def test_bad_thread_count_in_environment_is_a_clear_error(value):
    proc = _run_script("""
        from runtime import threadpool
        threadpool.get_num_threads()
    """, {"RELAYJIT_NUM_THREADS": value})
    assert proc.returncode != 0
    assert "RELAYJIT_NUM_THREADS" in proc.stderr and repr(value) in proc.stderr \
        or "between 1 and" in proc.stderr, proc.stderr


def test_thread_count_from_environment():
    script = "from runtime import threadpool; print(threadpool.get_num_threads())"
    env = {"RELAYJIT_NUM_THREADS": "", "TVM_NUM_THREADS": "3"}
    assert _run_script(script, env).stdout.strip() == "3"
    env = {"RELAYJIT_NUM_THREADS": "5", "TVM_NUM_THREADS": "3"}
    assert _run_script(script, env).stdout.strip() == "5"
    env = {"RELAYJIT_NUM_THREADS": "", "TVM_NUM_THREADS": ""}
    assert _run_script(script, env).stdout.strip() == str(threadpool.available_cores())


def test_fork_after_use_gives_a_working_pool_in_the_child(cnn):
    x = RNG.standard_normal((1, 32, 40, 40)).astype("f4")
    expected = _expected(cnn, x)
    threadpool.set_num_threads(2)
    m = _module(cnn)
    m.run(x=x)  # workers are running now
    assert threadpool.num_worker_threads() == 1
    pid = os.fork()
    if pid == 0:  # child: must not hang on the parent's (absent) workers
        code = 1
        try:
            m.run(x=x)
            ok = np.array_equal(m.get_output(0).numpy(), expected)
            code = 0 if ok and threadpool.num_worker_threads() == 1 else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("forked child hung running the module")
        time.sleep(0.02)
    assert os.waitstatus_to_exitcode(status) == 0
    m.run(x=x)  # the parent's pool is untouched
    np.testing.assert_array_equal(m.get_output(0).numpy(), expected)


def test_exit_with_live_workers_neither_hangs_nor_crashes():
    proc = _run_script("""
        import numpy as np
        from codegen import te
        from codegen.jit import build_te
        from runtime import threadpool
        threadpool.set_num_threads(4)
        a = te.placeholder((1 << 18,), name="a")
        run = build_te([a], [te.compute(a.shape, lambda i: a[i] + 1.0, name="b")])
        x = np.ones(1 << 18, "f4")
        assert (run(x)[0] == 2).all()
        assert threadpool.num_worker_threads() == 3
        print("ran")
    """, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ran"


def test_failing_kernel_in_a_parallel_loop_names_the_graph_node():
    """A chunk whose scratch cannot be allocated fails; run() says which node."""
    from codegen.jit import build_library
    from codegen.tir.expr import Load, Var
    from codegen.schedules.common import imm
    from codegen.tir.stmt import Allocate, Buffer, For, PrimFunc, Store, seq
    from tests.runtime import _runtime_kernels as K

    a, b = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    i, j = Var("i", "int64"), Var("j", "int64")
    huge = Buffer("huge", (1 << 46,), "float32")  # 256 TiB: aligned_alloc fails
    # a nested parallel loop hands `huge` to the pool, so LLVM cannot drop the allocation
    fill = For(j, 2, Store(huge, (j,), Load(a, (i,), "float32")), "parallel")
    body = Allocate(huge, seq(fill, Store(b, (i,), Load(huge, (imm(0),), "float32") + 1.0)))
    func = PrimFunc("greedy", (a, b), For(i, 4, body, "parallel"))
    lib = build_library([func], options=host())
    nodes = [K.null("x"), K.op("hungry_node", "greedy", [[0, 0, 0]])]
    threadpool.set_num_threads(2)
    m = graph_executor.create(K.graph(nodes, [[1, 0]], [[4], [4]], [0, 1]), lib, runtime.cpu())
    m.set_input("x", np.zeros(4, "f4"))
    with pytest.raises(KernelError, match="'hungry_node'.*out of memory"):
        m.run()
