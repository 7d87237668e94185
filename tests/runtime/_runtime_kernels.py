"""Tiny hand-written kernels in the runtime's calling convention, built without codegen."""
from __future__ import annotations

import json

import llvmlite.binding as llvm

from runtime import KernelLibrary, host_target_machine
from runtime.library import signature_table_ir


def _elementwise(name: str, n: int, nin: int, body: list[str], outs: list[str]) -> str:
    """`int32 name(ptr args)`: for i < n, load inputs a0.., compute `body`, store `outs`."""
    lines = [f"define i32 @{name}(ptr %args) {{", "entry:"]
    for k in range(nin + len(outs)):
        lines += [
            f"  %slot{k} = getelementptr ptr, ptr %args, i64 {k}",
            f"  %buf{k} = load ptr, ptr %slot{k}",
        ]
    lines += ["  br label %loop", "loop:", "  %i = phi i64 [0, %entry], [%next, %loop]"]
    for k in range(nin):
        lines += [
            f"  %p{k} = getelementptr float, ptr %buf{k}, i64 %i",
            f"  %a{k} = load float, ptr %p{k}",
        ]
    lines += [f"  {stmt}" for stmt in body]
    for j, value in enumerate(outs):
        k = nin + j
        lines += [
            f"  %q{k} = getelementptr float, ptr %buf{k}, i64 %i",
            f"  store float {value}, ptr %q{k}",
        ]
    lines += [
        "  %next = add i64 %i, 1",
        f"  %done = icmp eq i64 %next, {n}",
        "  br i1 %done, label %exit, label %loop",
        "exit:",
        "  ret i32 0",
        "}",
    ]
    return "\n".join(lines)


def kernels_ir(n: int = 8) -> dict[str, str]:
    """The test kernels, each over `n` float32 elements."""
    return {
        "add": _elementwise("add", n, 2, ["%r = fadd float %a0, %a1"], ["%r"]),
        "mul": _elementwise("mul", n, 2, ["%r = fmul float %a0, %a1"], ["%r"]),
        "relu": _elementwise(
            "relu",
            n,
            1,
            ["%c = fcmp ogt float %a0, 0.0", "%r = select i1 %c, float %a0, float 0.0"],
            ["%r"],
        ),
        "add_relu": _elementwise(
            "add_relu",
            n,
            2,
            ["%s = fadd float %a0, %a1", "%c = fcmp ogt float %s, 0.0",
             "%r = select i1 %c, float %s, float 0.0"],
            ["%r"],
        ),
        "plus_one_and_double": _elementwise(
            "plus_one_and_double",
            n,
            1,
            ["%r = fadd float %a0, 1.0", "%d = fmul float %a0, 2.0"],
            ["%r", "%d"],
        ),
        "fail": "define i32 @fail(ptr %args) {\nentry:\n  ret i32 7\n}",
    }


# buffers per kernel (inputs + outputs), each n float32
_ARITY = {"add": 3, "mul": 3, "relu": 2, "add_relu": 3, "plus_one_and_double": 3, "fail": 2}


def object_code(n: int = 8, names: list[str] | None = None,
                signed: bool = False) -> tuple[bytes, list[str]]:
    """Object code for the chosen kernels (all by default) and their names; `signed`: with the
    signature table compiled libraries carry (needed to export and load it)."""
    irs = kernels_ir(n)
    names = list(irs) if names is None else names
    tm = host_target_machine()
    text = "\n\n".join(irs[k] for k in names)
    if signed:
        text += "\n" + signature_table_ir((((n,), "float32"),) * _ARITY[k] for k in names)
    mod = llvm.parse_assembly(text)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    return tm.emit_object(mod), names


def library(n: int = 8, signed: bool = False) -> KernelLibrary:
    """A KernelLibrary holding every test kernel (`signed`: see object_code)."""
    obj, names = object_code(n, signed=signed)
    return KernelLibrary(obj, names)


def null(name: str) -> dict:
    return {"op": "null", "name": name, "inputs": []}


def op(name: str, func: str, inputs: list[list[int]], num_outputs: int = 1) -> dict:
    attrs = {
        "func_name": func,
        "num_inputs": str(len(inputs)),
        "num_outputs": str(num_outputs),
        "flatten_data": "0",
    }
    return {"op": "tvm_op", "name": name, "attrs": attrs, "inputs": inputs}


def graph(
    nodes: list[dict],
    heads: list[list[int]],
    shapes: list[list[int]],
    storage_ids: list[int],
    dtypes: list[str] | None = None,
) -> str:
    """Graph JSON in TVM's layout; arg_nodes are the null nodes, one entry per output."""
    row_ptr = [0]
    for node in nodes:
        row_ptr.append(row_ptr[-1] + int(node.get("attrs", {}).get("num_outputs", 1)))
    return json.dumps(
        {
            "nodes": nodes,
            "arg_nodes": [i for i, node in enumerate(nodes) if node["op"] == "null"],
            "heads": [h + [0] for h in heads],
            "node_row_ptr": row_ptr,
            "attrs": {
                "dltype": ["list_str", dtypes or ["float32"] * row_ptr[-1]],
                "shape": ["list_shape", shapes],
                "storage_id": ["list_int", storage_ids],
            },
        }
    )


def chain_graph() -> str:
    """x, p0 -> t1 = add(x, p0) -> t2 = relu(t1) -> out = mul(t2, p0); out reuses t1's pool."""
    nodes = [
        null("x"),
        null("p0"),
        op("fused_add", "add", [[0, 0, 0], [1, 0, 0]]),
        op("fused_relu", "relu", [[2, 0, 0]]),
        op("fused_mul", "mul", [[3, 0, 0], [1, 0, 0]]),
    ]
    return graph(nodes, [[4, 0]], [[8]] * 5, [0, 1, 2, 3, 2])


def chain_reference(x, p0):
    """numpy semantics of chain_graph."""
    return (x + p0).clip(min=0) * p0
