"""Named CPUs (issue 26): `llvm -mcpu=skylake-avx512` / `core-avx2` / `znver3` ... build with
exactly the CPU's features from runtime.cpu_features (every other one LLVM knows disabled), so
the recorded features are complete for the load-time check; a CPU this machine cannot run
is refused at build time by name."""
from __future__ import annotations

import numpy as np
import pytest

import compiler as tvm
from codegen.options import CodegenOptions
from compiler import relay
from compiler.errors import CompilerError
from runtime import graph_executor
from runtime.cpu_features import named_cpu_features, named_cpus
from runtime.target import host_info, missing_features, resolve_cpu_target

pytestmark = pytest.mark.skipif(not host_info().triple.startswith("x86_64"),
                                reason="the named CPUs are x86-64 CPUs")
LLVM_FEATURES = {f[1:] for f in host_info().features.split(",") if f}


@pytest.mark.parametrize("cpu", named_cpus())
def test_every_named_feature_is_one_llvm_knows(cpu):
    assert set(named_cpu_features(cpu)) <= LLVM_FEATURES


def test_named_cpu_enables_exactly_its_features():
    info = resolve_cpu_target("skylake-avx512")
    assert info.cpu == "skylake-avx512"
    assert info.enabled_features() == named_cpu_features("skylake-avx512")
    assert {"avx512f", "avx512bw", "avx512vl", "fma"} <= set(info.enabled_features())
    assert "-avx512vnni" in info.features.split(",")  # cascadelake's, disabled explicitly
    assert "avx512vnni" in resolve_cpu_target("cascadelake").enabled_features()
    assert resolve_cpu_target("core-avx2") == resolve_cpu_target("haswell")


def test_vector_width_follows_the_named_cpu():
    assert CodegenOptions.for_cpu(resolve_cpu_target("skylake-avx512")).vector_width == 16
    assert CodegenOptions.for_cpu(resolve_cpu_target("core-avx2")).vector_width == 8
    assert CodegenOptions.for_cpu(resolve_cpu_target("znver3")).vector_width == 8


def _dense_net():
    x = relay.var("x", shape=(2, 32))
    w = np.random.RandomState(3).standard_normal((24, 32)).astype("float32")
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(
        relay.nn.dense(x, relay.const(w)))))
    return mod, w


@pytest.mark.parametrize("cpu", ["core-avx2", "skylake-avx512", "cascadelake",
                                 "icelake-server", "znver3"])
def test_build_for_a_named_cpu_runs_or_is_refused_by_name(cpu, tmp_path):
    mod, w = _dense_net()
    target = f"llvm -mcpu={cpu}"
    absent = missing_features(resolve_cpu_target(cpu).features)
    if absent:  # this machine cannot run the CPU's code: said at build time
        with pytest.raises(CompilerError, match=f"lacks: {absent[0]}"):
            relay.build(mod, target=target)
        return
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=target)
    assert lib.get_lib().target.enabled_features() == named_cpu_features(cpu)
    path = str(tmp_path / "m.rjit")
    lib.export_library(path)
    m = graph_executor.GraphModule(tvm.runtime.load_module(path)["default"](tvm.cpu()))
    x = np.random.RandomState(4).standard_normal((2, 32)).astype("float32")
    m.run(x=x)
    np.testing.assert_allclose(m.get_output(0).numpy(), np.maximum(x @ w.T, 0), rtol=1e-5,
                               atol=1e-5)


def test_unknown_cpu_lists_the_named_ones():
    with pytest.raises(ValueError, match="a named x86 CPU .*skylake-avx512"):
        resolve_cpu_target("pentium-mmx-turbo")
