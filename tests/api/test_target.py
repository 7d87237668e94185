"""compiler.target.Target, as tvm.target.Target: parsing, printing, scope, use in builds."""
import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from compiler.errors import CompilerError
from compiler.target import Target, TargetError
from runtime import graph_executor


def test_plain_llvm():
    t = tvm.target.Target("llvm")
    assert t.kind.name == "llvm"
    assert t.keys == ["cpu"]
    assert t.attrs == {}
    assert t.mcpu == "" and t.mattr == []
    assert str(t) == "llvm -keys=cpu"


def test_options_are_typed_and_printed_sorted():
    t = Target("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake -mattr=+avx2,-avx512f "
               "-num-cores=4 -system-lib")
    assert t.mcpu == "skylake"
    assert t.mattr == ["+avx2", "-avx512f"]
    assert t.mtriple == "x86_64-linux-gnu"
    assert t.attrs["num-cores"] == 4 and t.attrs["system-lib"] is True
    assert str(t) == ("llvm -keys=cpu -mattr=+avx2,-avx512f -mcpu=skylake "
                      "-mtriple=x86_64-linux-gnu -num-cores=4 -system-lib=1")
    assert Target(str(t)) == t


def test_dict_json_and_copy_forms_are_equal():
    from_string = Target("llvm -mcpu=x86-64-v3 -mattr=+avx2")
    from_dict = Target({"kind": "llvm", "mcpu": "x86-64-v3", "mattr": ["+avx2"]})
    from_json = Target('{"kind": "llvm", "mcpu": "x86-64-v3", "mattr": ["+avx2"]}')
    assert from_string == from_dict == from_json == Target(from_dict)
    assert hash(from_string) == hash(from_dict)
    assert from_string != Target("llvm")
    assert from_string == "llvm -mcpu=x86-64-v3 -mattr=+avx2"
    assert from_string != "cuda"
    assert Target(from_string.export()) == from_string


def test_c_is_a_cpu_kind():
    t = Target("c")
    assert t.kind.name == "c" and t.keys == ["cpu"]
    assert t != Target("llvm")


def test_device_joins_the_keys():
    t = Target("llvm -device=arm_cpu")
    assert t.keys == ["arm_cpu", "cpu"]
    assert str(t) == "llvm -keys=arm_cpu,cpu -device=arm_cpu"
    assert Target(str(t)) == t


def test_host():
    t = Target("llvm", host="llvm -mcpu=skylake")
    assert t.host.mcpu == "skylake"
    assert t != Target("llvm")
    assert Target({"kind": "llvm", "host": {"kind": "llvm"}}).host == Target("llvm")


def test_current_and_scope_nesting():
    assert Target.current() is None
    with pytest.raises(TargetError, match="no target is in scope"):
        Target.current(allow_none=False)
    with Target("llvm") as outer:
        assert Target.current() is outer
        with Target("llvm -mcpu=skylake") as inner:
            assert Target.current() is inner
        assert Target.current() is outer
    assert Target.current() is None


@pytest.mark.parametrize("text,match", [
    ("cuda", "target 'cuda' is not supported: relayjit compiles for the CPU"),
    ("opencl -device=mali", "target 'opencl' is not supported"),
    ("llvm -nosuch=1", "target attribute 'nosuch' is not known"),
    ("llvm -num-cores=four", "'num-cores' expects an integer, got 'four'"),
    ("llvm mcpu", "option 'mcpu' must look like -key=value"),
    ("", "target string is empty"),
    ("{not json", "is not valid JSON"),
])
def test_bad_targets_are_clear_errors(text, match):
    with pytest.raises(TargetError, match=match):
        Target(text)


def test_bad_argument_types():
    with pytest.raises(TargetError, match="Target expects a string, a dict or a Target"):
        Target(3)
    with pytest.raises(TargetError, match="has no 'kind'"):
        Target({"mcpu": "skylake"})
    assert issubclass(TargetError, CompilerError) and issubclass(TargetError, ValueError)


def _add_one():
    x = relay.var("x", shape=(4,))
    return tvm.IRModule.from_expr(relay.Function([x], relay.add(x, relay.const(1.0))))


def _run(factory):
    gmod = graph_executor.GraphModule(factory["default"](tvm.cpu(0)))
    gmod.run(x=np.arange(4, dtype="float32"))
    return gmod.get_output(0).numpy()


@pytest.mark.parametrize("target", ["llvm", Target("llvm"), Target("c"),
                                    {"kind": "llvm"}, None])
def test_build_accepts_every_target_form(target):
    factory = relay.build(_add_one(), target=target)
    np.testing.assert_allclose(_run(factory), np.arange(4) + 1.0)
    assert factory.target.kind.name in ("llvm", "c")


def test_build_uses_the_target_in_scope():
    seen = []
    with Target("llvm -mcpu=x86-64-v3"):
        factory = relay.build(_add_one())
        seen.append(Target.current())
    assert factory.target.mcpu == "x86-64-v3"
    assert seen[0].mcpu == "x86-64-v3"
    np.testing.assert_allclose(_run(factory), np.arange(4) + 1.0)


def test_build_rejects_a_gpu_target():
    with pytest.raises(TargetError, match="target 'cuda' is not supported"):
        relay.build(_add_one(), target=Target({"kind": "llvm"}).export() | {"kind": "cuda"})


@pytest.mark.parametrize("kind", ["graph", "debug"])
def test_create_executor_accepts_a_target(kind):
    mod = _add_one()
    run = relay.create_executor(kind, mod=mod, target=Target("llvm")).evaluate()
    np.testing.assert_allclose(run(np.arange(4, dtype="float32")).numpy(), np.arange(4) + 1.0)
    with pytest.raises(TargetError, match="not supported"):
        relay.create_executor(kind, mod=mod, target="cuda")


def test_fold_constant_under_a_target_scope():
    c = relay.add(relay.const(np.ones(3, "float32")), relay.const(2.0))
    mod = tvm.IRModule.from_expr(relay.Function([], c))
    with Target("llvm -mcpu=skylake"):
        folded = relay.transform.FoldConstant()(mod)
    body = folded["main"].body
    assert isinstance(body, relay.Constant)
    np.testing.assert_allclose(body.data.numpy(), np.full(3, 3.0))
