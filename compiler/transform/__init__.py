"""compiler.transform: the pass infrastructure (tvm.transform): contexts, passes, instruments."""
from .context import PassContext, PassInfo, list_pass_configs, register_pass_config  # noqa: F401
from compiler.ir.instrument import (PassInstrument, PassProfile, PassTimingInstrument,  # noqa: F401
                          pass_instrument)
from .pass_infra import (FunctionPass, ModulePass, Pass, Sequential, function_pass,  # noqa: F401
                         get_pass, is_optimizable, list_passes, module_pass, register_pass)
from .print_ir import PrintIR  # noqa: F401
