"""Fixes for unknown names, from the catalog's names only: "did you mean", and the string in
double quotes (``WHERE sex = "Male"``), which SQL reads as a column named ``Male``.

Example:
    >>> did_you_mean("adults", ["adult", "edu_levels"])
    "did you mean 'adult'? "
    >>> did_you_mean("zzz", ["adult"])
    ''
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from sqlglot import exp


def did_you_mean(name: str, candidates: Sequence[str]) -> str:
    """``"did you mean 'X'? "`` for the closest candidates (case-insensitive), or ``""``."""
    lowered = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=2, cutoff=0.75)
    return f"did you mean {' or '.join(repr(lowered[c]) for c in close)}? " if close else ""


def unknown_column_fix(node: exp.Expr, name: str, visible: Sequence[str]) -> str:
    """The fix for an unknown column: a double-quoted string is text, else the closest names."""
    quoted_column = (
        isinstance(node, exp.Column)
        and not node.table
        and isinstance(node.this, exp.Identifier)
        and bool(node.this.quoted)
    )
    if quoted_column:
        quoted = name.replace("'", "''")
        return (
            f"\"{name}\" in double quotes names a column; for the text, write '{quoted}' in "
            "single quotes."
        )
    return did_you_mean(name, visible) + f"use one of: {', '.join(visible)}."
