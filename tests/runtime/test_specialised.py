"""runtime.specialised and graph executors that share their params: executors of one model
at several shapes read one copy of equal weights, in place, and never write them."""
from __future__ import annotations

import numpy as np
import pytest

import runtime
from compiler import relay
from runtime.specialised import SpecialisedModel, TensorSpec, bind_signature

W = np.random.default_rng(0).standard_normal((16, 8)).astype("float32")


def _dense_factory(rows: int):
    """relu(x[rows, 16] @ W + 1) with W a param (p0 after binding)."""
    x = relay.var("x", shape=(rows, 16))
    w = relay.var("w", shape=(8, 16))
    body = relay.nn.relu(relay.add(relay.nn.dense(x, w), relay.const(1.0)))
    return relay.build(relay.Function([x, w], body), target="llvm", params={"w": W.T.copy()})


def _expected(x):
    return np.maximum(x @ W + 1, 0)


def test_shared_params_are_read_in_place_and_cannot_be_set():
    factory = _dense_factory(4)
    copied = factory.create()
    shared = factory.create(share_params=True)
    assert shared.shared_names and not copied.shared_names
    for name in shared.shared_names:
        param = factory.params[name]._view()
        assert np.shares_memory(shared.input_array(shared.resolve_input(name)), param)
        assert not np.shares_memory(copied.input_array(copied.resolve_input(name)), param)
        with pytest.raises(ValueError, match="shares with others"):
            shared.set_input(name, param)
    x = np.random.default_rng(1).standard_normal((4, 16)).astype("float32")
    for ex in (copied, shared):
        ex.set_input("x", x)
        ex.run()
        np.testing.assert_allclose(ex.output_array(0), _expected(x), rtol=1e-5, atol=1e-5)


def test_equal_params_of_two_shapes_are_one_array():
    model = SpecialisedModel([TensorSpec("x", ("rows", 16), "float32")],
                             [TensorSpec("y", ("rows", 8), "float32")],
                             lambda shapes: _dense_factory(shapes["x"][0]))
    for rows in (3, 5, 3):
        x = np.random.default_rng(rows).standard_normal((rows, 16)).astype("float32")
        np.testing.assert_allclose(model.run({"x": x})[0], _expected(x), rtol=1e-5, atol=1e-5)
    first, second = model.modules()
    assert (model.builds, model.hits) == (2, 1)
    pointers = [{v.data_ptr for v in f.params.values()} for f in (first, second)]
    assert pointers[0] == pointers[1]  # the second build's weights point at the first's


def test_without_a_builder_only_the_modules_given_run():
    model = SpecialisedModel([TensorSpec("x", (None, 16), "float32")], [], None)
    model.add(((2, 16),), _dense_factory(2))
    x = np.ones((2, 16), "float32")
    np.testing.assert_allclose(model.run({"x": x})[0], _expected(x), rtol=1e-5)
    with pytest.raises(ValueError, match=r"loaded without a compiler.*x \(3, 16\).*"
                                         r"compiler.load"):
        model.run({"x": np.ones((3, 16), "float32")})


def test_bind_signature_accepts_free_dims_and_ndarrays():
    specs = [TensorSpec("a", (None, 2), "float32"), TensorSpec("b", None, "int64")]
    signature, arrays = bind_signature(specs, {"a": runtime.nd.array(np.ones((5, 2), "float32")),
                                               "b": np.zeros((1, 2, 3), np.int64)})
    assert signature == ((5, 2), (1, 2, 3)) and arrays[0].shape == (5, 2)
    with pytest.raises(TypeError, match="dict of name -> array"):
        bind_signature(specs, [np.ones(2)])
