"""Pass objects (ModulePass, FunctionPass, Sequential), their decorators and the pass registry.

Semantics follow TVM's src/ir/transform.cc: calling a pass runs it whatever its opt_level,
wrapped by the current PassContext's instruments; Sequential decides per pass (disabled,
required, opt_level) and first runs the passes it names in `required`.
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable, Iterable

from compiler.errors import CompilerError
from compiler.ir.expr import Function
from compiler.ir.module import IRModule
from compiler.ir.type_infer import infer_module

from .context import PassContext, PassInfo, _name_list


class Pass:
    """Base class: a transformation IRModule -> IRModule described by `info`."""

    info: PassInfo

    def __call__(self, mod: IRModule) -> IRModule:
        return self._run(mod, PassContext.current())

    def _run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """Run under ctx: the instruments may skip it, and see it before and after."""
        if not isinstance(mod, IRModule):
            raise TypeError(f"pass {self.info.name}: expected an IRModule, got "
                            f"{type(mod).__name__} (wrap an expression with IRModule.from_expr)")
        if not ctx._instrument_before(mod, self.info):
            return mod
        out = self._transform(mod, ctx)
        if not isinstance(out, IRModule):
            raise CompilerError(f"pass {self.info.name} returned {type(out).__name__}, expected "
                                "an IRModule")
        ctx._instrument_after(out, self.info)
        return out

    def _transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError(f"{type(self).__name__} does not implement _transform")

    def __str__(self) -> str:
        return (f"{type(self).__name__}({self.info.name}, opt_level={self.info.opt_level}"
                + (f", required={list(self.info.required)}" if self.info.required else "") + ")")

    __repr__ = __str__


class ModulePass(Pass):
    """A pass over the whole module: pass_func(mod, ctx) -> IRModule."""

    def __init__(self, pass_func: Callable, info: PassInfo):
        self.pass_func = pass_func
        self.info = info

    def _transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        # a shallow copy, so a pass that assigns mod["f"] never edits the caller's module;
        # a pass that hands that copy back unchanged returns the input itself, as TVM's do
        copy = mod.shallow_copy()
        out = self.pass_func(copy, ctx)
        return mod if out is copy and copy.holds_the_same(mod) else out


_SKIP_ATTRS = ("Compiler", "Extern", "SkipOptimization")


def is_optimizable(func) -> bool:
    """Function passes leave external, skipped and primitive (fused) functions alone."""
    if not isinstance(func, Function):
        return False
    attrs = func.attrs or {}
    if any(attrs.get(key) not in (None, 0) for key in _SKIP_ATTRS):
        return False
    return not func.is_primitive


class FunctionPass(Pass):
    """A pass over each optimizable function: pass_func(func, mod, ctx) -> Function.

    Like Relay's, it runs InferType on its result (through the context, so instruments see it):
    that is why InferType is defined here, with the pass infrastructure.
    """

    def __init__(self, pass_func: Callable, info: PassInfo):
        self.pass_func = pass_func
        self.info = info

    def _transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        updated = mod.shallow_copy()
        updates = []
        for gv, func in mod.functions.items():
            if not is_optimizable(func):
                continue
            new = self.pass_func(func, updated, ctx)
            if not isinstance(new, Function):
                raise CompilerError(f"function pass {self.info.name} returned "
                                    f"{type(new).__name__} for @{gv.name_hint}, expected a "
                                    "Function")
            updates.append((gv, new))
        for gv, new in updates:
            updated.update_func(gv, new)
        return InferType()._run(updated, ctx)


class Sequential(Pass):
    """Runs passes in order, each when enabled by the current context, after its requirements."""

    def __init__(self, passes: Iterable[Pass] | None = None, opt_level: int = 0,
                 name: str = "sequential", required=None, traceable: bool = False):
        passes = list(passes or [])
        for i, p in enumerate(passes):
            if not isinstance(p, Pass):
                raise TypeError(f"Sequential({name!r}) passes[{i}]: expected a Pass, got "
                                f"{type(p).__name__} {p!r:.60}")
        self.passes = passes
        self.info = PassInfo(opt_level, name, required, traceable)

    def _transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for p in self.passes:
            if not ctx.pass_enabled(p.info):
                continue
            for dep in p.info.required:
                mod = get_pass(dep, needed_by=p.info.name)._run(mod, ctx)
            mod = p._run(mod, ctx)
        return mod

    def __str__(self) -> str:
        inner = ", ".join(p.info.name for p in self.passes)
        return f"Sequential({self.info.name}, opt_level={self.info.opt_level}, passes=[{inner}])"

    __repr__ = __str__


# ---------------------------------------------------------------------------------------------
# the registry of pass factories, so `required=["InferType"]` resolves by name

# (each pass module registers its factories when it is imported; importing `compiler` imports
# every built-in pass through the relay facade)
_FACTORIES: dict[str, Callable[[], Pass]] = {}


def register_pass(factory: Callable | None = None, *, name: str | None = None):
    """Register a no-argument pass factory under its name (decorator or plain call)."""
    def add(fn):
        key = name or fn.__name__
        old = _FACTORIES.get(key)
        if old is not None and old is not fn and getattr(old, "__qualname__", None) != \
                getattr(fn, "__qualname__", None):
            raise CompilerError(f"pass name {key!r} is registered twice ({old!r} and {fn!r})")
        _FACTORIES[key] = fn
        return fn
    if factory is not None:
        return add(factory)
    return add


def get_pass(name: str, needed_by: str | None = None) -> Pass:
    """A fresh instance of the registered pass `name`."""
    factory = _FACTORIES.get(name)
    if factory is None:
        who = f"pass {needed_by!r} requires {name!r}, which" if needed_by else f"{name!r}"
        raise CompilerError(f"{who} is not a registered pass; registered passes: "
                            f"{list_passes()} (register a factory with register_pass)")
    p = factory()
    if not isinstance(p, Pass):
        raise CompilerError(f"the factory registered for pass {name!r} returned "
                            f"{type(p).__name__}, expected a Pass")
    return p


def list_passes() -> list[str]:
    """Names of every registered pass factory."""
    return sorted(_FACTORIES)


def _infer_types(mod: IRModule, ctx: PassContext) -> IRModule:
    return infer_module(mod)


@register_pass
def InferType() -> ModulePass:  # noqa: N802  (TVM's pass name)
    """The InferType module pass (opt_level 0): types every function, filling annotations."""
    return ModulePass(_infer_types, PassInfo(0, "InferType"))


# ---------------------------------------------------------------------------------------------
# decorators

def _wrap_class(pass_cls: type, info: PassInfo, base: type, method: str) -> type:
    """Calling the returned class with pass_cls's ctor args gives a pass object."""
    if not callable(getattr(pass_cls, method, None)):
        raise TypeError(f"a class decorated as a {base.__name__} must define {method}(...); "
                        f"{pass_cls.__name__} does not")

    class PyPass(base):
        def __init__(self, *args, **kwargs):
            inst = pass_cls(*args, **kwargs)
            base.__init__(self, getattr(inst, method), info)
            object.__setattr__(self, "_inst", inst)

        def __getattr__(self, attr):
            if attr == "_inst":
                raise AttributeError(attr)
            return getattr(self._inst, attr)

    functools.update_wrapper(PyPass.__init__, pass_cls.__init__)
    PyPass.__name__ = pass_cls.__name__
    PyPass.__qualname__ = pass_cls.__qualname__
    PyPass.__doc__ = pass_cls.__doc__
    PyPass.__module__ = pass_cls.__module__
    return PyPass


