"""Old import path of :mod:`flux_chroma.chroma.pinning`, kept because earlier docs named it."""

from flux_chroma.chroma.pinning import PIN_KEY, Pin, check_pin, ef_from_pin, pin_for

__all__ = ["PIN_KEY", "Pin", "check_pin", "ef_from_pin", "pin_for"]
