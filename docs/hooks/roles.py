"""A griffe extension for the API reference: Sphinx roles in docstrings shown as code.

The docstrings cite other objects with Sphinx roles (``:class:`Catalog```, ``:meth:`explain```),
which Markdown would print raw. Each role becomes inline code of the name it cites (without a
leading ``~`` or the module path before a ``~``).
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

ROLE = re.compile(r":(?:class|meth|func|mod|data|attr|exc|obj):`~?([^`]+)`")


class SphinxRoles(Extension):
    """Rewrite ``:role:`name``` as ```name``` in every docstring of the package."""

    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        """Rewrite one object's docstring, once it is complete."""
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(r"`\1`", obj.docstring.value)
