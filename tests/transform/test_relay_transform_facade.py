"""relay.transform / relay.analysis re-export the pass infrastructure and the Relay passes."""
from __future__ import annotations

import pytest

import compiler.transform as infra

relay_transform = pytest.importorskip("compiler.relay.transform",
                                      reason="the relay facade needs the op library")
relay_analysis = pytest.importorskip("compiler.relay.analysis")


def test_infrastructure_is_the_same_objects():
    for name in ["PassContext", "PassInfo", "Sequential", "ModulePass", "FunctionPass",
                 "module_pass", "function_pass", "PassInstrument", "pass_instrument",
                 "PrintIR", "PassTimingInstrument"]:
        assert getattr(relay_transform, name) is getattr(infra, name), name


@pytest.mark.parametrize("name", ["AlterOpLayout", "DeadCodeElimination",
                                  "EliminateCommonSubexpr", "FoldConstant", "FoldScaleAxis",
                                  "FuseOps", "InferType", "SimplifyInference", "ToANormalForm"])
def test_relay_passes_are_the_registered_ones(name):
    factory = getattr(relay_transform, name)
    p = factory()
    assert isinstance(p, infra.Pass)
    assert p.info.name == name
    assert str(p).count(name) >= 1
    assert isinstance(infra.get_pass(name), type(p))


def test_registered_opt_levels_and_requirements_match_relay():
    expected = {"InferType": (0, ()), "FoldConstant": (2, ()), "FuseOps": (0, ("InferType",)),
                "ToANormalForm": (1, ()), "DeadCodeElimination": (1, ("InferType",)),
                "EliminateCommonSubexpr": (3, ("InferType",)),
                "SimplifyInference": (0, ("InferType",)), "PrintIR": (0, ())}
    for name, (level, required) in expected.items():
        info = infra.get_pass(name).info
        assert (info.opt_level, tuple(info.required)) == (level, required), name


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="NoSuchPass"):
        relay_transform.NoSuchPass


def test_relay_analysis_reexports():
    from compiler import analysis
    for name in ["free_vars", "bound_vars", "all_vars", "post_order_visit", "well_formed"]:
        assert getattr(relay_analysis, name) is getattr(analysis, name)
