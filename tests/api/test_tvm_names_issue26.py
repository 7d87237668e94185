"""Issue 26: names TVM code still reaches for, each working or saying what to use instead:
relay.build(executor=, runtime=) with relay.backend objects, relay.annotation.on_device,
relay.SourceName, and the knowingly missing ADT and bit-serial names."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.errors import CompilerError
from runtime import graph_executor


def _mod():
    x = relay.var("x", shape=(2, 3))
    return tvm.IRModule.from_expr(relay.Function([x], relay.exp(x)))


def test_build_takes_executor_and_runtime_objects():
    lib = relay.build(_mod(), target="llvm", executor=relay.backend.Executor("graph"),
                      runtime=relay.backend.Runtime("cpp"))
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    x = np.arange(6, dtype="float32").reshape(2, 3)
    m.run(x=x)
    np.testing.assert_allclose(m.get_output(0).numpy(), np.exp(x), rtol=1e-6)
    assert relay.build(_mod(), executor="graph", runtime="cpp") is not None


@pytest.mark.parametrize("make, says", [
    (lambda: relay.backend.Executor("aot"), "use 'graph', or relay.vm.compile"),
    (lambda: relay.backend.Runtime("crt"), "use 'cpp'"),
    (lambda: relay.backend.Executor("graph", {"link-params": True}),
     "relay.FuseOps.link_params"),
    (lambda: relay.backend.Executor("nope"), "expected one of \\['aot', 'graph'\\]"),
    (lambda: relay.build(_mod(), executor=3), "expects relay.backend.Executor"),
])
def test_executor_and_runtime_kinds_relayjit_lacks_are_refused(make, says):
    with pytest.raises(CompilerError, match=says):
        make()


def test_on_device_places_nothing_on_one_cpu():
    x = relay.var("x", shape=(2,))
    body = relay.exp(x)
    assert relay.annotation.on_device(body, tvm.cpu()) is body
    assert relay.annotation.on_device(body, "cpu", constrain_result=True) is body
    func = relay.Function([x], body)
    assert relay.annotation.function_on_device(func, [tvm.cpu()], tvm.cpu()) is func
    with pytest.raises(CompilerError, match="is not the CPU"):
        relay.annotation.on_device(body, "cuda")


def test_source_name_and_span():
    name = relay.SourceName("model.py")
    assert relay.Span(name, 1, 1, 1, 5).source_name is name


@pytest.mark.parametrize("where, name, says", [
    (relay, "Match", "algebraic data types are not supported"),
    (relay, "Prelude", "algebraic data types"),
    (relay.nn, "bitpack", "relay.quantize"),
    (relay.nn, "correlation", "not implemented"),
    (relay.backend, "te_compiler", "relayjit inspect"),
    (tvm.ir, "EnvFunc", "register_func"),
])
def test_knowingly_missing_names_say_what_to_use(where, name, says):
    with pytest.raises(AttributeError, match=says):
        getattr(where, name)


def test_prelude_and_type_definitions_are_refused_by_name():
    with pytest.raises(NotImplementedError, match="algebraic data types"):
        tvm.IRModule().import_from_std("core.rly")
    with pytest.raises(NotImplementedError, match="type definitions"):
        tvm.IRModule({}, type_definitions={"List": object()})
    assert tvm.IRModule({}, type_definitions={}).functions == {}
