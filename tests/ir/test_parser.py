"""The Relay text parser (compiler.ir.parser, TVM's tvm.parser): text -> IR, and round trips."""

import numpy as np
import onnx
import pytest

import compiler as tvm
from compiler import relay
from compiler.tools import model_zoo
from compiler.errors import CompilerError
from compiler.ir.printer import meta_table
from compiler.ir.parser import ParseError, parse, parse_expr
from compiler.relay import testing
from runtime import graph_executor
from tests.scaling import assert_scales_linearly


def assert_parses_to(text, expected, **kwargs):
    tvm.ir.assert_structural_equal(parse_expr(text, **kwargs), expected, map_free_vars=True)


def round_trip(mod):
    """parse(astext(mod)) must give mod back."""
    back = parse(mod.astext(), init_meta_table=meta_table(mod))
    tvm.ir.assert_structural_equal(back, mod)
    return back


# ---- literals, types and attributes -----------------------------------------------------------
@pytest.mark.parametrize("text,value,dtype", [
    ("1f", 1.0, "float32"), ("-2.5f", -2.5, "float32"), ("1e-05f", 1e-5, "float32"),
    ("1.5", 1.5, "float32"), ("3", 3, "int32"), ("-7", -7, "int32"), ("2i64", 2, "int64"),
    ("4i16", 4, "int16"), ("1f64", 1.0, "float64"), ("2.5f16", 2.5, "float16"),
    ("3u8", 3, "uint8"), ("True", True, "bool"), ("False", False, "bool"),
])
def test_scalar_literals(text, value, dtype):
    c = parse_expr(text)
    assert isinstance(c, relay.Constant)
    assert c.data.dtype == dtype and c.data.shape == ()
    assert c.data.numpy().item() == np.dtype(dtype).type(value)


def test_float_literals_read_back_exactly():
    for value in (np.float32(np.pi), np.float32(1 / 3), np.float32(3.4028235e38)):
        c = parse_expr(str(relay.const(value)))
        assert c.data.numpy().item() == value
    assert np.isinf(parse_expr("-inff").data.numpy())


def test_types_of_params():
    f = parse_expr("fn (%a: Tensor[(1, 3), float32], %b: int64, %c: (Tensor[(2), int8], "
                   "float16), %d: fn (float32, Tensor[(3), float32]) -> float32, %e: (), "
                   "%g: (float32,)) { %a }")
    t = relay.TensorType
    assert [p.type_annotation for p in f.params] == [
        t((1, 3), "float32"), t((), "int64"),
        relay.TupleType([t((2,), "int8"), t((), "float16")]),
        relay.FuncType([t((), "float32"), t((3,), "float32")], t((), "float32")),
        relay.TupleType([]), relay.TupleType([t((), "float32")])]


def test_op_attrs_of_every_kind_are_the_builders():
    x = relay.var("x", shape=(1, 4, 8, 8))
    w = relay.var("w", shape=(6, 4, 3, 3))
    text = ('fn (%x: Tensor[(1, 4, 8, 8), float32], %w: Tensor[(6, 4, 3, 3), float32]) {\n'
            '  %0 = nn.conv2d(%x, %w, strides=[2, 2], padding=[1, 1, 1, 1], channels=6, '
            'kernel_size=[3, 3], data_layout="NCHW", out_dtype="");\n'
            '  %1 = nn.max_pool2d(%0, pool_size=[2, 2], ceil_mode=True);\n'
            '  %2 = nn.leaky_relu(%1, alpha=0.2f);\n'
            '  %3 = cast(%2, dtype="float16");\n'
            '  %4 = squeeze(%3, axis=None);\n'
            '  sum(%4, axis=[1], keepdims=True, exclude=False)\n'
            '}')
    conv = relay.nn.conv2d(x, w, strides=(2, 2), padding=(1, 1, 1, 1), channels=6,
                           kernel_size=(3, 3))
    pool = relay.nn.max_pool2d(conv, pool_size=(2, 2), ceil_mode=True)
    body = relay.sum(relay.squeeze(relay.cast(relay.nn.leaky_relu(pool, alpha=0.2), "float16")),
                     axis=[1], keepdims=True)
    expected = relay.Function([x, w], body)
    parsed = parse_expr(text)
    tvm.ir.assert_structural_equal(parsed, expected)
    call = parsed.body
    assert type(call.attrs) is type(body.attrs) and call.attrs.type_key == body.attrs.type_key
    assert call.attrs.axis == (1,) and call.attrs.keepdims is True


