"""runtime.shape_program: evaluation, the checks' messages, JSON round trips, and refusal of
malformed programs (they arrive from files)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from runtime.shape_functions import register_shape_function
from runtime.shape_program import ShapeError, ShapeProgram, ShapeProgramFormatError


def dense_program():
    """x (?, ?) times a (3072, 768) weight: out (x0, 3072), x1 must be 768."""
    return ShapeProgram(inputs=[("x", [None, None]), ("w", [3072, 768])], needs_values=[],
                        instructions=[["dim", 0, 0], ["dim", 0, 1], ["const", 768],
                                      ["const", 3072]],
                        checks=[["eq", 1, 2, "nn.dense: the data's last dim must equal 768"]],
                        outputs=[[0, 3]])


def test_evaluate_gives_output_shapes():
    assert dense_program().evaluate([(5, 768), (3072, 768)]) == [(5, 3072)]


def test_a_broken_constraint_names_the_input_expected_and_given():
    with pytest.raises(ShapeError, match=r"input 'x': expected \(\?, 768\) \(dim 1 = 768\), "
                                         r"got \(2, 512\) \(nn.dense"):
        dense_program().evaluate([(2, 512), (3072, 768)])


def test_static_input_dims_rank_and_count_are_checked():
    prog = dense_program()
    with pytest.raises(ShapeError, match=r"input 'w': expected \(3072, 768\), got \(3072, 512\)"):
        prog.check_inputs([(2, 768), (3072, 512)])
    with pytest.raises(ShapeError, match=r"input 'x': expected \(\?, \?\), got \(2,\)"):
        prog.check_inputs([(2,), (3072, 768)])
    with pytest.raises(ShapeError, match=r"expected 2 input shape\(s\)"):
        prog.check_inputs([(2, 768)])


def test_arithmetic_and_broadcast():
    prog = ShapeProgram([("a", [None]), ("b", [None])], [],
                        [["dim", 0, 0], ["dim", 1, 0], ["const", 2], ["add", 0, 2],
                         ["floordiv", 3, 2], ["floormod", 0, 2], ["mul", 4, 2],
                         ["max", 0, 1], ["min", 0, 1], ["sub", 0, 5],
                         ["bcast", 0, 1, "add: lhs and rhs"]],
                        [], [[4, 5, 6, 7, 8, 9, 10]])
    assert prog.evaluate([(7,), (1,)]) == [(4, 1, 8, 7, 1, 6, 7)]
    with pytest.raises(ShapeError, match=r"add: lhs and rhs: dims 7 and 3 do not broadcast"):
        prog.evaluate([(7,), (3,)])


def test_a_negative_output_dim_is_an_error_not_an_allocation():
    prog = ShapeProgram([("a", [None])], [], [["dim", 0, 0], ["const", 10], ["sub", 0, 1]],
                        [], [[2]])
    with pytest.raises(ShapeError, match=r"output 0 dim 0 computes to -7"):
        prog.evaluate([(3,)])


def test_checks_between_two_inputs_name_both():
    prog = ShapeProgram([("x", [None]), ("y", [None])], [], [["dim", 0, 0], ["dim", 1, 0]],
                        [["eq", 0, 1, "add: same length"]], [[0]])
    with pytest.raises(ShapeError, match=r"input 'x' dim 0 \(4\) must be equal to input 'y' "
                                         r"dim 0 \(5\)"):
        prog.evaluate([(4,), (5,)])


def _reshape_fn(attrs, inputs, out_ndims):
    data_shape, newshape = inputs
    assert attrs.mode == "test"
    return [np.array(np.empty(tuple(data_shape)).reshape(newshape.tolist()).shape, "int64")]


register_shape_function("test.reshape_by_value", _reshape_fn, override=True)


def value_program():
    return ShapeProgram([("x", [None, 4]), ("s", [2])], [1],
                        [["dim", 0, 0], ["const", 4],
                         ["call", "test.reshape_by_value", {"mode": "test"},
                          [["shape", [0, 1]], ["value", 1]], [2]],
                         ["item", 2, 0, 0], ["item", 2, 0, 1]], [], [[3, 4]])


def test_a_shape_function_reads_input_values():
    prog = value_program()
    assert prog.needs_values == (1,)
    assert prog.evaluate([(3, 4), (2,)], {1: np.array([2, 6])}) == [(2, 6)]
    assert prog.evaluate([(3, 4), (2,)], [None, np.array([-1, 3])]) == [(4, 3)]
    with pytest.raises(ShapeError, match=r"input 's': its value is needed"):
        prog.evaluate([(3, 4), (2,)])
    with pytest.raises(ShapeError, match="test.reshape_by_value"):
        prog.evaluate([(3, 4), (2,)], {1: np.array([5, 5])})


def test_json_round_trip():
    for prog in (dense_program(), value_program()):
        again = ShapeProgram.from_json(prog.to_json())
        assert again == prog and str(again) == str(prog)


def _edited(**changes):
    data = value_program().to_dict()
    data.update(changes)
    return json.dumps(data)


@pytest.mark.parametrize("text, match", [
    ("not json", "not JSON"),
    ('{"format": "other"}', "not a shape program"),
    (_edited(version=9), "version 9"),
    (_edited(inputs=[["x"]]), "inputs must be"),
    (_edited(instructions=[["dim", 5, 0]]), "no such input dim"),
    (_edited(instructions=[["add", 0, 1]]), "reads register 0"),
    (_edited(instructions=[["jump", 0]]), "unknown instruction"),
    (_edited(instructions=[["const", 1.5]]), "not an integer"),
    (_edited(instructions=[["const", 1], ["item", 0, 0, 0]]), "not an earlier call register"),
    (_edited(instructions=[["call", "rm -rf", {}, [], [1]]]), "no shape function named"),
    (_edited(instructions=[["call", "test.reshape_by_value", {}, [["value", 0]], [1]]]),
     "bad argument"),
    (_edited(checks=[["lt", 0, 1, "m"]]), "is not \\[kind"),
    (_edited(outputs=[[99]]), "reads register 99"),
    (_edited(needs_values=[7]), "needs_values"),
    (_edited(instructions=[5]), "malformed"),
    (_edited(inputs=[["x", ["big"]]]), "malformed"),
    (_edited(checks=[["eq", 0, 0]]), "is not \\[kind"),
])
def test_malformed_programs_are_refused_before_running(text, match):
    with pytest.raises(ShapeProgramFormatError, match=match):
        ShapeProgram.from_json(text)
