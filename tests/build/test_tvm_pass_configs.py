"""TVM's PassContext config keys that relay.build accepts are honoured, or refused with a
message naming what relayjit does instead; never accepted and ignored."""
from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

import compiler as tvm
from compiler import relay
from codegen import jit
from codegen.microkernel_objects import microkernels_called
from compiler.driver.build import build_target, lower_module, optimize
from compiler.errors import CompilerError
from compiler.target import Target
from runtime import cpu, graph_executor


def _twin_branches():
    """Two structurally equal fused functions (sums of relu(x + 1) and relu(y + 1)) and
    their product (which a reduction does not fuse into)."""
    x = relay.var("x", shape=(4, 8))
    y = relay.var("y", shape=(4, 8))
    one = relay.const(np.float32(1.0))
    a = relay.sum(relay.nn.relu(relay.add(x, one)), axis=1)
    b = relay.sum(relay.nn.relu(relay.add(y, one)), axis=1)
    return relay.Function([x, y], relay.multiply(a, b))


def _build(func, **config):
    with tvm.transform.PassContext(opt_level=3, config=config):
        return relay.build(tvm.IRModule.from_expr(func), target="llvm")


def _kernel_calls(factory) -> list[str]:
    graph = json.loads(factory.get_graph_json())
    return [n["attrs"]["func_name"] for n in graph["nodes"] if n["op"] == "tvm_op"]


def _run(factory, **inputs) -> np.ndarray:
    gmod = graph_executor.GraphModule(factory["default"](cpu(0)))
    gmod.run(**inputs)
    return gmod.get_output(0).numpy()


@pytest.mark.parametrize("key, tuner", [("relay.backend.use_auto_scheduler", "auto-scheduler"),
                                        ("relay.backend.use_meta_schedule", "MetaSchedule")])
def test_a_tuner_setting_is_refused_with_what_relayjit_does_instead(key, tuner):
    with pytest.raises(CompilerError) as info:
        tvm.transform.PassContext(opt_level=3, config={key: True})
    message = str(info.value)
    assert key in message and tuner in message
    assert "built-in schedule heuristics" in message
    assert "autotvm.apply_history_best" in message


@pytest.mark.parametrize("key", ["relay.backend.use_auto_scheduler",
                                 "relay.backend.use_meta_schedule",
                                 "relay.backend.disable_compile_engine_cache",
                                 "tir.disable_vectorize"])
@pytest.mark.parametrize("value", [False, 0])
def test_a_setting_at_its_default_is_accepted_silently(key, value):
    func = _twin_branches()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        factory = _build(func, **{key: value})
    assert _kernel_calls(factory) == _kernel_calls(_build(func))


def test_disable_compile_engine_cache_gives_each_fused_function_its_own_kernel():
    func = _twin_branches()
    shared = _build(func)
    separate = _build(func, **{"relay.backend.disable_compile_engine_cache": True})
    calls_shared, calls_separate = _kernel_calls(shared), _kernel_calls(separate)
    assert len(calls_shared) == len(calls_separate)
    assert len(set(calls_separate)) == len(set(calls_shared)) + 1  # the twin has its own
    assert len(separate.get_lib().function_names) == len(shared.get_lib().function_names) + 1
    rng = np.random.default_rng(0)
    inputs = {"x": rng.standard_normal((4, 8), dtype="float32"),
              "y": rng.standard_normal((4, 8), dtype="float32")}
    np.testing.assert_array_equal(_run(separate, **inputs), _run(shared, **inputs))


def test_the_vm_compiler_honours_disable_compile_engine_cache_too():
    mod = tvm.IRModule.from_expr(_twin_branches())
    shared = relay.vm.compile(mod)
    with tvm.transform.PassContext(config={"relay.backend.disable_compile_engine_cache": True}):
        separate = relay.vm.compile(mod)
    assert len(separate.lib.function_names) == len(shared.lib.function_names) + 1


def _conv_net():
    """conv + relu, max pool, dense, softmax: every kind of vectorised schedule."""
    rng = np.random.default_rng(1)
    x = relay.var("x", shape=(1, 16, 14, 14))
    w = relay.const(rng.standard_normal((32, 16, 3, 3)).astype("float32"))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1), channels=32, kernel_size=(3, 3)))
    y = relay.nn.batch_flatten(relay.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2)))
    wd = relay.const(rng.standard_normal((10, 32 * 7 * 7)).astype("float32") * 0.05)
    return relay.Function([x], relay.nn.softmax(relay.nn.dense(y, wd)))


def _kernels(func, **config):
    """The PrimFuncs relay.build compiles for func under config, and its CodegenOptions."""
    with tvm.transform.PassContext(opt_level=3, config=config):
        with build_target(Target("llvm")) as options:
            main = optimize(tvm.IRModule.from_expr(func))["main"]
            return lower_module(main, options=options)[1], options


VECTOR_TYPE = re.compile(r"<\d+ x ")  # an LLVM vector type: <16 x float>


def test_disable_vectorize_builds_without_vector_code():
    func = _conv_net()
    vectorised, options = _kernels(func)
    assert microkernels_called(vectorised) and VECTOR_TYPE.search(
        jit.get_llvm_ir(vectorised, options=options))
    scalar, options = _kernels(func, **{"tir.disable_vectorize": True})
    assert microkernels_called(scalar) == []
    assert all(f.attrs.get("vectorize") is False for f in scalar)
    # none after LLVM's pipeline either
    assert not VECTOR_TYPE.search(jit.get_llvm_ir(scalar, options=options))
    x = np.random.default_rng(2).standard_normal((1, 16, 14, 14)).astype("float32")
    want = _run(_build(func), x=x)
    got = _run(_build(func, **{"tir.disable_vectorize": True}), x=x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
