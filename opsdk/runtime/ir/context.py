"""Error context, attached in one place: what a failing op call or node says it was.

The registry phrases its errors about an op (`<op>: ...` or `op '<op>': ...`); a kernel raises
whatever it raises. Where a node is built or a step runs, `in_context` turns any of these into one
`OpsdkError` that begins with the label of the call (`add (node 'a')` for a graph node, the op's
name for an eager call) and says the rest once, so no message names the op twice and no caller
rewrites another's strings.
"""

from __future__ import annotations

from opsdk.registry.errors import OpError, OpsdkError


def node_label(op_type: str, node: str | None = None) -> str:
    """`add (node 'a')`, or just `add` for an eager call."""
    return op_type if node is None else f"{op_type} (node '{node}')"


def in_context(label: str, exc: BaseException) -> OpsdkError:
    """`exc` as the error the user reads: `label: what went wrong`.

    An error that already carries this label (raised by a step of the same node) passes through
    unchanged; an error of another node (an inner node of a cond branch) keeps its own words
    after the label. An unwritten kernel body stays a NotImplementedError."""
    op = label.split(" ", 1)[0]
    text = str(exc)
    if text.startswith(f"{label}: ") and isinstance(exc, OpsdkError):
        return exc
    if not isinstance(exc, OpsdkError) and not text.startswith(f"{op}: "):
        text = f"{type(exc).__name__}: {exc}"
    # The registry and built kernels begin their messages with the op; do not say it twice.
    for prefix in (f"{op}: ", f"op '{op}': "):
        if text.startswith(prefix):
            text = text[len(prefix):]
            break
    if isinstance(exc, NotImplementedError):
        # An unwritten kernel body: keep the exact words the glue gave when called eagerly.
        return KernelNotWrittenError(str(exc) if label == op else f"{label}: {text}")
    if isinstance(exc, MemoryError):
        return OpMemoryError(f"{label}: out of memory ({text})")
    return OpError(f"{label}: {text}")


class KernelNotWrittenError(OpsdkError, NotImplementedError):
    """A kernel body that `opsdk new` scaffolded and nobody has written yet."""


class OpMemoryError(OpsdkError, MemoryError):
    """An op's kernel (or its outputs' allocation) ran out of memory; names the op and node."""
