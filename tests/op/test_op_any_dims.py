"""Every registered op with dynamic (Any) dims, read from the registry: each type relation
accepts an Any in every input position (or says clearly that the input must be static), and
its result is the static result with some dims unknown; each op's shape function (derived
from the relation, or declared) agrees with the relation on random concrete shapes, and its
run-time checks reject exactly the shapes the relation rejects."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import CompilerError, TypeInferenceError
from compiler.ir.dims import Any
from compiler.ir.expr import Function, var
from compiler.ir.types import TensorType, TupleType
from compiler.op.registry import get_def, list_ops, make_attrs, make_call
from compiler.op.shape_func import flatten_types, shape_program
from compiler.ir.type_infer import InferTypeLocal
from runtime.shape_program import ShapeError, ShapeProgram
from tests.op.op_examples import EXAMPLES

IDS = [f"{e.op}-{i}" for i, e in enumerate(EXAMPLES)]


def _relation(example, args):
    opdef = get_def(example.op)
    return opdef.type_rel(list(args), make_attrs(opdef, example.attrs))


def _with_dims(ty, fields_dims):
    """ty (a tensor or a tuple of them) with each field's shape replaced."""
    if isinstance(ty, TupleType):
        return TupleType([TensorType(d, f.dtype) for f, d in zip(ty.fields, fields_dims)])
    return TensorType(fields_dims[0], ty.dtype)


def _dynamic(ty, which=None, keep_ones=False):
    """ty with its dims (all, or only the (field, dim) in `which`) made Any."""
    fields = flatten_types(ty)
    dims = [[Any() if (which is None or (f, j) in which) and not (keep_ones and d == 1) else d
             for j, d in enumerate(t.shape)] for f, t in enumerate(fields)]
    return _with_dims(ty, dims)


def _says_static(err: Exception) -> bool:
    return isinstance(err, TypeInferenceError) and "static" in str(err)


def _fits(static, dynamic) -> bool:
    """dynamic is static with some dims replaced by Any (same structure, ranks, dtypes)."""
    a, b = flatten_types(static), flatten_types(dynamic)
    return len(a) == len(b) and all(
        x.dtype == y.dtype and len(x.shape) == len(y.shape) and
        all(isinstance(q, Any) or q == p for p, q in zip(x.shape, y.shape))
        for x, y in zip(a, b))


@pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
def test_relation_accepts_any_in_every_position(example):
    static = _relation(example, example.args)
    for i, arg in enumerate(example.args):
        if i in example.static_args:
            continue
        fields = flatten_types(arg)
        spots = [(f, j) for f, t in enumerate(fields) for j in range(len(t.shape))]
        for spot in spots + ["all"]:
            args = list(example.args)
            args[i] = _dynamic(arg, None if spot == "all" else {spot}, example.keep_ones)
            try:
                out = _relation(example, args)
            except Exception as err:  # noqa: BLE001 - the assertion says which
                assert _says_static(err), f"{example.op} arg {i} {spot}: {type(err).__name__}: {err}"
                continue
            assert _fits(static, out), f"{example.op} arg {i} {spot}: {out} vs static {static}"


def _program_of(example):
    """The shape program of a function calling the op on dynamic params (inputs whose Any
    form the op refuses stay static), and the params' types."""
    types = []
    for i, arg in enumerate(example.args):
        dyn = arg if i in example.static_args else _dynamic(arg, keep_ones=example.keep_ones)
        if dyn is not arg:
            args = list(example.args)
            args[i] = dyn
            try:
                _relation(example, args)
            except TypeInferenceError as err:
                if not _says_static(err):
                    raise
                dyn = arg
        types.append(dyn)
    params = [var(f"p{i}", t) for i, t in enumerate(types)]
    func = Function(params, make_call(example.op, params, **example.attrs))
    InferTypeLocal(func)
    return shape_program(func), types


def _perturb(rng, shape, dynamic, keep_ones):
    """shape with its dynamic dims changed at random (never to 1 under keep_ones: a dynamic
    dim squeeze keeps must not be 1, which the program checks)."""
    out = []
    for d, dyn in zip(shape, dynamic):
        if not dyn:
            out.append(int(d))
            continue
        pick = rng.integers(6)
        value = [int(d), 1, int(d) + 1, 2 * int(d), int(rng.integers(1, 9)), int(d)][pick]
        out.append(value + 1 if keep_ones and value == 1 else value)
    return tuple(out)


def _expected_shapes(example, shapes, rng):
    """The output shapes at these input shapes: the relation's, or for an op whose shapes
    depend on values (example.values), those of its reference run on random data."""
    it = iter(shapes)
    if not example.values:
        args = [_with_dims(a, [next(it) for _ in flatten_types(a)]) for a in example.args]
        return [tuple(t.shape) for t in flatten_types(_relation(example, args))]
    inputs = []
    for i, arg in enumerate(example.args):
        if i in example.values:
            next(it)
            inputs.append(example.values[i])
            continue
        arrays = [rng.integers(0, 3, size=next(it)).astype(t.dtype)
                  for t in flatten_types(arg)]
        inputs.append(tuple(arrays) if isinstance(arg, TupleType) else arrays[0])
    opdef = get_def(example.op)
    out = opdef.reference(inputs, make_attrs(opdef, example.attrs))
    return [tuple(o.shape) for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
def test_shape_function_agrees_with_the_relation(example):
    prog, types = _program_of(example)
    prog = ShapeProgram.from_json(prog.to_json())  # what the VM loads
    concrete = [t for a in example.args for t in flatten_types(a)]
    dyn_flags = [[isinstance(d, Any) for d in t.shape] for ty in types
                 for t in flatten_types(ty)]
    values = {prog_index: example.values[i] for prog_index, i in
              enumerate(i for i, a in enumerate(example.args) for _ in flatten_types(a))
              if i in example.values}
    rng = np.random.default_rng(sum(map(ord, example.op)))
    base = [t.shape for t in concrete]
    assert prog.evaluate(base, values) == _expected_shapes(example, base, rng)
    for _ in range(25):
        shapes = [_perturb(rng, t.shape, f, example.keep_ones) for t, f in zip(concrete, dyn_flags)]
        try:
            want = _expected_shapes(example, shapes, rng)
        except (CompilerError, ValueError, TypeError, ZeroDivisionError, IndexError) as err:
            with pytest.raises(ShapeError):
                got = prog.evaluate(shapes, values)
                raise AssertionError(f"{example.op}: the relation rejects {shapes} ({err}) but "
                                     f"the shape program gives {got}")
            continue
        assert prog.evaluate(shapes, values) == want, f"{example.op} on {shapes}"


def test_every_op_has_an_example():
    missing = sorted(set(list_ops()) - {e.op for e in EXAMPLES})
    assert not missing, f"ops without an entry in tests/op/op_examples.py: {missing}"
