"""nn.contrib_recurrent_layer and its weight packing, lowered and run against the registry's
numpy reference: every mode, both directions, plain and packed weights, hidden sizes that
pad the panels, several batch rows with sequence lengths, the parallel product, and the
scalar compute rule (no vectors)."""
from __future__ import annotations

import numpy as np
import pytest

from codegen.jit import build_library
from codegen.options import CodegenOptions
from codegen.parallel import ParallelPolicy
from codegen.schedules.recurrent import resolve_recurrent
from compiler.ir.expr import Function, var
from compiler.ir.type_infer import InferTypeLocal
from compiler.ir.types import TensorType
from compiler.op.compute.lower_function import lower_primitive_function
from compiler.op.nn_recurrent import GATES, contrib_recurrent_layer
from compiler.op.registry import get_def, make_attrs

OPS_TESTED = {"nn.contrib_recurrent_layer", "nn.contrib_recurrent_weight_pack"}
PACK = "nn.contrib_recurrent_weight_pack"
RNG = np.random.default_rng(25)


def _build(args: list, body, options: CodegenOptions):
    func = Function(args, body).with_attr("Primitive", 1)
    InferTypeLocal(func)
    prim = lower_primitive_function(func, "recurrent_test", options)
    kernel = build_library([prim], options=options)["recurrent_test"]
    ty = func.body.checked_type
    types = list(ty.fields) if hasattr(ty, "fields") else [ty]

    def run(*arrays):
        outs = [np.empty(t.shape, t.dtype) for t in types]
        kernel(*[np.ascontiguousarray(a) for a in arrays], *outs)
        return outs
    return run


def _pack(r: np.ndarray, gates: int, block: int) -> np.ndarray:
    opdef = get_def(PACK)
    return opdef.reference([r], make_attrs(opdef, {"gates": gates, "block": block}))


def _case(mode, steps, batch, hidden, lens=None):
    g = GATES[mode]
    f32 = lambda *s: (RNG.standard_normal(s) * 0.5).astype(np.float32)  # noqa: E731
    lens = np.full(batch, steps, np.int32) if lens is None else np.asarray(lens, np.int32)
    return [f32(steps, batch, g * hidden), f32(g * hidden, hidden), f32(batch, hidden),
            f32(batch, hidden), f32(g * hidden), f32(3 * hidden), lens]


def _check(mode, arrays, options, block=0, **attrs):
    hidden = arrays[2].shape[1]
    if block:
        arrays = [arrays[0], _pack(arrays[1], GATES[mode], block), *arrays[2:]]
    params = [var(f"a{i}", TensorType(a.shape, str(a.dtype))) for i, a in enumerate(arrays)]
    body = contrib_recurrent_layer(*params, mode=mode, hidden_size=hidden,
                                   weight_block=block, **attrs)
    got = _build(params, body, options)(*arrays)
    opdef = get_def(body.op.name)
    want = opdef.reference(arrays, body.attrs)
    for i, (o, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(o, w, rtol=2e-5, atol=2e-5, err_msg=f"output {i}")


FAST = CodegenOptions.host()


@pytest.mark.parametrize("mode,attrs", [
    ("LSTM", {}), ("LSTM", {"input_forget": 1, "clip": 0.8}),
    ("GRU", {"linear_before_reset": 1}), ("GRU", {"linear_before_reset": 0}),
    ("RNN", {"activations": ("relu",)}),
])
@pytest.mark.parametrize("hidden", [20, 40, 64])
@pytest.mark.parametrize("reverse", [False, True])
def test_layer_matches_reference(mode, attrs, hidden, reverse):
    arrays = _case(mode, 5, 3, hidden, lens=[5, 2, 0])
    block = resolve_recurrent(hidden, FAST).tile_columns
    for packed in (0, block):
        _check(mode, arrays, FAST, packed, reverse=reverse, **attrs)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_parallel_products_and_one_panel_calls(mode):
    """Every step's product split over threads (forced for a small layer), one panel a
    micro-kernel call; and the scalar rule without vectors, plain and packed."""
    arrays = _case(mode, 5, 2, 48)
    for pool in (0, 1, 3):  # the backward steps walk each of `pool` threads' panels
        forced = CodegenOptions.host(parallel=ParallelPolicy(min_thread_ns=1, pool_threads=pool),
                                     schedule_config={"recurrent.gemv": {"panels": 1}})
        _check(mode, arrays, forced, resolve_recurrent(48, forced).tile_columns)
    straight = CodegenOptions.host(schedule_config={"recurrent.gemv": {"alternate": False}})
    _check(mode, arrays, straight, resolve_recurrent(48, straight).tile_columns)
    scalar = CodegenOptions.host(vectorize=False)
    _check(mode, arrays, scalar)
    _check(mode, arrays, scalar, 16, reverse=True)


def test_weight_pack_compute_matches_reference():
    r = (RNG.standard_normal((3 * 20, 20))).astype(np.float32)
    param = var("r", TensorType(r.shape, "float32"))
    from compiler.op.nn_recurrent import contrib_recurrent_weight_pack
    got = _build([param], contrib_recurrent_weight_pack(param, 3, 16), FAST)(r)[0]
    want = _pack(r, 3, 16)
    assert got.shape == (6, 20, 16)
    np.testing.assert_array_equal(got, want)
    assert not want[1, :, 4:].any()  # the columns past H are zero


def test_relation_refuses_mismatched_weights_and_activations():
    from compiler.errors import TypeInferenceError
    args = [var(f"a{i}", TensorType(a.shape, str(a.dtype)))
            for i, a in enumerate(_case("GRU", 3, 1, 8))]
    with pytest.raises(TypeInferenceError, match="xw must be float32"):
        InferTypeLocal(Function(args, contrib_recurrent_layer(*args, mode="LSTM",
                                                              hidden_size=8)))
    with pytest.raises(TypeInferenceError, match="activations"):
        InferTypeLocal(Function(args, contrib_recurrent_layer(
            *args, mode="GRU", hidden_size=8, activations=("sigmoid",))))
