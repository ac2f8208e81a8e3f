"""Text made safe for the session page: every string from a run goes through text() first.

Relied on by page.py, board_picture.py and sent.py, which write HTML and SVG by hand. Without
each piece:
- text(): a task subject or a model's reply such as `<script>` would become markup in the
  page; a control character would reach the browser raw (the ones the terminal escapes:
  clean.UNSAFE); a lone surrogate (half an emoji) could not be written as UTF-8 and the
  page would be lost.
"""

import html

from harness import clean


def text(value: object) -> str:
    """Any text for the page, as text: HTML-escaped, quotes too, controls made visible."""
    return html.escape(clean.escaped(str(value), clean.UNSAFE), quote=True)


def n(number: float) -> str:
    """A count as the terminal shows it: 12,345."""
    return f"{number:,.0f}"
