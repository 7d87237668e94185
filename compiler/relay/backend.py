"""relay.backend: the Executor / Runtime objects relay.build takes (TVM's names)."""
from compiler.driver.executor_runtime import Executor, Runtime  # noqa: F401
from runtime.unsupported import missing_names

__getattr__ = missing_names(__name__, {
    "te_compiler": "kernels are lowered by relay.build; inspect them with "
                   "`relayjit inspect --dump tir|llvm|asm`",
    "compile_engine": "kernels are lowered by relay.build; the PassContext config "
                      "relay.backend.disable_compile_engine_cache is honoured",
    "contrib": "BYOC is not supported",
})
