"""What the pictures share: figures in words, and an SVG's outer tag.

Pure module: no I/O.
"""

from __future__ import annotations

from markupsafe import Markup, escape

__all__ = ["duration", "money", "open_svg", "tokens"]


def money(usd: float) -> str:
    """Dollars to the cent, or to a hundredth of a cent below ten cents."""
    return f"${usd:,.2f}" if usd >= 0.1 or usd == 0 else f"${usd:.4f}"


def tokens(n: float) -> str:
    return f"{int(n):,} tok"


def duration(seconds: float) -> str:
    """``45 s``, ``2 min 5 s``, ``3 h 20 min``: as a person reads a span."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min" if s % 3600 // 60 else f"{s // 3600} h"


def open_svg(css_class: str, width: float, height: float, label: str, **data: object) -> Markup:
    """The ``<svg>`` tag and its ``<title>``; ``data`` become ``data-*`` attributes."""
    attrs = "".join(f' data-{k.replace("_", "-")}="{escape(str(v))}"' for k, v in data.items())
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="{escape(css_class)}" role="img" '
        f'viewBox="0 0 {width:g} {height:g}" width="{width:g}" height="{height:g}" '
        f'aria-label="{escape(label)}"{attrs}><title>{escape(label)}</title>'
    )