def _decorator(kind: type, method: str, pass_func, opt_level, name, required, traceable):
    label = "module_pass" if kind is ModulePass else "function_pass"
    if opt_level is None:
        raise ValueError(f"{label}: opt_level is missing; write @{label}(opt_level=...)")
    required = _name_list(f"{kind.__name__} required", required)

    def create(arg):
        pass_name = name or getattr(arg, "__name__", None)
        info = PassInfo(opt_level, pass_name, required, traceable)
        if inspect.isclass(arg):
            return _wrap_class(arg, info, kind, method)
        if not callable(arg):
            raise TypeError(f"{kind.__name__} decorator expects a function or a class, got "
                            f"{type(arg).__name__}")
        return kind(arg, info)

    if pass_func is not None:
        return create(pass_func)
    return create


def module_pass(pass_func=None, opt_level: int | None = None, name: str | None = None,
                required=None, traceable: bool = False):
    """Make a ModulePass from `f(mod, ctx)` or a class with `transform_module(mod, ctx)`."""
    return _decorator(ModulePass, "transform_module", pass_func, opt_level, name, required,
                      traceable)


def function_pass(pass_func=None, opt_level: int | None = None, name: str | None = None,
                  required=None, traceable: bool = False):
    """Make a FunctionPass from `f(func, mod, ctx)` or a class with `transform_function`."""
    return _decorator(FunctionPass, "transform_function", pass_func, opt_level, name, required,
                      traceable)
