"""`tf.app.run`, `tf.app.flags` / `tf.flags`, and `tf.gfile` over the local file system."""

from __future__ import annotations

import argparse
import glob as _glob
import os
import shutil
import sys
from types import SimpleNamespace
from typing import Any, Callable, Optional

from opsdk.registry.errors import OpsdkError


class NotProvided(OpsdkError, AttributeError):
    """A TF1 name opsdk.v1 does not provide (an AttributeError too, so hasattr() answers False)."""


def not_provided(path: str) -> NotProvided:
    """The error for `tf.<path>`, naming it and where the provided names are listed."""
    return NotProvided(f"tf.{path} is not provided by opsdk.v1 (docs/tf1.md lists what is)")


def refuse_missing(module: str) -> Callable[[str], Any]:
    """A module `__getattr__` refusing the names of `tf.<module>` opsdk.v1 lacks."""
    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise not_provided(f"{module}.{name}")
    return __getattr__


class Namespace(SimpleNamespace):
    """A TF1 namespace object (`tf.train`): names it lacks are refused like a module's."""

    def __init__(self, path: str, **names: Any):
        super().__init__(**names)
        object.__setattr__(self, "_path", path)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise not_provided(f"{self._path}.{name}")


class _Flags:
    """TF's FLAGS: `DEFINE_*` add options; reading a flag parses sys.argv once (unknown
    arguments are left for the program, as absl does with `app.run`)."""

    def __init__(self) -> None:
        object.__setattr__(self, "_parser", argparse.ArgumentParser(add_help=False))
        object.__setattr__(self, "_values", None)

    def _define(self, kind: Callable, name: str, default: Any, help: str = "", **_: Any) -> None:
        self._parser.add_argument(f"--{name}", type=kind, default=default, help=help)
        object.__setattr__(self, "_values", None)

    def _parse(self, argv: Optional[list] = None) -> list:
        values, rest = self._parser.parse_known_args(sys.argv[1:] if argv is None else argv[1:])
        object.__setattr__(self, "_values", values)
        return [sys.argv[0] if argv is None else argv[0], *rest]

    def __getattr__(self, name: str) -> Any:
        if self._values is None:
            self._parse()
        try:
            return getattr(self._values, name)
        except AttributeError:
            raise AttributeError(f"flag '{name}' is not defined (DEFINE_* it first)") from None

    def __setattr__(self, name: str, value: Any) -> None:
        if self._values is None:
            self._parse()
        setattr(self._values, name, value)


FLAGS = _Flags()


def _bool(text: Any) -> bool:
    return text if isinstance(text, bool) else str(text).lower() in ("1", "true", "yes")


flags = SimpleNamespace(
    FLAGS=FLAGS,
    DEFINE_string=lambda name, default, help="", **kw: FLAGS._define(str, name, default, help),
    DEFINE_integer=lambda name, default, help="", **kw: FLAGS._define(int, name, default, help),
    DEFINE_float=lambda name, default, help="", **kw: FLAGS._define(float, name, default, help),
    DEFINE_boolean=lambda name, default, help="", **kw: FLAGS._define(_bool, name, default, help),
)
flags.DEFINE_bool = flags.DEFINE_boolean


def run(main: Optional[Callable] = None, argv: Optional[list] = None) -> None:
    """Parse the flags, call `main(argv)` (default: `__main__.main`) and exit with its result."""
    rest = FLAGS._parse(argv)
    main = main or sys.modules["__main__"].main
    sys.exit(main(rest))


app = SimpleNamespace(run=run, flags=flags)


def _makedirs(path: Any) -> None:
    os.makedirs(path, exist_ok=True)


def _delete_recursively(path: Any) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


gfile = SimpleNamespace(
    Exists=os.path.exists, exists=os.path.exists, MakeDirs=_makedirs, makedirs=_makedirs,
    MkDir=os.mkdir, DeleteRecursively=_delete_recursively, Remove=os.remove,
    IsDirectory=os.path.isdir, isdir=os.path.isdir, ListDirectory=os.listdir, listdir=os.listdir,
    Glob=_glob.glob, glob=_glob.glob, GFile=open, Open=open, FastGFile=open, Copy=shutil.copy,
    Rename=os.replace, Walk=os.walk,
)
