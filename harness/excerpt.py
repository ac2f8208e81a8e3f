"""Excerpts: a long text cut to fit a line, a box or a preview, the same way everywhere.

Relied on by terminal (tool results and arguments), errors and model_call (an exception in one
line), the session record and page (what a run sent, its tool calls and summaries, the board's
boxes) and the board's notes of what other agents did (a name). Without each piece:
- one_line: an exception or a result with line breaks would break the one line it was for.
- cut: a long subject would run out of its box, a long name over its line; the ellipsis
  says that something was cut.
- head_and_tail: a long text would lose its end, where a command's last act (`; curl … | sh`)
  or a result's error or total is; the count in the middle says how much is not shown.
- preview: a result of a thousand lines would fill the screen, or the page's table; one of
  WHOLE_LINES or fewer (a task file) is shown whole on both.
"""

PREVIEW_LINES = 6      # lines of a long result's preview, on the screen and on the page
WHOLE_LINES = 14       # a result this short is shown whole there (a task file, a board)


def one_line(value, limit: int = None) -> str:
    """value on one line (each run of white space one space: a newline in a task's subject
    must not forge a line of the board), cut to limit characters if a limit is given."""
    joined = " ".join(str(value).split())
    return joined if limit is None else cut(joined, limit)


def cut(text: str, limit: int) -> str:
    """text in at most limit characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def head_and_tail(text: str, head: int, tail: int, size: int | None = None) -> str:
    """A long text as its head, its length and its tail: `head…[12,345 characters]…tail`.

    size is the length to name when text stands for something else (a JSON string argument
    names the string's length, not its encoding's); by default len(text).
    """
    if len(text) <= head + tail:
        return text
    if size is None:
        size = len(text)
    return f"{text[:head]}…[{size:,} characters]…{text[-tail:]}"


def preview(text, whole: int = WHOLE_LINES) -> list:
    """The lines of text; past `whole` lines, the first PREVIEW_LINES - 1 and how many more."""
    lines = str(text).splitlines() or [""]
    if len(lines) <= whole:
        return lines
    more = len(lines) - PREVIEW_LINES + 1
    return lines[: PREVIEW_LINES - 1] + [f"… ({more} more lines)"]