def test_function_attrs_and_dict_attr_values():
    f = parse_expr('fn (%p0: float32, Primitive=1, Composite="dense", flags=[1, 2], '
                   'note=None, ok=True, m={"a"=1}) { %p0 }')
    assert f.is_primitive
    assert dict(f.attrs) == {"Primitive": 1, "Composite": "dense", "flags": (1, 2),
                             "note": None, "ok": True, "m": {"a": 1}}


# ---- expressions -----------------------------------------------------------------------------
def test_docs_example_module():
    mod = parse('#[version = "0.0.5"]\ndef @main(%x: Tensor[(7), int32]) {\n  add(%x, 1)\n}')
    x = relay.var("x", shape=(7,), dtype="int32")
    expected = tvm.IRModule.from_expr(relay.Function([x], relay.add(x, relay.const(1))))
    tvm.ir.assert_structural_equal(mod, relay.transform.InferType()(expected))
    assert mod["main"].checked_type.ret_type == relay.TensorType((7,), "int32")


def test_let_if_tuple_projection_and_local_fn():
    text = """
    free_var %c: bool;
    free_var %x: Tensor[(2), float32];
    %0 = fn (%a: Tensor[(2), float32]) { negative(%a) };
    let %t = (%x, %0(%x));
    %1 = %t.1;
    if (%c) { %t.0 } else { let %y = multiply(%1, 2f); %y }
    """
    c = relay.var("c", "bool")
    x = relay.var("x", shape=(2,))
    a = relay.var("a", shape=(2,))
    neg = relay.Function([a], relay.negative(a))
    t = relay.var("t")
    y = relay.var("y")
    tup = relay.Tuple([x, relay.Call(neg, [x])])
    other = relay.Let(y, relay.multiply(relay.TupleGetItem(t, 1), relay.const(2.0)), y)
    expected = relay.Let(t, tup, relay.If(c, relay.TupleGetItem(t, 0), other))
    assert_parses_to(text, expected)


def test_parenthesised_let_tuples_and_nested_projection():
    assert_parses_to("()", relay.Tuple([]))
    assert_parses_to("(1f,)", relay.Tuple([relay.const(1.0)]))
    inner = relay.Tuple([relay.const(1), relay.const(2)])
    assert_parses_to("((1, 2), 3).0.1",
                     relay.TupleGetItem(relay.TupleGetItem(relay.Tuple([inner, relay.const(3)]),
                                                           0), 1))
    v = relay.var("v")
    assert_parses_to("(let %v = 1f; %v)", relay.Let(v, relay.const(1.0), v))


def test_global_calls_resolve_in_any_order():
    text = """
    def @main(%x: Tensor[(3), float32]) -> Tensor[(3), float32] {
      @double(%x)
    }

    def @double(%y: Tensor[(3), float32]) -> Tensor[(3), float32] {
      add(%y, %y)
    }
    """
    mod = parse(text)
    double = mod.get_global_var("double")
    assert mod["main"].body.op is double
    y = relay.var("y", shape=(3,))
    x = relay.var("x", shape=(3,))
    expected = tvm.IRModule()
    gv = relay.GlobalVar("double")
    expected[gv] = relay.Function([y], relay.add(y, y), relay.TensorType((3,), "float32"))
    expected["main"] = relay.Function([x], relay.Call(gv, [x]), relay.TensorType((3,), "float32"))
    tvm.ir.assert_structural_equal(mod, relay.transform.InferType()(expected))


def test_meta_constants_come_from_init_meta_table():
    data = np.arange(6, dtype="float32").reshape(2, 3)
    table = {"relay.Constant": [relay.const(data)]}
    parsed = parse_expr("add(meta[relay.Constant][0], 1f)", init_meta_table=table)
    np.testing.assert_array_equal(parsed.args[0].data.numpy(), data)
    with pytest.raises(ParseError, match=r"meta\[relay.Constant\]\[1\] is not in "
                                         r"init_meta_table"):
        parse_expr("meta[relay.Constant][1]", init_meta_table=table)


def test_type_comments_and_printed_text_round_trip():
    text = ('#[version = "0.0.5"]\n'  # TVM's astext header, read and printed back
            "def @main(%x: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] {\n"
            "  %0 = exp(%x) /* ty=Tensor[(2, 3), float32] */;\n"
            "  %1 = add(%0, 1f /* ty=float32 */) /* ty=Tensor[(2, 3), float32] */;\n"
            "  multiply(%1, %0) /* ty=Tensor[(2, 3), float32] */\n"
            "}")
    assert parse(text).astext() == text


