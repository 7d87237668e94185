"""tvm.error: the exception names TVM scripts catch, mapped onto relayjit's classes. Every
compiler error is a TVMError; runtime failures (KernelError, VMError) are too."""
from runtime.errors import TVMError, VMError  # noqa: F401
from runtime.unsupported import missing_names

from .errors import (CompilerError, DiagnosticError, OpNotImplemented,  # noqa: F401
                     TypeInferenceError)
from .frontend.onnx_ops.common import FrontendError
from .ir.tokenizer import ParseError  # noqa: F401

InternalError = CompilerError
OpError = FrontendError
OpAttributeRequired = OpAttributeInvalid = OpAttributeUnImplemented = FrontendError

__getattr__ = missing_names(__name__, {
    "RPCError": "RPC to remote devices is not supported",
    "register_error": "raise relayjit's classes (compiler.errors) or subclass TVMError",
})
