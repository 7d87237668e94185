"""Bad input is a clear exception naming the thing, with expected versus got (never a crash or a
silent wrong answer): arity, unknown ops, attributes, shapes, bind, PassContext misuse."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.errors import CompilerError, TypeInferenceError
from compiler.op.registry import get_op, make_call
from compiler.passes.bind import BindError
from compiler.transform import PassContext

X = relay.var("x", shape=(2, 3))
Y = relay.var("y", shape=(3, 2))


def infer(*params_and_body):
    *params, body = params_and_body
    return relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function(params, body)))


def test_wrong_arity():
    with pytest.raises(CompilerError, match=r"add takes 2 argument\(s\), got 1"):
        make_call("add", [X])
    with pytest.raises(TypeInferenceError, match=r"add takes 2 argument\(s\), got 1"):
        infer(X, relay.Call(get_op("add"), [X]))


def test_unknown_op_name():
    with pytest.raises(CompilerError, match="unknown op 'addd'; did you mean add"):
        relay.op.get("addd")
    with pytest.raises(CompilerError, match="unknown op 'addd'"):
        infer(X, relay.Call(relay.Op("addd"), [X, X]))


def test_op_nodes_are_interned():
    assert relay.Op("add") is relay.op.get("add") is relay.add(X, X).op
    with pytest.raises(TypeError, match="Op name must be a str"):
        relay.Op(3)


def test_bad_attribute():
    with pytest.raises(CompilerError, match=r"nn.conv2d has no attribute 'stride'; its "
                                            r"attributes are \['strides'"):
        make_call("nn.conv2d", [X, Y], stride=(1, 1))
    with pytest.raises(TypeInferenceError, match=r"newshape \(\) gives \(\) \(1 elements\), but "
                                                 r"the input \(2, 3\) has 6 elements"):
        infer(X, make_call("reshape", [X]))
    with pytest.raises(TypeInferenceError, match=r"sum rejects .*axis=5 is out of range"):
        infer(X, relay.sum(X, axis=5))


def test_shape_mismatch():
    with pytest.raises(TypeInferenceError,
                       match=r"add rejects .*\(2, 3\) and \(3, 2\) cannot be broadcast"):
        infer(X, Y, relay.add(X, Y))
    with pytest.raises(TypeInferenceError, match=r"Tensor\[\(2, 3\), float32\]"):
        infer(X, Y, relay.nn.dense(X, relay.var("w", shape=(4, 5))))


def test_bind_a_name_no_parameter_has():
    func = relay.Function([X], X)
    with pytest.raises(BindError, match=r"cannot bind 'z'.*expected one of \['x'\]"):
        relay.bind(func, {"z": np.ones((2, 3), "float32")})
    # bind_params_by_name ignores unknown names (as TVM), but checks the shape of known ones
    assert relay.build_module.bind_params_by_name(func, {"z": np.ones(1)}) is func
    with pytest.raises(BindError, match=r"'x' expects Tensor\[\(2, 3\), float32\], got "
                                        r"Tensor\[\(3, 3\), float32\]"):
        relay.build_module.bind_params_by_name(func, {"x": np.ones((3, 3), "float32")})


def test_pass_context_misuse():
    with pytest.raises(TypeError, match="opt_level must be an int, got str 'high'"):
        PassContext(opt_level="high")
    with pytest.raises(TypeError, match="required_pass must be a list/tuple/set"):
        PassContext(required_pass="FoldConstant")
    with pytest.raises(CompilerError, match="unknown key 'relay.FuseOps.nope'.*did you mean"):
        PassContext(config={"relay.FuseOps.nope": 1})
    with pytest.raises(CompilerError, match="'relay.FuseOps.max_depth' expects int, got str"):
        PassContext(config={"relay.FuseOps.max_depth": "a"})
    with pytest.raises(CompilerError, match="exited out of order"):
        PassContext().__exit__(None, None, None)
    outer, inner = PassContext(opt_level=1), PassContext(opt_level=2)
    with outer:
        inner.__enter__()
        with pytest.raises(CompilerError, match="exited out of order"):
            outer.__exit__(None, None, None)
        inner.__exit__(None, None, None)
    with pytest.raises(TypeError, match=r"instruments\[0\]: expected a PassInstrument"):
        PassContext(instruments=[3])
    with pytest.raises(ValueError, match="opt_level is missing"):
        tvm.transform.module_pass(lambda mod, ctx: mod)
    with pytest.raises(TypeError, match="expected an IRModule, got Function"):
        relay.transform.InferType()(relay.Function([X], X))


def test_create_executor_misuse():
    with pytest.raises(CompilerError, match="kind must be 'debug', 'graph' or 'vm', got 'aot'"):
        relay.create_executor("aot")
    with pytest.raises(CompilerError, match="give an expression or create the executor"):
        relay.create_executor("debug").evaluate()
    run = relay.create_executor("debug").evaluate(relay.Function([X], X))
    with pytest.raises(CompilerError, match=r"argument 'x' expects \(2, 3\) float32, got "
                                            r"\(3,\) float32"):
        run(np.ones(3, "float32"))
