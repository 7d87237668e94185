"""relay.qnn: the QNN dialect (relay.qnn.op) and its passes (relay.qnn.transform), as TVM's."""
from . import op, transform  # noqa: F401
