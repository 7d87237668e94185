"""Primitive functions -> kernels: TVM's kernel names, one kernel per structural class.

Both executors lower through this table: relay.build for the graph executor and
relay.vm.compile for the VM, so a static-shaped primitive function becomes the same kernel,
with the same name, under either.
"""
from __future__ import annotations

import zlib

from codegen.options import CodegenOptions
from compiler.backend.graph_codegen import CONCAT, NOP, is_byte_concat
from compiler.errors import CompilerError
from compiler.ir.expr import Call, Function, Tuple, Var
from compiler.ir.module import IRModule
from compiler.ir.structural import structural_equal, structural_hash
from compiler.ir.traversal import post_order, rewrite_post_order
from compiler.ir.types import TensorType, TupleType
from compiler.op.compute.lower_function import lower_primitive_function
from compiler.transform import PassContext
from compiler.transform.pass_infra import InferType

__all__ = ["KernelTable", "kernel_name_for", "lower_kernel", "MAX_NAME_LENGTH",
           "DISABLE_COMPILE_ENGINE_CACHE"]

MAX_NAME_LENGTH = 80
DISABLE_COMPILE_ENGINE_CACHE = "relay.backend.disable_compile_engine_cache"  # TVM's key


def kernel_name_for(func: Function, mod_name: str = "default") -> str:
    """TVM's name: tvmgen_<mod>_fused_<op>_<op>... from the ops in post order."""
    names = [n.op.name.replace(".", "_") for n in post_order(func.body)
             if type(n) is Call and not isinstance(n.op, (Function, Var))]
    candidate = "fused_" + "_".join(names) if names else "fused_identity"
    if len(candidate) > MAX_NAME_LENGTH:
        digest = zlib.crc32(candidate.encode())
        candidate = f"{candidate[:MAX_NAME_LENGTH]}_{digest:08x}"
    prefix = f"tvmgen_{mod_name}_" if mod_name else ""
    return prefix + candidate


def _flatten_tuple_params(func: Function) -> Function:
    """Replace tuple-typed params by one param per tensor field (the lowering takes tensors)."""
    if not any(isinstance(p.checked_type, TupleType) for p in func.params):
        return func
    new_params: list[Var] = []
    subst: dict = {}
    for p in func.params:
        ty = p.checked_type
        if not isinstance(ty, TupleType):
            new_params.append(p)
            continue
        stack_fields = []
        for k, f in enumerate(ty.fields):
            if not isinstance(f, TensorType):
                raise CompilerError(f"relay.build: nested tuple parameter {p.name_hint} "
                                    f"({ty}) is not supported")
            v = Var(f"{p.name_hint}_{k}", f)
            new_params.append(v)
            stack_fields.append(v)
        subst[p] = Tuple(stack_fields)
    body = rewrite_post_order(func.body, lambda old, new: subst.get(old, new))
    flat = Function(new_params, body, func.ret_type, func.type_params, func.attrs, func.span)
    return InferType()(IRModule.from_expr(flat))["main"]


class KernelTable:
    """Primitive functions -> kernel names, sharing one kernel per structural class.

    Reshape-only functions map to NOP and, with byte_concat, concatenations of whole byte
    runs to CONCAT (graph codegen lays those out in memory); neither gets a kernel.

    Under the PassContext config "relay.backend.disable_compile_engine_cache" nothing is
    shared: as TVM's compile engine lowers each function afresh, each structurally equal one
    gets a kernel of its own (named _1, _2, ...)."""

    def __init__(self, mod_name: str, options: CodegenOptions, byte_concat: bool = True):
        self.mod_name = mod_name
        self.options = options  # what the kernels are lowered for
        self.byte_concat = byte_concat
        self.share = not PassContext.current().get_config(DISABLE_COMPILE_ENGINE_CACHE)
        self.by_hash: dict[int, list] = {}
        self.names: dict[int, str] = {}  # id(function as called in main) -> kernel name
        self._named: list = []  # the functions behind self.names: kept, so no id is reused
        self.used: set[str] = set()
        self.prim_funcs: list = []

    def unique_name(self, name: str) -> str:
        """name, or name_1, name_2, ...: one no kernel of this table has (the VM's dynamic
        kernels take theirs here too, so a library's names never clash)."""
        if name not in self.used:
            self.used.add(name)
            return name
        k = 1
        while f"{name}_{k}" in self.used:
            k += 1
        self.used.add(f"{name}_{k}")
        return f"{name}_{k}"

    def add(self, func: Function) -> str:
        if id(func) in self.names:
            return self.names[id(func)]
        self._named.append(func)
        if self.byte_concat and is_byte_concat(func):
            self.names[id(func)] = CONCAT
            return CONCAT
        if int(func.get_attr("relay.reshape_only", 0) or 0) == 1 and len(func.params) == 1 \
                and isinstance(func.ret_type or func.body.checked_type, TensorType):
            self.names[id(func)] = NOP
            return NOP
        key = structural_hash(func)
        for other, name in self.by_hash.get(key, ()) if self.share else ():
            if structural_equal(other, func):
                self.names[id(func)] = name
                return name
        name = self.unique_name(kernel_name_for(func, self.mod_name))
        self.by_hash.setdefault(key, []).append((func, name))
        self.names[id(func)] = name
        self.prim_funcs.append(lower_kernel(func, name, self.options))
        return name


def lower_kernel(func: Function, name: str, options: CodegenOptions):
    """The PrimFunc of primitive function func, named name (tuple params flattened), for
    `options`."""
    flat = _flatten_tuple_params(func)
    try:
        return lower_primitive_function(flat, name, options)
    except CompilerError:
        raise
    except Exception as err:  # codegen errors: say where
        raise CompilerError(f"relay.build > {type(err).__name__}: {err}") from err
