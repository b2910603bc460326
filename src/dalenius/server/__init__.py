"""L5: the HTTP gateway — a versioned JSON API under ``/v1`` and the web console that uses it.

The gateway is a thin shell over the library: it authenticates callers by API token, decides who
may see which dataset, and hands each request to :class:`~dalenius.engine.session.Session` or the
:class:`~dalenius.ledger.Ledger`. Start it with ``dalenius serve`` (see ``docs/server.md``) or
build the application with :func:`dalenius.server.app.create_app`. Needs the ``server`` extra.
"""
