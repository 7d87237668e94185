"""tvm.testing: what TVM's test files and tutorials call (assert_allclose, the target lists and
markers, parameter/fixture, main). Only the CPU is enabled: GPU-marked tests are skipped."""
from __future__ import annotations

import inspect
import sys
from typing import Any, Callable

import numpy as np

from runtime import cpu
from runtime.unsupported import missing_names

_CPU_KINDS = ("llvm", "c")


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 1e-7,
                    verbose: bool = True) -> None:
    """numpy's assert_allclose on NDArrays or arrays, with TVM's defaults and a shape check."""
    actual, desired = np.asanyarray(actual), np.asanyarray(desired)
    np.testing.assert_allclose(actual.shape, desired.shape)
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, verbose=verbose)


def _kind(target: Any) -> str:
    return str(getattr(target, "kind", target)).split()[0] if target is not None else ""


def device_enabled(target: Any) -> bool:
    """True for the CPU kinds relayjit builds for ("llvm", "c"), False for every other."""
    return _kind(target) in _CPU_KINDS


def enabled_targets() -> list[tuple[str, Any]]:
    """[(target, device)] that tests may run on: the host CPU only."""
    return [("llvm", cpu(0))]


def _pytest():
    import pytest  # a test-time dependency only, not needed to import compiler
    return pytest


def parametrize_targets(*targets: Any) -> Callable:
    """Run a test(target, dev) once per enabled target (of `targets` when given)."""
    def wrap(func: Callable) -> Callable:
        chosen = list(targets) or [t for t, _ in enabled_targets()]
        params = [(t, cpu(0)) if device_enabled(t) else
                  _pytest().param(t, None, marks=_pytest().mark.skip(f"{t}: not a CPU target"))
                  for t in chosen]
        return _pytest().mark.parametrize("target,dev", params)(func)
    if len(targets) == 1 and callable(targets[0]):
        func, targets = targets[0], ()
        return wrap(func)
    return wrap


def _skip_all(reason: str) -> Callable:
    def mark(func: Callable) -> Callable:
        return _pytest().mark.skip(reason=reason)(func)
    return mark


def requires_llvm(func: Callable) -> Callable:
    """LLVM is always there: the test runs."""
    return func


uses_gpu = requires_llvm  # marks a test that also runs on GPUs: here it runs on the CPU
requires_gpu = requires_cuda = requires_opencl = requires_vulkan = requires_metal = \
    _skip_all("relayjit builds for the CPU only")


def parameter(*values: Any, ids: Any = None) -> Any:
    """A fixture taking each of `values` in turn (named by the variable it is assigned to)."""
    def fixture(request):
        return request.param
    return _pytest().fixture(params=list(values), ids=ids)(fixture)


def fixture(func: Callable | None = None, *, cache_return_value: bool = False) -> Any:
    """pytest.fixture (the returned value is recomputed per test either way)."""
    if func is None:
        return lambda f: _pytest().fixture(f)
    return _pytest().fixture(func)


def main() -> None:
    """Run the calling test file under pytest, as TVM test files end with."""
    caller = inspect.stack()[1].filename
    sys.exit(_pytest().main([caller] + sys.argv[1:]))


__getattr__ = missing_names(__name__, {
    "parameters": "use pytest.mark.parametrize with tuples of values",
    "known_failing_targets": "only the CPU target exists; skip with pytest.mark.skip",
    "check_numerical_grads": "relayjit has no automatic differentiation (relay.transform.gradient)",
    "requires_cudagraph": "relayjit builds for the CPU only",
    "requires_tensorcore": "relayjit builds for the CPU only",
})
