"""The spend chart is plain SVG from the server: scaled lines, escaped text, no script."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from hyperhive.core.dashboard.pictures.chart import nice_ceiling, spend_chart

SVG = "{http://www.w3.org/2000/svg}"


@given(st.floats(min_value=1e-6, max_value=1e9, allow_nan=False))
def test_the_axis_top_is_a_round_number_at_or_above_the_peak(peak: float) -> None:
    top = nice_ceiling(peak)
    assert peak <= top * (1 + 1e-9) and top <= peak * 4.0
    assert f"{top:.6e}"[0] in "125"


def test_one_line_per_agent_scaled_to_the_axis_and_text_escaped() -> None:
    svg = str(spend_chart(["2026-11-30", "2026-12-01"], {"a<b": [0.0, 2.0], "bob": [1.0, 0.5]}))
    root = ET.fromstring(svg)  # well-formed: any unescaped "<" would break the parse
    assert "<script" not in svg and "href" not in svg
    lines = root.findall(f".//{SVG}polyline")
    assert [ln.get("stroke") for ln in lines] == ["#d97706", "#2563eb"]
    ys = [[float(p.split(",")[1]) for p in str(ln.get("points")).split()] for ln in lines]
    bottom, top = ys[0][0], ys[0][1]  # $0 and the $2 peak (the axis top)
    assert bottom > top and ys[1][0] == (bottom + top) / 2  # $1 is half way
    labels = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "legend"]
    assert labels == ["a<b", "bob"]


def test_no_spend_says_so() -> None:
    svg = str(spend_chart(["2026-12-01"], {}))
    assert "no spend recorded yet" in svg
    ET.fromstring(svg)
