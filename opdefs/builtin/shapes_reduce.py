"""Shape functions of the scans and contractions in reduce.yaml."""

from __future__ import annotations


def along_axis(shapes, attrs):
    """x's shape, attr axis checked against its rank (cumsum)."""
    x, axis = shapes["x"], int(attrs["axis"])
    if x is not None and (len(x) == 0 or not -len(x) <= axis < len(x)):
        raise ValueError(f"axis {axis} is out of range for x of rank {len(x)}")
    return [x]


def einsum(shapes, attrs):
    """The output's dims, one per letter after '->', each the size its letter names in the
    operands; terms checked against the operands' ranks and each other."""
    equation = str(attrs["equation"]).replace(" ", "")
    xs = shapes["xs"]
    if "." in equation:
        raise ValueError(f"equation '{equation}': '...' is not taken; name every dim")
    if equation.count("->") != 1:
        raise ValueError(f"equation '{equation}' must name the output after one '->' "
                         "(the explicit form, e.g. 'ij,jk->ik')")
    terms, out = equation.split("->")
    terms = terms.split(",")
    if len(terms) != len(xs):
        raise ValueError(f"equation '{equation}' has {len(terms)} operand term(s) but "
                         f"{len(xs)} operand(s) were given")
    sizes = {}
    for k, (term, shape) in enumerate(zip(terms, xs)):
        if not all("a" <= c <= "z" or "A" <= c <= "Z" for c in term):
            raise ValueError(f"equation '{equation}': term {k} '{term}' must be letters only")
        if len(set(term)) != len(term):
            raise ValueError(f"equation '{equation}': term {k} '{term}' repeats a letter "
                             "(traces and diagonals are not taken)")
        if shape is not None and len(shape) != len(term):
            raise ValueError(f"equation '{equation}': term {k} '{term}' names {len(term)} "
                             f"dim(s) but operand {k} has rank {len(shape)}")
        for c, d in zip(term, shape if shape is not None else [None] * len(term)):
            if d is not None and sizes.get(c) is not None and sizes[c] != d:
                raise ValueError(f"equation '{equation}': letter '{c}' is {sizes[c]} in one "
                                 f"operand and {d} in operand {k}")
            if d is not None or c not in sizes:
                sizes[c] = d if d is not None else sizes.get(c)
    if len(set(out)) != len(out) or any(c not in sizes for c in out):
        raise ValueError(f"equation '{equation}': the output '{out}' must name distinct "
                         "letters of the operands")
    return [tuple(sizes[c] for c in out)]
