"""Reading an HTML report of ``troupe sim/replay --report``: its embedded data, its
external references and its plotly figures."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.external: list[str] = []  # src/href of a script, link, img, iframe: http(s)
        self.data: list[str] = []
        self._in_data = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value and re.match(r"\s*(https?:)?//", value):
                self.external.append(f"<{tag} {name}={value}>")
        self._in_data = tag == "script" and ("id", "troupe-report-data") in attrs

    def handle_data(self, data: str) -> None:
        if self._in_data:
            self.data.append(data)

    def handle_endtag(self, tag: str) -> None:
        self._in_data = False


class Report:
    def __init__(self, path: Path) -> None:
        self.text = path.read_text(encoding="utf-8")
        page = _Page()
        page.feed(self.text)
        self.external = page.external
        assert page.data, "no troupe-report-data block"
        self.data: dict[str, Any] = json.loads("".join(page.data))

    def figures(self) -> list[str]:
        """The div ids of the figures plotted (``Plotly.newPlot("id", ...)``)."""
        return re.findall(r'Plotly\.newPlot\(\s*"([^"]+)"', self.text)

    def assert_self_contained(self) -> None:
        assert not self.external, self.external
        # plotly's own bundle is inlined, not fetched.
        assert "<script" in self.text and "plotly.js" in self.text
        assert len(self.text) > 1_000_000  # the inlined library (some 4.5 MB)
