"""Text made safe for the session page: every string from a run goes through text() first.

Relied on by page.py, board_picture.py and sent.py, which write HTML and SVG by hand. Without
each piece:
- text(): a task subject or a model's reply such as `<script>` would become markup in the
  page; a control character would reach the browser raw; a lone surrogate (half an emoji)
  could not be written as UTF-8 and the page would be lost.
- cut(): a long subject would run out of its box on the board.
"""

import html
import re

# C0 and C1 controls (but tab and newline), bidirectional overrides (text that reads backwards)
# and lone surrogates (not encodable as UTF-8): shown as escapes, not passed to the browser.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def text(value: object) -> str:
    """Any text for the page, as text: HTML-escaped, quotes too, controls made visible."""
    return html.escape(_UNSAFE.sub(_visible, str(value)), quote=True)


def cut(value: str, limit: int) -> str:
    """value in at most limit characters, an ellipsis marking the cut."""
    return value if len(value) <= limit else value[: limit - 1] + "…"


def n(number: float) -> str:
    """A count as the terminal shows it: 12,345."""
    return f"{number:,.0f}"
