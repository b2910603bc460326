"""Open a ledger from a URL: the one module that knows every store.

It sits above the stores (which import the interface in :mod:`dalenius.ledger.base`), so the
package has no import cycle; the import-linter contract in ``pyproject.toml`` keeps it so.
"""

from __future__ import annotations

from dalenius.ledger.base import Ledger
from dalenius.ledger.storage import is_postgres_url, sqlite_path

__all__ = ["open_ledger", "sqlite_path"]


def open_ledger(url: str | None) -> Ledger:
    """Open the ledger a URL names.

    ``None`` or ``"memory:"`` gives an in-memory ledger (gone when closed); a file path or
    ``"sqlite:///path"`` a SQLite ledger (created if missing, see :func:`sqlite_path`);
    ``"postgresql://…"`` (or ``"postgres://…"``) a PostgreSQL ledger, which needs
    ``pip install 'dalenius[postgres]'``.

    Example:
        >>> from fractions import Fraction
        >>> from dalenius.core.loss import PureDP
        >>> with open_ledger("memory:") as ledger:
        ...     ledger.set_budget("alice", "adult", PureDP(Fraction(1)))
        ...     ledger.remaining("alice", "adult")
        PureDP(epsilon=Fraction(1, 1))
    """
    # The stores are imported when needed, so importing the package stays cheap.
    path = sqlite_path(url)
    if path is not None:
        from dalenius.ledger.sqlite import SqliteLedger

        return SqliteLedger(path)
    if url is not None and is_postgres_url(url):
        # Imported here: psycopg is an optional extra.
        from dalenius.ledger.postgres import PostgresLedger

        return PostgresLedger(url.strip())
    from dalenius.ledger.memory import MemoryLedger

    return MemoryLedger()
