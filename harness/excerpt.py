"""Excerpts: a long text cut to fit a line, a box or a preview, the same way everywhere.

Relied on by terminal, errors and model_call, the session record and page, and the board's
notes. Without each piece:
- one_line: a text with line breaks would break its one line, or forge a line of the board.
- cut: a long subject would run out of its box; the ellipsis says something was cut.
- head_and_tail: a long text would lose its end, where a command's last act (`; curl … | sh`)
  or a result's error is; the count in the middle says how much is not shown.
- preview: a result of a thousand lines would fill the screen, or the page's table.
"""

PREVIEW_LINES = 6      # lines of a long result's preview, on the screen and on the page
WHOLE_LINES = 14       # a result this short is shown whole there (a task file, a board)


def one_line(value, limit: int = None) -> str:
    """value on one line (each run of white space one space), cut to limit if one is given."""
    joined = " ".join(str(value).split())
    return joined if limit is None else cut(joined, limit)


def cut(text: str, limit: int) -> str:
    """text in at most limit characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def head_and_tail(text: str, head: int, tail: int, size: int | None = None) -> str:
    """A long text as `head…[12,345 characters]…tail`; size: the length to name when text
    stands for something else (a string's JSON encoding names the string's), else len(text)."""
    if len(text) <= head + tail:
        return text
    if size is None:
        size = len(text)
    return f"{text[:head]}…[{size:,} characters]…{text[-tail:]}"


def preview(text, whole: int = WHOLE_LINES) -> list:
    """The lines of text; past `whole` lines, the first PREVIEW_LINES - 1 and how many more.
    Lines end at \n (or \r\n) only: a vertical tab, a form feed, a lone \r or a line
    separator is a character the model was sent, which the screen and the page escape."""
    lines = str(text).replace("\r\n", "\n").split("\n")
    if len(lines) > 1 and lines[-1] == "":          # the last line's own end
        lines.pop()
    if len(lines) <= whole:
        return lines
    more = len(lines) - PREVIEW_LINES + 1
    return lines[: PREVIEW_LINES - 1] + [f"… ({more} more lines)"]
