"""Shared pytest setup.

- faulthandler on, so a crash in native code shows a Python traceback;
- the persistent compile cache (codegen.cache) goes to a temporary directory for the session,
  never to the user's ~/.cache/relayjit (subprocesses the tests start inherit it);
- the build cache (compiler.driver.build_cache) is off, so every build runs its passes and asks the
  kernel cache as the tests expect; tests/build/test_build_cache.py turns it on.
- keep_thread_count: a fixture restoring the kernel thread count a test changed;
- width: a fixture running a test at both micro-kernel vector widths (8: AVX2 code, 16:
  AVX-512 code, skipped where the host has no AVX-512), through RELAYJIT_VECTOR_WIDTH (what
  relay.build reads); options: the CodegenOptions of the host at that width (what the
  schedules, the lowering and the passes take).
"""
import atexit
import faulthandler
import os
import shutil
import tempfile

import pytest

faulthandler.enable()

_CACHE_DIR = tempfile.mkdtemp(prefix="relayjit-test-cache-")
os.environ["RELAYJIT_CACHE_DIR"] = _CACHE_DIR
os.environ["RELAYJIT_BUILD_CACHE"] = "0"
atexit.register(shutil.rmtree, _CACHE_DIR, True)


@pytest.fixture
def keep_thread_count():
    """Tests that change the kernel thread count leave it as they found it."""
    from runtime import threadpool

    before = threadpool.get_num_threads()
    yield
    threadpool.set_num_threads(before)


@pytest.fixture(params=["8", "16"], ids=["avx2", "avx512"])
def width(request, monkeypatch):
    """Both micro-kernel widths (16-wide code runs only where the host has AVX-512)."""
    if request.param == "16":
        from runtime.target import host_info

        if "+avx512f" not in host_info().features.split(","):
            pytest.skip("host has no AVX-512")
    monkeypatch.setenv("RELAYJIT_VECTOR_WIDTH", request.param)
    return int(request.param)


@pytest.fixture
def options(width):
    """The host's CodegenOptions at the micro-kernel width of the `width` fixture."""
    from codegen.options import CodegenOptions

    return CodegenOptions.host(vector_width=width)
