"""The compile hook: a kernel for a dynamic (Any-shaped) primitive function at the concrete
shapes the VM meets, so a repeated shape runs a static kernel at static speed.

On the first call of a specialised kernel entry at some argument shapes, the VM asks
Executable.specialised_kernel, which calls this hook once (then keeps the kernel, up to
Executable.max_specialisations of them). The hook rebuilds the primitive function with the
concrete parameter types, re-infers its types, gives its result the output shapes the VM
allocated (the shape program computed them; they may depend on input values, which type
inference cannot see), lowers it through the same KernelTable lowering as a static kernel and
compiles it with codegen.jit: the in-memory and on-disk compile caches apply, so the same
shape in a later process loads object code from disk instead of running LLVM.
"""
from __future__ import annotations

from compiler.backend.kernel_table import lower_kernel
from compiler.errors import CompilerError
from compiler.ir.expr import Call, Function, Tuple, TupleGetItem, Var
from compiler.ir.module import IRModule
from compiler.ir.traversal import post_order, rewrite_post_order
from compiler.ir.types import TensorType, TupleType, Type, is_dynamic_type
from compiler.transform.pass_infra import InferType
from codegen import jit
from codegen.options import CodegenOptions
from runtime.library import Kernel

from .value_types import tensor_types


class Specialiser:
    """The hook relay.vm.compile attaches to an executable with specialised kernel entries."""

    def __init__(self, functions: dict[int, Function], options: CodegenOptions) -> None:
        self.functions = functions  # kernel entry index -> its primitive function
        self.options = options  # what relay.vm.compile built for

    def __call__(self, exe, index: int, args: tuple) -> Kernel:
        entry = exe.kernels[index]
        func = self.functions[index]
        concrete = specialise(func, args[:entry.num_inputs], args[entry.num_inputs:])
        lib = jit.build_library([lower_kernel(concrete, entry.name, self.options)],
                                options=self.options)
        return lib.get_function(entry.name)


def specialise(func: Function, inputs: tuple, outputs: tuple) -> Function:
    """func with these ((shape, dtype), ...) tensors for its flattened parameters and result,
    typed; CompilerError when they do not fit its types."""
    flat = iter(inputs)
    params, subst = [], {}
    for p in func.params:
        new = Var(p.name_hint, _concrete(p.checked_type, flat, f"parameter %{p.name_hint}"))
        params.append(new)
        subst[p] = new
    ret = func.ret_type or func.body.checked_type
    ret = _concrete(ret, iter(outputs), "the result")
    body = rewrite_post_order(func.body, lambda old, new: subst.get(old, new))
    typed = InferType()(IRModule.from_expr(Function(params, body, None, func.type_params,
                                                    func.attrs)))["main"]
    got = typed.body.checked_type
    if any(not _fits(t, r) for t, r in zip(tensor_types(got, "the result"),
                                           tensor_types(ret, "the result"))):
        raise CompilerError(f"specialising {func.attrs}: the result is {got} at these inputs, "
                            f"the shape program said {ret}")
    _set_result_types(typed.body, ret)
    return Function(typed.params, typed.body, ret, typed.type_params, typed.attrs)


def _set_result_types(body, ret: Type) -> None:
    """Give the nodes computing the result the shapes the VM allocated where inference left
    them Any (value-dependent shapes: dyn.* ops, argwhere); no other node may stay dynamic.
    The result is a call or a tuple of them: ops with such shapes are OPAQUE, so alone."""
    stack = [(body, ret)]
    while stack:
        node, ty = stack.pop()
        if type(node) is Tuple and isinstance(ty, TupleType):
            stack.extend(zip(node.fields, ty.fields))
        elif is_dynamic_type(node.checked_type):
            node._set_checked_type(ty)
    for node in post_order(body):
        if isinstance(node, (Call, Tuple, TupleGetItem)) and is_dynamic_type(node.checked_type):
            raise CompilerError(f"specialising: a {type(node).__name__} inside the function "
                                f"still has a dynamic type {node.checked_type} at these shapes")


def _concrete(ty: Type, shapes, where: str) -> Type:
    """ty with each tensor's dims taken, in order, from shapes ((shape, dtype) per tensor)."""
    if isinstance(ty, TensorType):
        try:
            shape, dtype = next(shapes)
        except StopIteration:
            raise CompilerError(f"specialising: too few shapes for {where}") from None
        if dtype != ty.dtype or len(shape) != len(ty.shape) or any(
                isinstance(d, int) and d != s for d, s in zip(ty.shape, shape)):
            raise CompilerError(f"specialising: {where} is {ty}, given {tuple(shape)} {dtype}")
        return TensorType(tuple(shape), dtype)
    if isinstance(ty, TupleType):
        return TupleType([_concrete(f, shapes, where) for f in ty.fields])
    raise CompilerError(f"specialising: {where} has type {ty}; expected tensors")


def _fits(inferred: TensorType, wanted: TensorType) -> bool:
    """An inferred result type agrees with the allocated one (Any dims agree with anything)."""
    return inferred.dtype == wanted.dtype and len(inferred.shape) == len(wanted.shape) and all(
        not isinstance(a, int) or a == b for a, b in zip(inferred.shape, wanted.shape))
