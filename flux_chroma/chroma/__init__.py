"""Everything that talks to or about the Chroma server, in data-flow order: settings ->
connection (one cached bounded client) -> naming (tenants) -> aliases -> pinning and
collections; server runs a local ``chroma run`` owning one data directory.

Nothing here is imported eagerly; import the module you need.
"""
