"""Test helper: compile one op (or a small Relay function) through lowering + JIT and compare
with the registry's numpy reference. Kernels are cached by op, attrs, shapes and dtypes."""
from __future__ import annotations

import itertools

import numpy as np

from codegen.jit import build_library
from compiler.driver.build import current_options
from compiler.op.compute.lower_function import lower_primitive_function
from compiler.ir.expr import Function, Tuple, var
from compiler.ir.types import TensorType, TupleType
from compiler.op.registry import get_def, make_call
from compiler.ir.type_infer import InferTypeLocal

_KERNELS: dict = {}
_ids = itertools.count()
TESTED_OPS: set[str] = set()
_BUILT_OPS: set[str] = set()  # ops already checked once through relay.build end to end


def _flat_types(ty) -> list:
    if isinstance(ty, TupleType):
        return [t for f in ty.fields for t in _flat_types(f)]
    return [ty]


def compile_function(params: list, body, key=None):
    """Lower + build a Primitive function; returns run(*arrays) -> list of outputs."""
    options = current_options()  # as relay.build would now ($RELAYJIT_VECTOR_WIDTH, ...)
    key = key if key is None else (key, options)
    if key is not None and key in _KERNELS:
        return _KERNELS[key]
    func = Function(params, body).with_attr("Primitive", 1)
    InferTypeLocal(func)
    name = f"kernel_{next(_ids)}"
    prim = lower_primitive_function(func, name, options)
    lib = build_library([prim], options=options)
    kernel = lib[name]
    out_types = _flat_types(func.body.checked_type)

    def run(*arrays):
        outs = [np.empty(t.shape, dtype=t.dtype) for t in out_types]
        kernel(*[np.ascontiguousarray(a) for a in arrays], *outs)
        return outs

    run.primfunc = prim
    run.lib = lib
    if key is not None:
        _KERNELS[key] = run
    return run


def _var_for(name: str, a):
    if isinstance(a, (tuple, list)):
        vs = [var(f"{name}_{i}", TensorType(x.shape, str(x.dtype))) for i, x in enumerate(a)]
        return Tuple(vs), vs
    v = var(name, TensorType(a.shape, str(a.dtype)))
    return v, [v]


def run_op(op: str, inputs: list, **attrs):
    """(kernel outputs, reference outputs) of op applied to numpy inputs with attrs."""
    TESTED_OPS.add(op)
    args, params = [], []
    for k, a in enumerate(inputs):
        arg, vs = _var_for(f"in{k}", a)
        args.append(arg)
        params.extend(vs)
    call = make_call(op, args, **attrs)
    flat_inputs = [x for a in inputs for x in (a if isinstance(a, (tuple, list)) else [a])]
    key = (op, tuple(sorted((k, repr(v)) for k, v in attrs.items())),
           tuple((x.shape, str(x.dtype)) for x in flat_inputs),
           tuple(len(a) if isinstance(a, (tuple, list)) else -1 for a in inputs))
    run = compile_function(params, call, key)
    got = run(*flat_inputs)
    if op not in _BUILT_OPS:
        _BUILT_OPS.add(op)
        _check_through_build(op, params, call, flat_inputs, got)
    ref_inputs = [tuple(a) if isinstance(a, (tuple, list)) else a for a in inputs]
    ref = get_def(op).reference(ref_inputs, call.attrs)
    ref = list(ref) if isinstance(ref, tuple) else [ref]
    return got, [np.asarray(r) for r in ref]


def _check_through_build(op: str, params: list, call, inputs: list, kernel_outputs: list):
    """The first case of each op also runs through relay.build + the graph executor, which
    must agree with the directly lowered kernel (same compute rule, but the real driver:
    passes, graph codegen, memory planning, argument marshalling)."""
    import runtime
    from compiler import relay
    from runtime import graph_executor
    factory = relay.build(Function(params, call), target="llvm")
    gmod = graph_executor.GraphModule(factory["default"](runtime.cpu()))
    gmod.run(**{p.name_hint: x for p, x in zip(params, inputs)})
    assert gmod.get_num_outputs() == len(kernel_outputs), f"{op}: outputs through relay.build"
    for k, want in enumerate(kernel_outputs):
        assert_close(gmod.get_output(k).numpy(), want, what=f"{op} output {k} via relay.build")


def assert_close(got: np.ndarray, ref: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6,
                 what: str = "") -> None:
    """Exact for ints/bools; relative+absolute tolerance for floats, NaN == NaN."""
    assert got.shape == ref.shape, f"{what}: shape {got.shape} vs reference {ref.shape}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} vs reference {ref.dtype}"
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, ref, err_msg=what)


def check_op(op: str, inputs: list, rtol: float = 1e-5, atol: float = 1e-6, **attrs) -> None:
    """Run op and compare every output with the reference."""
    got, ref = run_op(op, inputs, **attrs)
    assert len(got) == len(ref), f"{op}: {len(got)} outputs vs reference {len(ref)}"
    for k, (g, r) in enumerate(zip(got, ref)):
        assert_close(g, r, rtol, atol, what=f"{op} output {k} attrs={attrs}")


def rand(shape, dtype="float32", seed=0, lo=-3.0, hi=3.0) -> np.ndarray:
    """Random data of a dtype: uniform floats, ints in a small range, bools."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.uniform(lo, hi, size=shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, int(lo * 10)), min(info.max, int(hi * 10)) + 1,
                        size=shape).astype(dt)
