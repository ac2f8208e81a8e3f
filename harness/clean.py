"""Text hygiene: text that can be sent (every lone surrogate repaired), and text that can be
shown without being obeyed (every control character escaped).

Relied on by model_call (each reply, and a tool input decoded from JSON text, is cleaned before
it joins the history), tool_calls (each tool result), cli (each prompt; an earlier prompt
holding a control character is not loaded for the up key), terminal (what it shows) and the
session page (markup.py). Without each piece:
- clean_text / clean_json: a model's stream can carry half an emoji ("\\ud83d" in its JSON), a
  prompt read with surrogateescape carries a stray byte as a lone surrogate, and so does a
  file name that is not UTF-8 in a tool's result. None can be encoded as UTF-8, so the next
  request fails, and so does every later one of the session, because the bad text stays in
  the history.
- escaped: text from a model, a file or a command reaches a terminal or a browser raw and is
  obeyed: OSC 52 puts a command on the clipboard, ESC[2J clears the screen, U+202E shows
  the text after it in another order than it runs. Each such character is written as its
  escape instead (\\x1b, \\u202e): the terminal (CONTROL) and the session page (UNSAFE: lone
  surrogates too, as the page is written as UTF-8) escape the same characters.
"""

import re

SURROGATES = "\ud800-\udfff"
SURROGATE = re.compile(f"[{SURROGATES}]")
# What a terminal would act on instead of showing: C0 controls but newline and tab, DEL, C1
# (\x9b alone is a CSI), and the bidi controls that make text read in another order than it runs.
CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
CONTROL = re.compile(f"[{CONTROLS}]")
UNSAFE = re.compile(f"[{CONTROLS}{SURROGATES}]")


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


def escaped(text: str, unsafe: re.Pattern = CONTROL) -> str:
    """text with each character `unsafe` matches written as its escape: \\x1b, \\u202e."""
    return unsafe.sub(_escape, text)


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
