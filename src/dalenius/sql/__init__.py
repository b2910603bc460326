"""L3: the SQL edge — the only package that imports sqlglot.

:mod:`~dalenius.sql.parse` reads SQL text with located errors, :mod:`~dalenius.sql.bind` validates
it against the catalog and builds a logical plan, :mod:`~dalenius.sql.emit` writes the exact,
clipped aggregate query for an engine's dialect.
"""
