"""Tenancy: validated tenant ids, collection names and the physical names they map to.

Prefix mode (the default) stores tenant ``acme``'s ``handbook`` as ``acme__handbook``: tenant
ids have no underscores, so the first ``__`` always ends the tenant. Database mode keeps the
name and gives each tenant its own Chroma database. Pure string checks, before any network call.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Literal

from flux_chroma.errors import InvalidNameError, TenantError

__all__ = ["SEPARATOR", "Namespace", "validate_collection_name", "validate_tenant"]

SEPARATOR = "__"
Tenancy = Literal["prefix", "database"]

_TENANT_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_SHORT_RE = re.compile(r"^[A-Za-z0-9._-]+$")


def validate_tenant(tenant: object) -> str:
    """Check a tenant id and return it.

    Rules: 3-63 lowercase ASCII letters, digits and single hyphens, starting and ending with a
    letter or digit (no underscores, no ``--``).

    Raises:
        TenantError: Missing or invalid tenant; the message names the rule.
    """
    if tenant is None:
        raise TenantError(
            "tenant= is required: every flux-chroma task that touches a collection is bound to "
            "one tenant. Use task.with_options(tenant='acme')."
        )
    if not isinstance(tenant, str):
        raise TenantError(f"tenant must be a string, got {type(tenant).__name__}.")
    if not 3 <= len(tenant) <= 63:
        raise TenantError(f"tenant {tenant!r} must be 3-63 characters long (got {len(tenant)}).")
    if not tenant.isascii() or not _TENANT_RE.fullmatch(tenant):
        raise TenantError(
            f"tenant {tenant!r} may only contain lowercase ASCII letters, digits and single "
            "hyphens, and must start and end with a letter or digit (no underscores)."
        )
    return tenant


def validate_collection_name(name: object) -> str:
    """Check a tenant-relative collection name and return it.

    Rules: 3-512 ASCII letters, digits, ``.``, ``_`` and ``-``, starting and ending with a
    letter or digit, without ``..``, ``__`` (the tenant separator) or the ``fc.`` prefix, and
    not an IP address.

    Raises:
        InvalidNameError: The name breaks a rule; the message names it.
    """
    if not isinstance(name, str):
        raise InvalidNameError(f"collection name must be a string, got {type(name).__name__}.")
    if not name.strip():
        raise InvalidNameError("collection name must not be empty or whitespace.")
    if not 3 <= len(name) <= 512:
        raise InvalidNameError(
            f"collection name {name[:80]!r} must be 3-512 characters long (got {len(name)}): "
            "Chroma's naming rule, applied to the name itself so it is valid in both tenancy modes."
        )
    if not name.isascii() or not _SHORT_RE.fullmatch(name):
        raise InvalidNameError(
            f"collection name {name[:80]!r} may only contain ASCII letters, digits, '.', '_' "
            "and '-' (no spaces, slashes or look-alike characters)."
        )
    if not (name[0].isalnum() and name[-1].isalnum()):
        raise InvalidNameError(
            f"collection name {name[:80]!r} must start and end with a letter or digit."
        )
    if SEPARATOR in name:
        raise InvalidNameError(
            f"collection name {name[:80]!r} must not contain '__': it is reserved as the "
            "tenant separator."
        )
    if ".." in name:
        raise InvalidNameError(f"collection name {name[:80]!r} must not contain '..'.")
    if name.startswith("fc."):
        raise InvalidNameError(
            f"collection name {name[:80]!r} starts with 'fc.', which is reserved for "
            "flux-chroma's own collections (the alias registry)."
        )
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return name
    raise InvalidNameError(f"collection name {name!r} must not be an IP address: Chroma's naming rule.")


@dataclass(frozen=True)
class Namespace:
    """A tenant's namespace on one Chroma server.

    Args:
        tenancy: ``"prefix"`` (collections named ``{tenant}__{name}`` in the default database)
            or ``"database"`` (their own name, in a database named after the tenant).
    """

    tenant: str
    tenancy: Tenancy = "prefix"

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        if self.tenancy not in ("prefix", "database"):
            raise InvalidNameError(
                f"tenancy={self.tenancy!r} is not supported; use 'prefix' or 'database'."
            )

    @property
    def database(self) -> str | None:
        """The Chroma database of this tenant (``None`` = default database)."""
        return self.tenant if self.tenancy == "database" else None

    @property
    def prefix(self) -> str:
        """Physical-name prefix of this tenant's collections (empty in database mode)."""
        return f"{self.tenant}{SEPARATOR}" if self.tenancy == "prefix" else ""

    def physical(self, name: object) -> str:
        """Map a tenant-relative collection name to the Chroma name, inside this namespace.

        Raises:
            InvalidNameError: The name breaks a rule.
        """
        full = self.prefix + validate_collection_name(name)
        # A valid name and tenant can break only Chroma's length rule once prefixed.
        if len(full) > 512:
            raise InvalidNameError(
                f"collection name {full[:80]!r} must be 3-512 characters long (got {len(full)}): "
                "Chroma's naming rule."
            )
        return full

    def owns(self, physical: str) -> bool:
        """True when a physical collection name belongs to this tenant's namespace."""
        prefix = self.prefix  # empty in database mode: every collection of the database
        return not prefix or (physical.startswith(prefix) and len(physical) > len(prefix))

    def short(self, physical: str) -> str:
        """The tenant-relative name of one of this tenant's physical collections.

        Raises:
            TenantError: ``physical`` is outside this tenant's namespace.
        """
        if not self.owns(physical):
            raise TenantError(f"collection {physical!r} is outside tenant {self.tenant!r}.")
        return physical[len(self.prefix) :]