def test_parsed_program_builds_and_matches_numpy():
    mod = parse("""
    def @main(%x: Tensor[(2, 4), float32], %w: Tensor[(3, 4), float32]) {
      %0 = nn.dense(%x, %w, units=3);
      %1 = nn.bias_add(%0, meta[relay.Constant][0], axis=1);
      (nn.relu(%1), sum(%1, axis=[1]))
    }""", init_meta_table={"relay.Constant": [np.array([0.5, -1.0, 2.0], "float32")]})
    lib = relay.build(mod, target="llvm")
    gmod = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4)).astype("float32")
    w = rng.standard_normal((3, 4)).astype("float32")
    gmod.run(x=x, w=w)
    ref = x @ w.T + np.array([0.5, -1.0, 2.0], "float32")
    np.testing.assert_allclose(gmod.get_output(0).numpy(), np.maximum(ref, 0), rtol=1e-5)
    np.testing.assert_allclose(gmod.get_output(1).numpy(), ref.sum(axis=1), rtol=1e-5)


def test_ten_thousand_statements_parse_without_recursion():
    lines = ["def @main(%x: Tensor[(4), float32]) {", "  %0 = add(%x, 1f);"]
    lines += [f"  %{i} = add(%{i - 1}, 1f);" for i in range(1, 10000)]
    lines += ["  %9999", "}"]
    mod = parse("\n".join(lines))
    assert isinstance(mod["main"].body, relay.Call)

    def parsing(n):
        text = "\n".join(["def @main(%x: Tensor[(4), float32]) {", "  %0 = add(%x, 1f);"]
                         + [f"  %{i} = add(%{i - 1}, 1f);" for i in range(1, n)]
                         + [f"  %{n - 1}", "}"])
        return lambda: parse(text)
    assert_scales_linearly(parsing, 2_500, 10_000, repeat=1)
    # 3,000 lets (three times Python's default recursion limit) nest 3,000 Let nodes.
    lets = "".join(f"let %v{i} = add(%v{i - 1}, 1f);\n" for i in range(1, 3000))
    chain = parse_expr("free_var %v0: float32;\n" + lets + "%v2999")
    assert isinstance(chain, relay.Let)


# ---- errors --------------------------------------------------------------------------------
@pytest.mark.parametrize("text,match", [
    ("add(%x, 1f)", r"from_string:1:5: %x is not defined here"),
    ("fn (%x: float32) {\n  nosuch_op(%x)\n}", r":2:3: unknown op 'nosuch_op'"),
    ("fn (%x: float32) {\n  nn.relu(%x, alpha=1)\n}", r":2:10: nn.relu has no attribute 'alpha'"),
    ("add(1f, 2f", r":1:11: expected '\)', got the end of the text"),
    ("fn (%x: Tensor[(n, 3), float32]) { %x }", r":1:17: expected a dimension \(an integer or \?\)"),
    ("fn (%x: Tensor[(3), floaty]) { %x }", r":1:21: bad tensor type"),
    ("add(1f, $)", r":1:9: unexpected character '\$'"),
    ("meta[relay.Constant][0]", r"init_meta_table"),
    ("1f 2f", r":1:4: expected the end of the text, got '2f'"),
    ("let %x = 1f", r"expected ';'"),
])
def test_bad_text_is_a_parse_error_with_line_and_column(text, match):
    with pytest.raises(ParseError, match=match) as info:
        parse_expr(text)
    assert isinstance(info.value, CompilerError)


def test_error_quotes_the_line_with_a_caret():
    with pytest.raises(ParseError) as info:
        parse("def @main() {\n  add(1f, %nope)\n}")
    message = str(info.value)
    assert "from_string:2:11" in message
    assert "  add(1f, %nope)\n" + " " * 12 + "^" in message


def test_duplicate_definition_is_an_error():
    with pytest.raises(ParseError, match="@f is defined twice"):
        parse("def @f() { 1 }\ndef @f() { 2 }")


def test_relay_facade_names():
    assert relay.parse is parse and relay.parse_expr is parse_expr
    assert relay.fromtext("def @main() { 1f }")["main"].body.data.numpy() == 1.0
    assert tvm.parser.parse is parse


# ---- round trips -------------------------------------------------------------------------------
def _conv_block():
    x = relay.var("x", shape=(1, 3, 8, 8))
    w = relay.var("w", shape=(4, 3, 3, 3))
    y = relay.nn.conv2d(x, w, padding=(1, 1), channels=4, kernel_size=(3, 3))
    y = relay.nn.bias_add(y, relay.const(np.linspace(-1, 1, 4, dtype="float32")))
    bn = relay.nn.batch_norm(y, *[relay.const(np.full(4, v, "float32")) for v in (1, 0, 0, 1)])
    y = relay.nn.relu(bn[0])
    parts = relay.split(y, 2, axis=1)
    y = relay.concatenate([parts[1], parts[0]], axis=1)
    return relay.Function([x, w], relay.nn.softmax(relay.nn.global_avg_pool2d(y), axis=1))


