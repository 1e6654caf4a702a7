"""Old import path of :mod:`flux_chroma.chroma.naming`, kept because earlier docs named it."""

from flux_chroma.chroma.naming import (
    SEPARATOR,
    Namespace,
    TenantId,
    validate_collection_name,
    validate_tenant,
)

__all__ = ["SEPARATOR", "Namespace", "TenantId", "validate_collection_name", "validate_tenant"]
