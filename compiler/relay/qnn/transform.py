"""relay.qnn.transform: CanonicalizeOps and Legalize, as TVM's."""
from compiler.passes.qnn_canonicalize import CanonicalizeOps  # noqa: F401
from compiler.passes.qnn_legalize import Legalize  # noqa: F401
