"""tvm.contrib.debugger: `from tvm.contrib.debugger import debug_executor`."""
from runtime import debug_executor  # noqa: F401
from runtime.aliases import alias_submodules

alias_submodules(__name__, {"debug_executor": debug_executor})
