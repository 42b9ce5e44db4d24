"""The front end: apply_op, Tensor operators, Variables, the generated ops modules.

Importing it attaches the Python operators to graph Tensors (operators.py).
"""

from opsdk.runtime.frontend import operators  # noqa: F401 - attaches Tensor's operators
