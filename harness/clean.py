"""Text that can be sent: every lone surrogate (half an emoji, a stray byte) repaired.

Relied on by endpoints (each reply, and a tool input decoded from JSON text, is cleaned before
it joins the history), tool_calls (each tool result), cli (each prompt), terminal (what it
shows) and the session log. Without it: a model's stream can carry half an emoji ("\\ud83d" in
its JSON), a prompt read with surrogateescape carries a stray byte as a lone surrogate, and so
does a file name that is not UTF-8 in a tool's result. None can be encoded as UTF-8, so the
next request fails, and so does every later one of the session, because the bad text stays in
the history.
"""

import re

SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """text with every lone surrogate replaced by U+FFFD; a pair split over two code points is
    joined back into its character."""
    if not SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def clean_json(value):
    """clean_text applied to every string (keys too) of a message, a block list or a tool input."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    if isinstance(value, dict):
        return {clean_json(k): clean_json(v) for k, v in value.items()}
    return value
