"""Pass infrastructure: PassContext, opt_level gating, disabled/required passes, decorators."""
from __future__ import annotations

import threading

import pytest

from compiler.errors import CompilerError
from compiler.ir import Function, IRModule, TensorType, Var
from compiler.transform import (FunctionPass, ModulePass, Pass, PassContext, PassInfo,
                                Sequential, function_pass, get_pass, list_passes, module_pass,
                                register_pass, register_pass_config)

T = TensorType((2, 3), "float32")


def make_mod() -> IRModule:
    x = Var("x", T)
    return IRModule({"main": Function([x], x)})


def recorder(log: list, name: str, opt_level: int, required=None) -> ModulePass:
    """A module pass that appends its name to log."""
    def run(mod, ctx):
        log.append(name)
        return mod
    return ModulePass(run, PassInfo(opt_level, name, required))


# ----- PassContext

def test_current_is_a_default_context_at_opt_level_2():
    ctx = PassContext.current()
    assert isinstance(ctx, PassContext)
    assert ctx.opt_level == 2
    assert PassContext.current() is ctx


def test_nested_contexts_stack_and_unwind():
    outer_default = PassContext.current()
    with PassContext(opt_level=3) as outer:
        assert PassContext.current() is outer
        with PassContext(opt_level=0) as inner:
            assert PassContext.current() is inner
            assert PassContext.current().opt_level == 0
        assert PassContext.current() is outer
    assert PassContext.current() is outer_default


def test_context_is_thread_local():
    seen = []
    with PassContext(opt_level=3):
        t = threading.Thread(target=lambda: seen.append(PassContext.current().opt_level))
        t.start()
        t.join()
    assert seen == [2]


def test_context_exit_pops_even_when_body_raises():
    before = PassContext.current()
    with pytest.raises(RuntimeError):
        with PassContext(opt_level=1):
            raise RuntimeError("boom")
    assert PassContext.current() is before


def test_config_defaults_and_overrides():
    ctx = PassContext(config={"relay.FuseOps.max_depth": 10})
    assert ctx.config["relay.FuseOps.max_depth"] == 10
    assert ctx.config["relay.FuseOps.link_params"] is False
    assert PassContext().config["relay.FuseOps.max_depth"] == 256
    assert ctx.get_config("relay.backend.use_auto_scheduler") is False


def test_unknown_config_key_lists_known_keys():
    with pytest.raises(CompilerError) as info:
        PassContext(config={"relay.FuseOps.max_dpeth": 3})
    msg = str(info.value)
    assert "relay.FuseOps.max_dpeth" in msg
    assert "relay.FuseOps.max_depth" in msg and "relay.FuseOps.link_params" in msg


def test_config_value_of_wrong_type_is_rejected():
    with pytest.raises(CompilerError, match="expects int, got str"):
        PassContext(config={"relay.FuseOps.max_depth": "deep"})


def test_register_pass_config_makes_a_key_known():
    register_pass_config("test.infra.some_knob", 7)
    assert PassContext(config={"test.infra.some_knob": 9}).config["test.infra.some_knob"] == 9
    assert PassContext().config["test.infra.some_knob"] == 7
    with pytest.raises(CompilerError, match="registered twice"):
        register_pass_config("test.infra.some_knob", 8)


def test_bad_context_arguments():
    with pytest.raises(TypeError, match="opt_level"):
        PassContext(opt_level="3")
    with pytest.raises(TypeError, match="required_pass"):
        PassContext(required_pass="InferType")
    with pytest.raises(TypeError, match="PassInstrument"):
        PassContext(instruments=[object()])


# ----- passes and Sequential

def test_calling_a_pass_runs_it_whatever_its_opt_level():
    log = []
    with PassContext(opt_level=0):
        recorder(log, "High", 4)(make_mod())
    assert log == ["High"]


@pytest.mark.parametrize("ctx_level, expected", [
    (0, ["L0"]), (1, ["L0", "L1"]), (2, ["L0", "L1", "L2"]), (3, ["L0", "L1", "L2", "L3"])])
def test_sequential_gates_on_opt_level(ctx_level, expected):
    log = []
    seq = Sequential([recorder(log, f"L{i}", i) for i in range(4)])
    with PassContext(opt_level=ctx_level):
        seq(make_mod())
    assert log == expected


def test_sequential_uses_the_default_context_outside_with():
    log = []
    Sequential([recorder(log, "L2", 2), recorder(log, "L3", 3)])(make_mod())
    assert log == ["L2"]


def test_disabled_pass_is_skipped_even_if_required():
    log = []
    seq = Sequential([recorder(log, "A", 0), recorder(log, "B", 0)])
    with PassContext(disabled_pass=["A"], required_pass=["A"]):
        seq(make_mod())
    assert log == ["B"]


def test_required_pass_runs_above_the_opt_level():
    log = []
    seq = Sequential([recorder(log, "A", 3), recorder(log, "B", 3)])
    with PassContext(opt_level=1, required_pass=["B"]):
        seq(make_mod())
    assert log == ["B"]


