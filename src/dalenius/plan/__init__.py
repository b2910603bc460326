"""L2: the query plan — small frozen dataclasses, their sensitivity, cost and explanation.

The plan knows nothing of SQL text or of any engine: :mod:`dalenius.sql` builds it from SQL and
turns it back into SQL for an engine; :mod:`dalenius.engine` runs it.
"""
