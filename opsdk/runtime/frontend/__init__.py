"""The front end: apply_op, Variables, the generated ops modules."""
