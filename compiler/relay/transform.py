"""relay.transform: the pass infrastructure plus the Relay passes, as tvm.relay.transform."""
from __future__ import annotations

from compiler.ir.type_infer import InferTypeLocal, infer_type_local  # noqa: F401
from compiler.passes.alter_op_layout import AlterOpLayout  # noqa: F401
from compiler.passes.annotate_spans import AnnotateSpans  # noqa: F401
from compiler.passes.backward_fold_scale_axis import BackwardFoldScaleAxis  # noqa: F401
from compiler.passes.convert_layout import ConvertLayout  # noqa: F401
from compiler.passes.dead_code import DeadCodeElimination  # noqa: F401
from compiler.passes.dynamic_to_static import DynamicToStatic  # noqa: F401
from compiler.passes.eliminate_common_subexpr import EliminateCommonSubexpr  # noqa: F401
from compiler.passes.fake_quantization_to_integer import FakeQuantizationToInteger  # noqa: F401
from compiler.passes.fold_constant import FoldConstant  # noqa: F401
from compiler.passes.fq2i_types import TensorAffineType, TupleAffineType  # noqa: F401
from compiler.passes.fold_scale_axis import FoldScaleAxis  # noqa: F401
from compiler.passes.forward_fold_scale_axis import ForwardFoldScaleAxis  # noqa: F401
from compiler.passes.fuse_ops import FuseOps  # noqa: F401
from compiler.passes.inline_quantization_scalars import InlineQuantizationScalars  # noqa: F401
from compiler.passes.remove_unused_functions import RemoveUnusedFunctions  # noqa: F401
from compiler.passes.simplify_expr import SimplifyExpr  # noqa: F401
from compiler.passes.simplify_inference import SimplifyInference  # noqa: F401
from compiler.passes.to_anf import ToANormalForm, ToANormalFormExpr  # noqa: F401
from compiler.transform import (FunctionPass, ModulePass, Pass, PassContext, PassInfo,  # noqa: F401
                                PassInstrument, PassTimingInstrument, PrintIR, Sequential,
                                function_pass, module_pass, pass_instrument, register_pass,
                                register_pass_config)
from compiler.transform.pass_infra import InferType  # noqa: F401
