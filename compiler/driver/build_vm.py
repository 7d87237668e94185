"""relay.vm.compile: a Relay program -> a runtime.vm Executable (TVM's relay.vm.compile).

1. Bind `params` by name into main (they become constants), as relay.build does.
2. Derive main's input checks (compiler.op.shape_func.input_checks: the constraints its
   body puts on its dynamic inputs), which main runs first when it is called.
3. Run relay.build's pass pipeline (compiler.driver.build.optimize: the same passes, the same
   PassContext gating), so primitive functions come out exactly as relay.build fuses them,
   then ToANormalForm and InferType.
4. The backend (compiler.backend.vm) emits bytecode per global function and lifted closure
   and resolves each primitive function to a kernel entry; a dynamic one is preceded by a
   ShapeFunc computing its output shapes (its shape program, from the op registry).
5. Static kernels are lowered and compiled into one library through codegen.jit, the same
   compile path and caches (in memory and on disk) as relay.build: a static-shaped
   function is the same kernel, at the same speed, under either executor. So are the
   symbolic kernels of the dynamic functions whose schedules allow one
   (compiler.backend.vm.symbolic), so the executable runs any valid shape wherever it is
   loaded (PassContext config relayjit.vm.symbolic_kernels False skips them).
6. The executable is validated; if it has dynamic (Any-shaped) kernels, the compile hook
   that builds static ones per concrete shape is attached (compiler.backend.vm.specialise):
   in this process they are the fast path, symbolic kernels or not.
"""
from __future__ import annotations

from typing import Any, Mapping

from codegen import cache as disk_cache
from codegen import jit
from compiler.backend.vm import KernelResolver, ModuleCompiler
from compiler.backend.vm.specialise import Specialiser
from compiler.driver.build import DISABLE_DISK_CACHE, build_target, optimize
from compiler.errors import CompilerError
from compiler.ir.expr import Function
from compiler.ir.module import IRModule
from compiler.ir.types import is_dynamic_type
from compiler.op.shape_func import ShapeFuncError, input_checks
from compiler.passes.bind_params import bind_params_by_name
from compiler.passes.to_anf import ToANormalForm
from compiler.target import Target, resolve as resolve_target
from compiler.transform import PassContext, register_pass_config
from compiler.transform.pass_infra import InferType
from runtime.shape_program import ShapeProgram, ShapeProgramFormatError
from runtime.vm import Executable

__all__ = ["compile", "SYMBOLIC_KERNELS"]

# PassContext(config={"relayjit.vm.symbolic_kernels": False}): no symbolic kernels; the
# executable's dynamic kernels are then only specialised by the compile hook, in this process
# (a faster compile where the executable is never saved: compiler.load(dynamic="vm"))
SYMBOLIC_KERNELS = "relayjit.vm.symbolic_kernels"
register_pass_config(SYMBOLIC_KERNELS, True)


def compile(mod: IRModule | Function, target: Any = None,  # noqa: A001 (TVM's name)
            target_host: Any = None, params: Mapping[str, Any] | None = None,
            mod_name: str = "default") -> Executable:
    """Compile a Relay module (its main and every global function) for the VM."""
    if isinstance(mod, Function):
        mod = IRModule.from_expr(mod)
    if not isinstance(mod, IRModule):
        raise TypeError(f"relay.vm.compile expects an IRModule or a relay Function, got "
                        f"{type(mod).__name__}")
    mod = mod.shallow_copy()
    if "main" not in mod:
        raise CompilerError("relay.vm.compile: the module has no 'main' function")
    target = resolve_target(target)
    if target_host is not None:
        target = Target(target, host=target_host)
    if params:
        mod["main"] = bind_params_by_name(mod["main"], params)
    no_disk = bool(PassContext.current().get_config(DISABLE_DISK_CACHE, False))
    with build_target(target) as options, disk_cache.disabled(no_disk):  # FoldConstant's too
        mod = InferType()(mod)
        checks = _main_input_checks(mod["main"])
        mod = optimize(mod)
        mod = InferType()(ToANormalForm()(mod))
        kernels = KernelResolver(options, mod_name, symbolic=bool(
            PassContext.current().get_config(SYMBOLIC_KERNELS, True)))
        compiler = ModuleCompiler(mod, kernels, {"main": checks} if checks else None)
        functions = compiler.compile()
        lib = jit.build_library(kernels.prim_funcs, options=options) \
            if kernels.prim_funcs else None
    exe = Executable(functions, compiler.constants, kernels.entries, lib,
                     compiler.shape_programs)
    exe.target = target
    if kernels.dynamic:
        exe.compile_hook = Specialiser(kernels.dynamic, options)
    return exe


def _main_input_checks(main: Function) -> ShapeProgram | None:
    """The constraints main's body puts on its dynamic inputs (shared or broadcast dims,
    a matmul's inner dim, ...), checked when it is called; None when its inputs are static
    or the checks cannot be derived (each kernel's shape program still checks its own)."""
    if not any(is_dynamic_type(p.checked_type) for p in main.params):
        return None
    try:
        return input_checks(main)
    except (ShapeFuncError, ShapeProgramFormatError):
        return None
