"""What the user sees, and only that: tool calls, results, usage lines, notes, the live reply.

Relied on by all three lessons (tool-call lines, notes), model_call (the live reply, the usage
line) and cli (the answer, errors). It draws what it is given: no transport, no accounting.
Progress goes to stderr, so `python sNN.py "..." > answer.txt` keeps the answer alone.
Without each piece:
- printable and show: text from a model, a file, a command or a board reaches the terminal raw
  and is obeyed: OSC 52 sets the clipboard, ESC[2J clears the screen. All goes out through
  show(), but the live reply's own clearing of its line (a carriage return and ESC[K).
- width and fit: a note or /help runs past the edge of an 80-column terminal and breaks
  mid-word; a tool call or a result line wraps into the next. The model's own words are not
  fitted: a terminal wraps them, and an answer sent to a file stays exact.
- _argument: a long command is cut, and what it does at its end is never shown.
- colour and ansi: colour codes end up in log files and pipes, and on a TERM=dumb terminal.
- show_usage and show_session: the cost of a session is invisible.
- LiveReply: a slow model shows nothing for minutes, then a wall of text; a local model that
  takes a minute to start gives no sign of life. redrawn: on a terminal narrower than its
  line, each redraw leaves a stale line behind.
- Screen (run.screen: one per run): on a terminal the final answer, already
  streamed live, is shown again; during --demo a path is named from demo/, not the user's folder.
"""

import json
import os
import re
import sys
import textwrap
import threading
import time
from pathlib import Path

from harness import clean, excerpt, tokens

PLAIN_WIDTH = 80                     # columns when the output is no terminal and COLUMNS unset
NARROWEST = 40                       # a terminal narrower than this is laid out as this wide
WIDEST = 1000                        # and a wider one (COLUMNS=100000000 drew bars for minutes)
ARGUMENT_CHARS = 6                   # the least of a cut argument's head and tail, together
COMMAND_CHARS = 1000                 # a shell command is shown whole up to this: all of it runs
ITEMS_SHOWN = 20                     # a list argument of at most this many objects, one a line
NAME_CHARS = 64                      # a tool's name is cut to this, the API's own limit on one
ERROR_CHARS = 600                    # an error line longer shows its head and tail (its remedy)
# Two spaces or more between words: a row of a table, whose continuation goes under its last column.
COLUMN_GAP = re.compile(r"\S {2,}(?=\S)")


def printable(text) -> str:
    """text as a terminal should show it, not obey it: each control character as \\x1b."""
    text = clean.clean_text(str(text)).replace("\r\n", "\n")   # a Windows line end is a line end
    return clean.escaped(text)


def show(text, code: str | None = None, stream=None, end: str = "\n", redraw: bool = False,
         wrap: bool = False):
    """Write text made printable, then the harness's own codes. code: the colour (ANSI SGR,
    "33" is yellow); redraw: first clear the cursor's line; wrap: fit each line to the stream's
    width (after escaping, which makes a line longer)."""
    stream = stream or sys.stderr
    shown = printable(text)
    if wrap:
        shown = fit(shown, width(stream))
    if code:
        shown = colour(code, shown, stream)
    stream.write(("\r\033[K" if redraw else "") + shown + end)


def show_out(text) -> None:
    """What a lesson prints itself (the board for /tasks), to stdout, made printable, fitted."""
    show(text, stream=sys.stdout, wrap=True)


def show_note(line):
    show(line, "33", wrap=True)


def show_error(line):
    show(f"error: {line}", "31", wrap=True)


# ---------------------------------------------------------------- the width of a line

def ansi(stream) -> bool:
    """A terminal that obeys ANSI codes: not a pipe or a file, nor TERM=dumb (Emacs' shell),
    which shows ESC[K as ^[[K and cannot redraw a line."""
    return stream.isatty() and os.environ.get("TERM") != "dumb"


