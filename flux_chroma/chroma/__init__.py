"""Everything that talks to or about the Chroma server.

Data flows through these modules in this order: :mod:`~flux_chroma.chroma.settings` (where the
server is, credentials, timeouts) -> :mod:`~flux_chroma.chroma.connection` (one cached
``HttpClient`` per settings) -> :mod:`~flux_chroma.chroma.naming` (tenant namespaces) ->
:mod:`~flux_chroma.chroma.aliases` (alias resolution) -> :mod:`~flux_chroma.chroma.pinning` and
:mod:`~flux_chroma.chroma.collections` (open a collection and check its embedding pin).
:mod:`~flux_chroma.chroma.server` runs a local ``chroma run`` process that owns one data
directory (:mod:`~flux_chroma.chroma.ownership`, :mod:`~flux_chroma.chroma.process`).

Nothing here is imported eagerly; import the module you need.
"""
