"""L3: executors — compute exact, clipped, contribution-bounded aggregates inside a database engine.

Executors never add noise and never use an engine's ``RANDOM()``: they run the SQL that
:mod:`dalenius.sql.emit` writes and hand back exact numbers.
"""
