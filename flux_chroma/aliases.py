"""Old import path of :mod:`flux_chroma.chroma.aliases`, kept because earlier docs named it."""

from flux_chroma.chroma.aliases import (
    REGISTRY_NAME,
    RESERVED_PREFIX,
    get_alias,
    list_aliases,
    remove_alias,
    resolve_alias,
    set_alias,
)

__all__ = [
    "REGISTRY_NAME",
    "RESERVED_PREFIX",
    "resolve_alias",
    "get_alias",
    "set_alias",
    "remove_alias",
    "list_aliases",
]
