"""The HTTP routes: thin translations between JSON over HTTP and :class:`~dalenius.server.gateway.Gateway`.

:mod:`.analyst` holds what every signed-in caller may do (browse granted datasets, explain, query,
read their own budget and ledger); :mod:`.curator` what only curators may do.
"""
