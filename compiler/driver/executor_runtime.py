"""TVM's relay.backend.Executor / Runtime objects, as relay.build(..., executor=, runtime=)
takes them: relayjit builds for the graph executor ("graph") on its own C++-free runtime
("cpp" in TVM's terms). Other kinds and options are refused by name, never ignored."""
from __future__ import annotations

from typing import Any, Mapping

from compiler.errors import CompilerError

_EXECUTORS = {"graph": "relay.build's graph executor",
              "aot": "ahead-of-time executors are not supported: use 'graph', or "
                     "relay.vm.compile for control flow"}
_RUNTIMES = {"cpp": "relayjit's runtime package",
             "crt": "the C runtime (microTVM) is not supported: use 'cpp'"}
_EXECUTOR_OPTIONS = {"link-params": "set PassContext config relay.FuseOps.link_params instead"}
_RUNTIME_OPTIONS = {"system-lib": "export_library writes one loadable .rjit file instead"}


class _Named:
    kinds: dict[str, str] = {}
    option_alternatives: dict[str, str] = {}
    what = ""

    def __init__(self, name: str, options: Mapping[str, Any] | None = None) -> None:
        if name not in self.kinds:
            raise CompilerError(f"relay.backend.{self.what}({name!r}): expected one of "
                                f"{sorted(self.kinds)}")
        if name != next(iter(self.kinds)):
            raise CompilerError(f"relay.backend.{self.what}({name!r}): {self.kinds[name]}")
        options = dict(options or {})
        for key, value in options.items():
            if value:  # a false/empty option asks for nothing
                why = self.option_alternatives.get(key, "relayjit has no such option")
                raise CompilerError(f"relay.backend.{self.what}({name!r}) option {key}="
                                    f"{value!r} is not supported: {why}")
        self.name = name
        self.options = options

    def __getitem__(self, key: str) -> Any:
        return self.options[key]

    def __repr__(self) -> str:
        return f"{self.what}({self.name!r}, {self.options})"


class Executor(_Named):
    """TVM's relay.backend.Executor: "graph" (the only kind relay.build makes)."""

    kinds, option_alternatives, what = _EXECUTORS, _EXECUTOR_OPTIONS, "Executor"


class Runtime(_Named):
    """TVM's relay.backend.Runtime: "cpp" (relayjit's runtime)."""

    kinds, option_alternatives, what = _RUNTIMES, _RUNTIME_OPTIONS, "Runtime"


def check_executor_runtime(executor: Any, runtime: Any) -> None:
    """relay.build's executor= and runtime=: None, the objects above, or their names."""
    for value, cls in ((executor, Executor), (runtime, Runtime)):
        if value is None or isinstance(value, cls):
            continue
        if isinstance(value, str):
            cls(value)
            continue
        raise CompilerError(f"relay.build: {cls.what.lower()}= expects relay.backend."
                            f"{cls.what}(...) or a name, got {type(value).__name__}")