def _control_flow_module():
    mod = tvm.IRModule()
    a = relay.var("a", shape=(3,))
    helper = relay.GlobalVar("helper")
    mod[helper] = relay.Function([a], relay.Tuple([a, relay.exp(a)]))
    x = relay.var("x", shape=(3,))
    c = relay.var("c", "bool")
    t = relay.var("t")
    body = relay.Let(t, relay.Call(helper, [x]),
                     relay.If(c, relay.TupleGetItem(t, 0),
                              relay.add(relay.TupleGetItem(t, 1), relay.const(0.1))))
    mod["main"] = relay.Function([x, c], body)
    return mod


ROUND_TRIP_PROGRAMS = {
    "conv_block": lambda: tvm.IRModule.from_expr(_conv_block()),
    "control_flow": _control_flow_module,
    "mlp": lambda: testing.mlp.get_workload(batch_size=1)[0],
    "resnet18": lambda: testing.resnet.get_workload(num_layers=18)[0],
    "mobilenet": lambda: testing.mobilenet.get_workload()[0],
    "dqn": lambda: testing.dqn.get_workload()[0],
}


@pytest.mark.parametrize("name", sorted(ROUND_TRIP_PROGRAMS))
@pytest.mark.parametrize("stage", ["typed", "fused", "params bound and folded"])
def test_round_trip_relay_programs(name, stage):
    mod = relay.transform.InferType()(ROUND_TRIP_PROGRAMS[name]())
    if stage == "fused":
        mod = relay.transform.FuseOps(fuse_opt_level=2)(mod)
    elif stage == "params bound and folded":
        main = mod["main"]
        rng = np.random.default_rng(0)
        params = {p.name_hint: rng.standard_normal(p.checked_type.concrete_shape)
                  .astype(p.checked_type.dtype) for p in main.params[1:]
                  if p.checked_type.dtype == "float32"}
        mod = mod.shallow_copy()
        mod["main"] = relay.build_module.bind_params_by_name(main, params)
        mod = relay.transform.FoldConstant()(relay.transform.InferType()(mod))
        mod = relay.transform.FuseOps()(relay.transform.InferType()(mod))
    round_trip(mod)


def test_round_trip_untyped_expression():
    x = relay.var("x")
    w = relay.var("w")
    expr = relay.nn.dense(relay.nn.relu(x), w, units=5)
    tvm.ir.assert_structural_equal(parse_expr(expr.astext()), expr, map_free_vars=True)


def _onnx_round_trip(name):
    model = onnx.load(model_zoo.light_model_path(name))
    mod, _ = relay.frontend.from_onnx(model)
    mod = relay.transform.FuseOps()(relay.transform.InferType()(mod))
    round_trip(mod)


@pytest.mark.parametrize("name", ["squeezenet", "inception_v1"])
def test_round_trip_onnx_models(name):
    _onnx_round_trip(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", model_zoo.LIGHT_MODELS)
def test_round_trip_every_light_onnx_model(name):
    _onnx_round_trip(name)


def test_type_params_bind_type_vars():
    f = parse_expr("fn <t>(%x: t, %g: fn <u>(u) -> u) -> t { %x }")
    (t,) = f.type_params
    assert isinstance(t, relay.TypeVar) and t.name_hint == "t"
    assert f.params[0].type_annotation is t and f.ret_type is t
    g_type = f.params[1].type_annotation
    assert g_type.arg_types[0] is g_type.type_params[0] is g_type.ret_type
    assert str(f) == "fn <t>(%x: t, %g: fn <u>(u) -> u) -> t {\n  %x\n}"
    with pytest.raises(ParseError, match="bad tensor type"):
        parse_expr("fn (%x: u) { %x }")  # a type var out of its scope is not a dtype


def test_init_module_functions_are_visible_and_kept():
    a = relay.var("a", shape=(2,))
    init = tvm.IRModule()
    helper = relay.GlobalVar("helper")
    init[helper] = relay.Function([a], relay.negative(a))
    mod = parse("def @main(%x: Tensor[(2), float32]) { @helper(%x) }", init_module=init)
    assert mod["main"].body.op is helper
    assert set(g.name_hint for g in mod.get_global_vars()) == {"helper", "main"}
    assert "main" not in [g.name_hint for g in init.get_global_vars()]