def redrawn(text: str) -> str:
    """A line the live reply redraws in place, cut to the terminal's width however narrow: a
    redraw clears only the line the cursor is on, so a wrapped one leaves a stale line."""
    return excerpt.cut(printable(text), width(sys.stderr, narrowest=2) - 1)


def width(stream=None, narrowest: int = NARROWEST) -> int:
    """The columns a line may take: COLUMNS where it is set; else the width of the terminal
    stream is (not stdout's, as shutil asks: progress goes to stderr, the terminal when stdout
    is a file); else PLAIN_WIDTH."""
    stream = stream or sys.stderr
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:                  # COLUMNS=wide: as if it were not set
        columns = 0
    if columns <= 0 and stream.isatty():
        try:
            columns = os.get_terminal_size(stream.fileno()).columns
        except (OSError, ValueError):   # a stream that is a terminal only in name (a test's)
            columns = 0
    return min(max(columns or PLAIN_WIDTH, narrowest), WIDEST)


def fit(text: str, columns: int, whole_words: bool = True) -> str:
    """Each line of text in `columns`, a longer one wrapped at spaces (see _hang). A word longer
    than a line is left whole (a path stays one piece to copy), unless whole_words is False."""
    lines = []
    for line in text.split("\n"):
        if len(line) <= columns:
            lines.append(line)
            continue
        wrapped = textwrap.wrap(line, columns, subsequent_indent=_hang(line, columns),
                                break_long_words=not whole_words, break_on_hyphens=False)
        lines += wrapped or [""]
    return "\n".join(lines)


