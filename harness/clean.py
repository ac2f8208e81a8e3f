"""Text hygiene: text that can be sent (every lone surrogate repaired), and text that can be
shown without being obeyed (every control character escaped).

Relied on by model_call (each reply, each decoded tool input), tool_calls (each result), cli
(each prompt; one holding a control character is not loaded for the up key), terminal and the
session page (markup.py). Without each piece:
- clean_text / clean_json: half an emoji in a model's stream ("\\ud83d"), or a stray byte in
  a prompt or a file name, cannot be encoded as UTF-8; the next request fails, and so does
  every later one, because the bad text stays in the history.
- escaped: text from a model, a file or a command reaches a terminal or a browser raw and is
  obeyed (OSC 52 fills the clipboard, ESC[2J clears the screen, U+202E reorders the text);
  the terminal (CONTROL) and the page (UNSAFE: lone surrogates too) escape it alike.
"""

import re

SURROGATES = "\ud800-\udfff"
SURROGATE = re.compile(f"[{SURROGATES}]")
# What a terminal would act on instead of showing: C0 controls but newline and tab, DEL, C1
# (\x9b alone is a CSI), the bidi controls that reorder text, the invisible marks too, and
# the line and paragraph separators, which some programs break a line at and others do not.
CONTROLS = ("\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
            "\u2066-\u2069")
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
