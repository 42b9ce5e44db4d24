"""The dtypes an op may declare, and their C++ spellings."""

from __future__ import annotations

# Name -> C++ type. Any NumPy numeric dtype (and bool) may be declared.
CPP_TYPES: dict[str, str] = {
    "bool": "bool",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
    "float16": "opsdk::half",
    "float32": "float",
    "float64": "double",
    "complex64": "std::complex<float>",
    "complex128": "std::complex<double>",
}

DTYPE_NAMES: tuple[str, ...] = tuple(CPP_TYPES)
FLOAT_DTYPES: frozenset[str] = frozenset({"float16", "float32", "float64"})
COMPLEX_DTYPES: frozenset[str] = frozenset({"complex64", "complex128"})
INT_DTYPES: frozenset[str] = frozenset(n for n in DTYPE_NAMES if n.startswith(("int", "uint")))

# Convenience groups usable in a type attr's list: `T: [floats]` or `T: [numbers]`.
DTYPE_GROUPS: dict[str, tuple[str, ...]] = {
    "floats": ("float16", "float32", "float64"),
    "ints": tuple(n for n in DTYPE_NAMES if n in INT_DTYPES),
    "reals": tuple(n for n in DTYPE_NAMES if n in INT_DTYPES or n in FLOAT_DTYPES),
    "numbers": tuple(n for n in DTYPE_NAMES if n != "bool"),
    "all": DTYPE_NAMES,
}


def is_differentiable_dtype(name: str) -> bool:
    """Whether gradients flow through a tensor of this dtype (floats and complex only)."""
    return name in FLOAT_DTYPES or name in COMPLEX_DTYPES
