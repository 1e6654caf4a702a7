"""The one lazy loader of flux-chroma's packages (PEP 562 module ``__getattr__``).

Type checkers see the lazy names through an ``if TYPE_CHECKING:`` block in each package, which
``tests/test_import_cost.py`` checks against the mapping and ``__all__``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Build a package's ``(__getattr__, __dir__)`` for names imported on first use.

    Args:
        package: The package's ``__name__``.
        homes: Module, relative to ``package`` (e.g. ``"cache"``) -> the names it provides.
    """
    module_of = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # the next access skips __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *module_of})

    return __getattr__, __dir__
