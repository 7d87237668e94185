"""relay.vision: vision op constructors (roi_align, all_class_non_max_suppression)."""
from compiler.op.vision import *  # noqa: F401,F403
from compiler.op.vision import __all__ as _roi_all
from compiler.op.vision_nms import *  # noqa: F401,F403
from compiler.op.vision_nms import __all__ as _nms_all

__all__ = [*_roi_all, *_nms_all]