def _hang(line: str, columns: int) -> str:
    """Where a wrapped line goes on: under the last column of a table's row (a gap of two
    spaces or more, in the line's first half), else two columns in from its own indent."""
    gaps = [gap.end() for gap in COLUMN_GAP.finditer(line) if gap.end() <= columns // 2]
    if gaps:
        return " " * gaps[-1]
    indent = len(line) - len(line.lstrip(" "))
    return " " * (indent + 2)


def colour(code, s, stream=None, hidden=("", "")):
    """s in colour on a terminal. hidden: what marks the codes as taking no columns, for
    readline's prompt (\001, \002): unmarked, it wraps a typed line too early."""
    stream = stream or sys.stderr
    if os.environ.get("NO_COLOR") or not ansi(stream):
        return s
    start, end = hidden
    return f"{start}\033[{code}m{end}{s}{start}\033[0m{end}"


def plural(n: int, word: str) -> str:
    """'1 tool call', '2 tool calls'."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


# ---------------------------------------------------------------- tool calls and results

def _argument(value, limit: int) -> str:
    """One argument as JSON, one printable line of about limit characters; a long one as head
    …[size]… tail: what a command does last (`; curl … | sh`) is where it hides."""
    shown = printable(json.dumps(value, ensure_ascii=False))
    if len(shown) <= limit:
        return shown
    size = len(value) if isinstance(value, str) else len(shown)
    marker = len(f"…[{size:,} characters]…")
    room = max(limit - marker, ARGUMENT_CHARS)
    head = room * 2 // 3                         # the start says what it is; the end, what it does
    return excerpt.head_and_tail(shown, head, room - head, size)


def _shares(needs: dict, room: int) -> dict:
    """Each argument's share of the line: short ones whole, long ones an even split of the rest."""
    shares = {}
    for n, key in enumerate(sorted(needs, key=needs.get)):
        fair = room // (len(needs) - n)
        shares[key] = min(needs[key], fair)
        room -= shares[key]
    return shares


def show_tool_call(name, args):
    """Before the tool runs (a slow command shows what it waits for): one line, each argument
    cut to its share of it. A shell command is shown whole up to COMMAND_CHARS, wrapped (all of
    it runs); arguments too many for one line go on the next."""
    if not isinstance(args, dict):  # a model may send a list or a string; the tool refuses it
        args = {"input": args}
    columns = width()
    start = f"> {excerpt.cut(printable(name), NAME_CHARS)}"
    needs = {key: len(f" {key}={_argument(value, COMMAND_CHARS)}") for key, value in args.items()}
    shares = _shares(needs, columns - len(start))
    lines = [start]
    for key, value in args.items():
        if _one_per_line(value, needs[key], columns - len(start)):
            lines += _items(key, value, columns)
            continue
        limit = COMMAND_CHARS if key == "command" else shares[key] - len(f" {key}=")
        part = f"{key}={_argument(value, limit)}"
        # An argument that would run past the line starts the next one; a command is wrapped
        # (fit, below), the only argument that is ever split.
        if key == "command" or len(lines[-1]) + 1 + len(part) <= columns:
            lines[-1] += f" {part}"
        else:
            lines.append(f"  {part}")
    show(fit("\n".join(lines), columns, whole_words=False), "36")


def _one_per_line(value, need: int, room: int) -> bool:
    """A list of objects too long for its line (a todo list): shown an item a line, so that
    what differs between two calls (an item's status) is not hidden in a cut middle."""
    return (isinstance(value, list) and 1 < len(value) <= ITEMS_SHOWN and need > room
            and all(isinstance(item, dict) for item in value))


def _items(key: str, value: list, columns: int) -> list:
    """`key=[`, then each item on a line of its own, cut to the width."""
    lines = [f"  {key}=["]
    for item in value:
        lines.append("    " + _argument(item, columns - 6))
    lines[-1] += "]"
    return lines


def show_tool_result(output, is_error):
    """A result's first lines (excerpt.preview), each cut to the width, indentation kept (a tab
    as four spaces); an error's lines wrapped, not cut (a remedy is at a line's end), but a
    line over ERROR_CHARS, shown as its head, its length and its tail."""
    lines = excerpt.preview(output)
    mark, code = ("!", "31") if is_error else ("=", "2")
    room = width() - 4                           # after "  = "
    for n, line in enumerate(lines):
        shown = printable(line.expandtabs(4).rstrip())
        lead = mark if n == 0 else " "
        if is_error:
            shown = excerpt.head_and_tail(shown, ERROR_CHARS // 2, ERROR_CHARS // 2)
            shown = fit(shown, room).replace("\n", "\n    ")
        else:
            shown = excerpt.cut(shown, room)
        show(f"  {lead} {shown}", code)


def show_reply_text(text):
    """What the model said beside its tool calls, for a log or a dumb terminal; a terminal
    that redraws saw it live."""
    if text.strip() and not ansi(sys.stderr):
        show(text.strip(), "1")


# ---------------------------------------------------------------- usage

def show_usage(counts: tuple, label: str = "tokens", screen=None):
    """One model call's (uncached, read from cache, written to cache, output) tokens; on
    `screen`'s hold (a final answer still to be printed), kept for after it."""
    fresh, read, written, out = counts
    line = (f"  [{label}: {fresh:,} in · {read:,} from cache · {written:,} to cache · "
            f"{out:,} out]")
    if screen is not None and screen.holding:
        screen.held.append(line)
        screen.holding = False
        return
    show(line, "2")


def warn_if_tools_dropped(counted, tools):
    """Say so when the endpoint counted fewer input tokens than the tools alone: a local
    server whose chat template has no place for tools drops them silently, and the model
    answers in prose."""
    expected = tokens.estimate(tools)
    if 0 < counted < expected // 2:                 # 0: the endpoint sent no usage at all
        show_note(f"[the endpoint counted {counted:,} input tokens, fewer than the tool "
                  f"definitions alone (about {expected:,}): it seems to have dropped the "
                  "tools, so the model cannot call them. A local server needs a chat "
                  "template that includes tools (llama-server: --jinja, or "
                  "--chat-template-file)]")


def show_session(record) -> None:
    """A run's total, from its SessionRecord: what the cache saved is the share read from it."""
    totals, total = record.totals, record.input_tokens
    if totals["calls"]:
        show(f"[session: {plural(totals['calls'], 'call')} · {total:,} input tokens, "
             f"{record.cache_share} from cache · {totals['out']:,} out]", "2")


# ---------------------------------------------------------------- the live reply

class Screen:
    """What one run has shown (its last reply, drawn live; usage lines held for the answer),
    and where the user is when the run works elsewhere (--demo's demo/)."""

    def __init__(self) -> None:
        self.last_shown = ""    # print_answer does not show it again
        self.seen_from = None   # the user's folder, when it is not the one the run works in
        self.holding = False    # the next usage line waits for the answer (not on a terminal)
        self.held = []          # usage lines waiting for the answer

    def hold_usage(self, label: str) -> None:
        """The loop's final reply, in a pipe or a log: its usage line follows the answer, as
        on a terminal, where the answer streams first."""
        self.holding = label == "tokens" and not ansi(sys.stderr)

    def release(self) -> None:
        """The usage lines held for an answer that was printed (or never came)."""
        held, self.held = self.held, []
        for line in held:
            show(line, "2")

    def where(self, path) -> str:
        """path (relative to the folder the run works in) as the user finds it from theirs;
        a URL (a PostgreSQL board) as it is. A trailing / (a folder) is kept."""
        if self.seen_from is None or "://" in str(path):
            return str(path)
        shown = os.path.relpath(Path(path).resolve(), self.seen_from)
        return shown + "/" if str(path).endswith("/") else shown


class LiveReply:
    """One streamed reply as it arrives, on a terminal only: the seconds waited for the first
    token, the text, and a tool call being written (`> write_file … 2.1 kB so far`)."""

    def __init__(self, where: str, screen: Screen):
        self.screen = screen
        self.live = ansi(sys.stderr)
        self.waiting = _Waiting(where) if self.live else None
        self.shown, self.tool, self.size = [], None, 0

    def show(self, event) -> None:
        if self.waiting:
            self.waiting = self.waiting.stop()
        if not self.live:
            return
        if event.type == "text":
            self.shown.append(event.text)
            show(event.text, "1", end="")
        elif event.type == "content_block_start" and event.content_block.type == "tool_use":
            self.tool, self.size = event.content_block.name, 0
        elif event.type == "input_json":
            self.size += len(event.partial_json)
            growing = f"> {self.tool} … {self.size / 1000:.1f} kB so far"
            show(redrawn(growing), "36", end="", redraw=True)
        elif event.type == "content_block_stop":
            if self.tool:                   # the finished call is printed by the loop, in full
                sys.stderr.write("\r\033[K")
            elif self.shown and not self.shown[-1].endswith("\n"):
                sys.stderr.write("\n")
                self.shown.append("\n")
            self.tool = None
        sys.stderr.flush()

    def close(self) -> None:
        if self.waiting:
            self.waiting = self.waiting.stop()
        self.screen.last_shown = "".join(self.shown).strip()


class _Waiting:
    """`waiting for the model at host · 12 s`, redrawn every second until the first event."""

    def __init__(self, where: str):
        self._where = where
        self._done, self._start = threading.Event(), time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._done.wait(1.0):
            seconds = int(time.monotonic() - self._start)
            line = (f"  waiting for the model at {self._where} · {seconds} s (Ctrl-C abandons "
                    "the turn)")
            # One line: a redraw clears only the line the cursor is on.
            show(redrawn(line), "2", end="", redraw=True)
            sys.stderr.flush()

    def stop(self):
        if not self._done.is_set():
            self._done.set()
            self._thread.join()
            sys.stderr.write("\r\033[K")
        return None


def print_answer(answer, screen: Screen):
    """The final answer to stdout; on a terminal, only what the live reply has not shown."""
    shown, screen.last_shown = screen.last_shown, ""
    if shown and sys.stdout.isatty() and sys.stderr.isatty() and answer.startswith(shown):
        answer = answer[len(shown):].strip()
    if answer:
        show(answer, stream=sys.stdout)
        sys.stdout.flush()          # before the usage line on stderr, in one pipe
    screen.release()
