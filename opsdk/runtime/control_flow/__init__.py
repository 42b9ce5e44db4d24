"""cond and while_loop: builders, run rules and gradient rules, together.

Importing this package registers the node types (run.py) and their gradient rules
(gradients.py).
"""

from opsdk.runtime.control_flow import gradients, run  # noqa: F401 - registers the rules
from opsdk.runtime.control_flow.builders import cond, while_loop

__all__ = ["cond", "while_loop"]
