"""How much of TensorFlow 1's public API opsdk.v1 provides, written into docs/tf1.md.

    python -m opsdk.v1.coverage                     # print the report
    python -m opsdk.v1.coverage --write docs/tf1.md # replace the generated section there
    python -m opsdk.v1.coverage --corpus FOLDER     # the names FOLDER's programs use most

The names are TensorFlow's own listing, read (not imported) from the installed package's
generated API files `tensorflow/_api/v2/compat/v1/<module>/__init__.py`: `tf.*`, `tf.nn.*`,
`tf.train.*`, `tf.losses.*`, `tf.summary.*`, `tf.nn.rnn_cell.*` and `tf.data.*`. TensorFlow 2
lists no `tf.layers` functions (Keras provides them lazily) and no `tf.contrib`; for those two the names
of TensorFlow 1.15 are listed below (`_TF115`). Each name is looked up in opsdk.v1 and counted
as provided, as a builtin op reached by name (`tf.exp`: opsdk's op, TF's positional
arguments converted to tensors), or refused (the error opsdk.v1 raises names it).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any, Optional

MODULES = ("", "nn", "train", "layers", "losses", "summary", "nn.rnn_cell", "contrib.rnn", "data",
           "math", "random", "linalg", "initializers", "debugging", "image",
           "sparse", "io", "python_io", "strings")
BEGIN, END = "<!-- coverage: begin (python -m opsdk.v1.coverage --write) -->", "<!-- coverage: end -->"
_IMPORT = re.compile(r"^from (\S+) import (\w+)(?: as (\w+))?")
_TF115 = {
    "layers": "AveragePooling1D AveragePooling2D AveragePooling3D BatchNormalization Conv1D Conv2D "
              "Conv2DTranspose Conv3D Conv3DTranspose Dense Dropout Flatten InputSpec Layer "
              "MaxPooling1D MaxPooling2D MaxPooling3D SeparableConv1D SeparableConv2D "
              "average_pooling1d average_pooling2d average_pooling3d batch_normalization conv1d "
              "conv2d conv2d_transpose conv3d conv3d_transpose dense dropout flatten "
              "max_pooling1d max_pooling2d max_pooling3d separable_conv1d separable_conv2d",
    "contrib.rnn": "BasicLSTMCell BasicRNNCell DeviceWrapper DropoutWrapper GRUCell "
                   "GRUBlockCell LSTMBlockCell LSTMCell LSTMStateTuple LayerNormBasicLSTMCell "
                   "MultiRNNCell RNNCell ResidualWrapper AttentionCellWrapper "
                   "CoupledInputForgetGateLSTMCell GridLSTMCell NASCell UGRNNCell "
                   "OutputProjectionWrapper InputProjectionWrapper EmbeddingWrapper static_rnn "
                   "static_bidirectional_rnn static_state_saving_rnn "
                   "stack_bidirectional_rnn stack_bidirectional_dynamic_rnn",
}


def tf_names(module: str) -> Optional[list[str]]:
    """TensorFlow's public names of `tf.<module>` (None when TensorFlow is not installed)."""
    if module in _TF115:
        return sorted(_TF115[module].split())
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "_api" / "v2" / "compat" / "v1"
    init = folder.joinpath(*module.split("."), "__init__.py") if module else folder / "__init__.py"
    names = set()
    for line in init.read_text().splitlines():
        match = _IMPORT.match(line)
        if match and not match[1].startswith("tensorflow._api"):  # submodules are not names
            name = match[3] or match[2]
            if not name.startswith("_"):
                names.add(name)
    return sorted(names)


def status(module: str, name: str) -> tuple[str, str]:
    """('provided' | 'builtin op' | 'refused' | 'missing', the error's message) of
    tf.<module>.<name>: 'refused' when the error names opsdk.v1, 'missing' otherwise."""
    import opsdk.v1 as tf
    owner: Any = tf
    for part in filter(None, module.split(".")):
        owner = getattr(owner, part)
    cached = name in vars(owner) if hasattr(owner, "__dict__") else False
    try:
        getattr(owner, name)
    except Exception as exc:  # noqa: BLE001 - any refusal is what is being reported
        message = str(exc).split("\n")[0]
        return ("refused" if "opsdk.v1" in message else "missing"), message
    if owner is tf and not cached and name not in _declared(tf):
        return "builtin op", ""
    return "provided", ""


def _declared(module: Any) -> set:
    source = Path(module.__file__).read_text()
    return set(re.findall(r"\b(\w+)\b", source))


def report() -> tuple[str, dict]:
    """The markdown section and, per module, {name: status}."""
    rows, missing, statuses = [], {}, {}
    for module in MODULES:
        names = tf_names(module)
        if names is None:
            return "TensorFlow is not installed: `pip install opsdk[tf]` to list its names.\n", {}
        got = {n: status(module, n) for n in names}
        statuses[module] = got
        counts = collections.Counter(s for s, _ in got.values())
        label = f"tf.{module}.*" if module else "tf.*"
        source = " (TF 1.15's names)" if module in _TF115 else ""
        rows.append(f"| `{label}`{source} | {len(names)} | {counts['provided']} | "
                    f"{counts['builtin op']} | {counts['refused']} | {counts['missing']} |")
        missing[label] = [n + ("" if s == "refused" else " (plain AttributeError)")
                          for n, (s, _) in got.items() if s in ("refused", "missing")]
    lines = [BEGIN, "", "| names | TF lists | provided | builtin op by name | refused | "
             "absent, no message |", "|---|---|---|---|---|---|", *rows, ""]
    lines.append("Refused (each raises an error naming it; `hasattr` answers False):")
    lines.append("")
    for label, names in missing.items():
        lines.append(f"- `{label}`: {', '.join(names) if names else 'none'}")
    lines += ["", END]
    return "\n".join(lines) + "\n", statuses


def corpus_names(folder: Path, top: int = 60) -> list[tuple[str, int, str]]:
    """The `tf.` names FOLDER's programs use most: (name, programs using it, status)."""
    uses: collections.Counter = collections.Counter()
    for path in sorted(folder.glob("*.py")):
        uses.update(set(re.findall(r"\btf\.((?:\w+\.)*\w+)", path.read_text())))
    out = []
    for name, count in uses.most_common(top):
        module, _, leaf = name.rpartition(".")
        try:
            got = status(module, leaf)[0]
        except Exception as exc:  # noqa: BLE001 - a missing module on the way is a refusal
            got = f"refused ({type(exc).__name__})"
        out.append((name, count, got))
    return out


def write(doc: Path, section: str) -> None:
    """Replace the text between the markers of `doc` (appended when it has none)."""
    text = doc.read_text()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section.rstrip("\n") + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    doc.write_text(text)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m opsdk.v1.coverage",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--write", type=Path, help="a markdown file to update in place")
    parser.add_argument("--corpus", type=Path, help="a folder of TF1 programs")
    args = parser.parse_args(argv)
    if args.corpus is not None:
        for name, count, got in corpus_names(args.corpus):
            print(f"{count:4d}  tf.{name:45s} {got}")
        return 0
    section, _ = report()
    if args.write is not None:
        write(args.write, section)
    else:
        print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