def test_pass_requirements_run_first_by_name():
    log = []

    @register_pass(name="TestInfraDep")
    def dep():
        return recorder(log, "TestInfraDep", 0)

    seq = Sequential([recorder(log, "A", 0), recorder(log, "Needs", 1, ["TestInfraDep"])])
    seq(make_mod())
    assert log == ["A", "TestInfraDep", "Needs"]
    assert "TestInfraDep" in list_passes()
    # a gated-out pass does not pull in its requirements
    log.clear()
    with PassContext(opt_level=0):
        seq(make_mod())
    assert log == ["A"]


def test_unknown_required_pass_is_a_clear_error():
    seq = Sequential([recorder([], "Needy", 0, ["NoSuchPass"])])
    with pytest.raises(CompilerError, match="'Needy' requires 'NoSuchPass'.*registered passes"):
        seq(make_mod())


def test_infer_type_resolves_by_name():
    p = get_pass("InferType")
    assert p.info.name == "InferType" and p.info.opt_level == 0


def test_sequential_rejects_non_passes():
    with pytest.raises(TypeError, match=r"passes\[1\]"):
        Sequential([recorder([], "A", 0), "InferType"])


def test_pass_rejects_a_non_module():
    with pytest.raises(TypeError, match="IRModule"):
        recorder([], "A", 0)(Var("x", T))


def test_nested_sequential_and_str():
    log = []
    inner = Sequential([recorder(log, "I1", 0), recorder(log, "I3", 3)], opt_level=1,
                       name="inner")
    outer = Sequential([recorder(log, "O", 0), inner])
    outer(make_mod())
    assert log == ["O", "I1"]
    assert "inner" in str(inner) and "I1" in str(inner)
    assert "sequential" in str(outer)


def test_module_pass_does_not_mutate_the_callers_module():
    mod = make_mod()
    main = mod["main"]

    @module_pass(opt_level=0)
    def replace_main(m, ctx):
        y = Var("y", T)
        m["main"] = Function([y], y)
        return m

    out = replace_main(mod)
    assert mod["main"] is main
    assert out["main"] is not main


# ----- decorators

def test_module_pass_decorator_function_form():
    @module_pass(opt_level=2, name="MyPass", required=["InferType"])
    def transform(mod, ctx):
        assert isinstance(ctx, PassContext)
        return mod

    assert isinstance(transform, ModulePass) and isinstance(transform, Pass)
    assert transform.info.name == "MyPass"
    assert transform.info.opt_level == 2
    assert transform.info.required == ("InferType",)
    assert "MyPass" in str(transform)


def test_module_pass_decorator_default_name_and_direct_form():
    def my_transform(mod, ctx):
        return mod

    p = module_pass(my_transform, opt_level=1)
    assert p.info.name == "my_transform"
    mod = make_mod()
    assert p(mod)["main"] is mod["main"]


def test_module_pass_decorator_class_form():
    @module_pass(opt_level=1)
    class RenameParam:
        """Replaces main with fn (%name) { %name }."""

        def __init__(self, name):
            self.name = name

        def transform_module(self, mod, ctx):
            v = Var(self.name, T)
            mod["main"] = Function([v], v)
            return mod

    p = RenameParam("renamed")
    assert isinstance(p, ModulePass)
    assert p.info.name == "RenameParam"
    assert p.name == "renamed"  # attributes of the instance are reachable
    assert p(make_mod())["main"].params[0].name_hint == "renamed"


def test_function_pass_both_forms_and_skipped_functions():
    seen = []

    @function_pass(opt_level=1)
    def collect(func, mod, ctx):
        seen.append(func.params[0].name_hint)
        return func

    @function_pass(opt_level=1, name="CollectCls")
    class Collect:
        def transform_function(self, func, mod, ctx):
            seen.append(func.params[0].name_hint)
            return func

    mod = IRModule()
    for name, attrs in [("plain", None), ("prim", {"Primitive": 1}), ("ext", {"Compiler": "c"}),
                        ("skip", {"SkipOptimization": 1}), ("extern", {"Extern": 1})]:
        v = Var(name, T)
        mod[name] = Function([v], v, attrs=attrs)
    out = collect(mod)
    assert seen == ["plain"]
    assert isinstance(Collect(), FunctionPass)
    Collect()(mod)
    assert seen == ["plain", "plain"]
    # the trailing InferType typed the functions
    assert out["plain"].checked_type.ret_type == T


def test_function_pass_must_return_a_function():
    @function_pass(opt_level=0)
    def broken(func, mod, ctx):
        return func.body

    with pytest.raises(CompilerError, match="returned Var for @main"):
        broken(make_mod())


@pytest.mark.parametrize("decorator", [module_pass, function_pass])
def test_missing_opt_level_is_an_error(decorator):
    with pytest.raises(ValueError, match="opt_level"):
        @decorator
        def f(*args):
            return args[0]
    with pytest.raises(ValueError, match="opt_level"):
        decorator(name="x")


def test_class_without_transform_method_is_rejected():
    with pytest.raises(TypeError, match="transform_module"):
        @module_pass(opt_level=0)
        class Nothing:
            pass
