"""`python -m opsdk.cli`: the same as the `opsdk` command."""

from .main import entry

entry()
