"""Issue 26 text forms TVM writes: `def @id[A](%x: A) -> A` type parameters, polymorphic calls
of let-bound functions, and the `#[metadata]` section holding the constants."""
from __future__ import annotations

import base64
import json

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.error import DiagnosticError
from runtime.params import save_ndarray


def test_square_bracket_type_params():
    mod = tvm.parser.parse("""
    #[version = "0.0.5"]
    def @id[A](%x: A) -> A { %x }
    def @main(%y: Tensor[(2), float32]) { @id(%y) }
    """)
    a = relay.TypeVar("A")
    x = relay.var("x", a)
    expected_id = relay.Function([x], x, a, [a])
    tvm.ir.assert_structural_equal(mod["id"], relay.transform.InferType()(
        tvm.IRModule.from_expr(expected_id))["main"])
    assert mod["main"].checked_type.ret_type == relay.TensorType((2,), "float32")


def test_polymorphic_let_bound_function_called_at_two_types():
    mod = tvm.parser.parse("""
    def @main(%y: Tensor[(2), float32]) {
      let %f = fn [A](%x: A) -> A { %x };
      (%f(%y), %f(1))
    }
    """)
    assert mod["main"].checked_type.ret_type == relay.TupleType(
        [relay.TensorType((2,), "float32"), relay.TensorType((), "int32")])


def _tvm_text(value: np.ndarray, root_key: str = "relay.Constant", data: str = "0") -> str:
    nodes = [{"type_key": ""},
             {"type_key": "Map", "keys": [root_key], "data": [2]},
             {"type_key": "Array", "data": [3]},
             {"type_key": "relay.Constant",
              "attrs": {"_checked_type_": "0", "data": data, "span": "0"}}]
    meta = {"root": 1, "nodes": nodes,
            "b64ndarrays": [base64.b64encode(save_ndarray(value)).decode()],
            "attrs": {"tvm_version": "0.19.0"}}
    return ('#[version = "0.0.5"]\n'
            "def @main(%x: Tensor[(3, 5), float32]) {\n"
            "  multiply(%x, meta[relay.Constant][0])\n"
            "}\n\n#[metadata]\n" + json.dumps(meta, indent=2))


def test_metadata_section_gives_the_constants():
    scale = np.linspace(0, 1, 5, dtype="float32")
    mod = tvm.parser.parse(_tvm_text(scale))
    x = relay.var("x", shape=(3, 5))
    expected = relay.Function([x], relay.multiply(x, relay.const(scale)))
    tvm.ir.assert_structural_equal(mod["main"], relay.transform.InferType()(
        tvm.IRModule.from_expr(expected))["main"])


@pytest.mark.parametrize("kwargs, says", [
    ({"root_key": "relay.Function"}, "only relay.Constant is read"),
    ({"data": "7"}, "bad array reference '7'"),
])
def test_bad_metadata_is_a_diagnostic(kwargs, says):
    with pytest.raises(DiagnosticError, match=says):
        tvm.parser.parse(_tvm_text(np.ones(5, "float32"), **kwargs))


def test_functions_differing_only_in_type_param_names_are_equal():
    def identity(name):
        a = relay.TypeVar(name)
        x = relay.var("x", a)
        return relay.Function([x], x, a, [a])
    assert tvm.ir.structural_equal(identity("v1"), identity("v2"))
    assert tvm.ir.structural_hash(identity("v1")) == tvm.ir.structural_hash(identity("v2"))
    a, b = relay.TypeVar("A"), relay.TypeVar("B")
    x, y = relay.var("x", a), relay.var("y", b)
    first = relay.Function([x, y], x, a, [a, b])
    x2, y2 = relay.var("x", a), relay.var("y", b)
    second = relay.Function([x2, y2], y2, b, [a, b])  # returns the other parameter
    assert not tvm.ir.structural_equal(first, second)
