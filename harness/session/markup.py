"""Text made safe for the session page: every string from a run goes through text() first.

Relied on by page.py, board_picture.py and sent.py, which write HTML and SVG by hand. Without
text(), a `<script>` in a task subject or a reply would become markup, a control character
would reach the browser raw (those clean.UNSAFE names), and a lone surrogate (half an emoji)
could not be written as UTF-8: the page would be lost.
"""

import html

from harness import clean


def text(value: object) -> str:
    """Any text for the page, as text: HTML-escaped, quotes too, controls made visible."""
    return html.escape(clean.escaped(str(value), clean.UNSAFE), quote=True)


def n(number: float) -> str:
    """A count as the terminal shows it: 12,345."""
    return f"{number:,.0f}"
