"""Pass instruments: hook order, enter-failure unwinding, should_run, PrintIR, timing."""
from __future__ import annotations

import pytest

from compiler.ir import Function, IRModule, TensorType, Var
from compiler.transform import (ModulePass, PassContext, PassInfo, PassInstrument,
                                PassTimingInstrument, PrintIR, Sequential, function_pass,
                                module_pass, pass_instrument)
from compiler.transform.pass_infra import InferType

T = TensorType((4,), "float32")


def make_mod() -> IRModule:
    x = Var("x", T)
    return IRModule({"main": Function([x], x)})


# stand-ins registered like Relay's FoldConstant (function pass, 2) and DCE (module pass, 1)
@function_pass(opt_level=2, name="FoldConstant")
def fold_constant_standin(func, mod, ctx):
    return func


@module_pass(opt_level=1, name="DeadCodeElimination", required=["InferType"])
def dce_standin(mod, ctx):
    return mod


@pass_instrument
class Recorder:
    """Logs every hook call as (hook, pass name or instrument tag)."""

    def __init__(self, log, tag="R", skip=()):
        self.log, self.tag, self.skip = log, tag, set(skip)

    def enter_pass_ctx(self):
        self.log.append(("enter", self.tag))

    def exit_pass_ctx(self):
        self.log.append(("exit", self.tag))

    def should_run(self, mod, info):
        self.log.append(("should_run", info.name))
        return info.name not in self.skip

    def run_before_pass(self, mod, info):
        self.log.append(("before", info.name))

    def run_after_pass(self, mod, info):
        self.log.append(("after", info.name))


def befores(log):
    return [name for hook, name in log if hook == "before"]


def test_six_run_before_pass_calls_as_in_relay():
    log = []
    seq = Sequential([InferType(), fold_constant_standin, dce_standin])
    with PassContext(opt_level=3, instruments=[Recorder(log)]):
        seq(make_mod())
    assert befores(log) == ["sequential", "InferType", "FoldConstant", "InferType", "InferType",
                            "DeadCodeElimination"]
    # FoldConstant's trailing InferType runs inside it, so it finishes first
    assert [n for h, n in log if h == "after"] == ["InferType", "InferType", "FoldConstant",
                                                   "InferType", "DeadCodeElimination",
                                                   "sequential"]
    assert log[0] == ("enter", "R") and log[-1] == ("exit", "R")


def test_decorated_instrument_is_a_pass_instrument_with_defaults():
    @pass_instrument
    class OnlyBefore:
        def __init__(self):
            self.names = []

        def run_before_pass(self, mod, info):
            self.names.append(info.name)

    inst = OnlyBefore()
    assert isinstance(inst, PassInstrument)
    assert inst.name == "OnlyBefore"
    with PassContext(instruments=[inst]):
        InferType()(make_mod())
    assert inst.names == ["InferType"]


def test_enter_failure_unwinds_entered_instruments_and_does_not_push():
    log = []

    @pass_instrument
    class Broken:
        def enter_pass_ctx(self):
            raise RuntimeError("cannot enter")

        def exit_pass_ctx(self):
            log.append(("exit", "Broken"))

    before = PassContext.current()
    ctx = PassContext(instruments=[Recorder(log, "A"), Broken(), Recorder(log, "C")])
    with pytest.raises(RuntimeError, match="cannot enter"):
        with ctx:
            pytest.fail("the body must not run")
    assert log == [("enter", "A"), ("exit", "A")]
    assert ctx.instruments == []
    assert PassContext.current() is before


def test_exit_pops_the_context_before_exit_pass_ctx():
    seen = []

    @pass_instrument
    class Probe:
        def exit_pass_ctx(self):
            seen.append(PassContext.current())

    ctx = PassContext(instruments=[Probe()])
    with ctx:
        pass
    assert seen and seen[0] is not ctx


def test_should_run_false_skips_the_pass_and_its_hooks():
    log, ran = [], []

    def run(mod, ctx):
        ran.append(True)
        return mod
    p = ModulePass(run, PassInfo(0, "Skippable"))
    with PassContext(instruments=[Recorder(log, skip={"Skippable"})]):
        mod = make_mod()
        assert p(mod) is mod
    assert ran == []
    assert ("should_run", "Skippable") in log and ("before", "Skippable") not in log


def test_should_run_never_skips_a_required_pass():
    log, ran = [], []

    def run(mod, ctx):
        ran.append(True)
        return mod
    p = ModulePass(run, PassInfo(0, "Skippable"))
    with PassContext(required_pass=["Skippable"],
                     instruments=[Recorder(log, skip={"Skippable"})]):
        p(make_mod())
    assert ran == [True]
    assert ("should_run", "Skippable") not in log
    assert ("before", "Skippable") in log and ("after", "Skippable") in log


def test_every_instrument_is_asked_should_run():
    log = []
    with PassContext(instruments=[Recorder(log, "A", skip={"InferType"}), Recorder(log, "B")]):
        InferType()(make_mod())
    assert [e for e in log if e[0] == "should_run"] == [("should_run", "InferType")] * 2
    assert befores(log) == []


def test_override_instruments_exits_old_and_enters_new():
    log = []
    with PassContext(instruments=[Recorder(log, "old")]) as ctx:
        ctx.override_instruments([Recorder(log, "new")])
        assert [type(i).__name__ for i in ctx.instruments] == ["Recorder"]
        InferType()(make_mod())
    assert log == [("enter", "old"), ("exit", "old"), ("enter", "new"),
                   ("should_run", "InferType"), ("before", "InferType"), ("after", "InferType"),
                   ("exit", "new")]


def test_print_ir_writes_header_and_module_to_stderr(capsys, monkeypatch):
    monkeypatch.setattr(IRModule, "astext",
                        lambda self, show_meta_data=True: f"<module meta={show_meta_data}>")
    p = PrintIR("after fusion")
    assert p.info.name == "PrintIR" and p.info.opt_level == 0
    mod = make_mod()
    assert p(mod)["main"] is mod["main"]
    err = capsys.readouterr().err
    assert err.startswith("PrintIR(after fusion):\n<module meta=False>")
    PrintIR()(mod)
    assert capsys.readouterr().err.startswith("PrintIR():\n")


def test_timing_instrument_renders_nested_table_and_clears_on_exit():
    timing = PassTimingInstrument()
    seq = Sequential([InferType(), fold_constant_standin], name="pipeline")
    with PassContext(instruments=[timing]):
        seq(make_mod())
        table = timing.render()
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["pass", "total(us)", "self(us)"]
    names = [line.split()[0] for line in lines[1:]]
    assert names == ["pipeline", "InferType", "FoldConstant", "InferType"]
    # nested passes are indented under their parent
    assert lines[2].startswith("  InferType") and lines[4].startswith("    InferType")
    assert all(float(line.split()[1]) >= 0 for line in lines[1:])
    assert timing.render() == ""


def test_timing_instrument_is_empty_before_any_pass():
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        assert timing.render() == ""
