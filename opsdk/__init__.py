"""opsdk: declare a tensor op once in YAML, write only the kernel body, run it in dataflow graphs."""

__version__ = "0.1.0"
