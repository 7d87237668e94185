"""Shared pytest setup.

- faulthandler on, so a crash in native code shows a Python traceback;
- the persistent compile cache (codegen.cache) goes to a temporary directory for the session,
  never to the user's ~/.cache/relayjit (subprocesses the tests start inherit it).
"""
import atexit
import faulthandler
import os
import shutil
import tempfile

faulthandler.enable()

_CACHE_DIR = tempfile.mkdtemp(prefix="relayjit-test-cache-")
os.environ["RELAYJIT_CACHE_DIR"] = _CACHE_DIR
atexit.register(shutil.rmtree, _CACHE_DIR, True)
