"""What the user sees: tool calls, results, usage lines, notes, and the streamed reply.

Relied on by all three lessons (show_stream is the model call every loop makes) and by cli.
Progress goes to stderr, so that `python sNN.py "..." > answer.txt` keeps just the answer.
Without each piece:
- printable and show: text from a model, a file, a command or a task board reaches the
  terminal raw, and the terminal obeys it: OSC 52 puts a command on the clipboard, ESC[2J
  clears the screen, ESC[1A ESC[2K erases the line that showed the command which just ran.
  Everything this harness writes goes through show(), which escapes such text (show_out is
  show() to stdout, for what a lesson prints itself).
- clean_text and clean_json: half an emoji (a lone surrogate) in a reply, or a stray byte in a
  prompt, cannot be encoded, so every later request of the session fails.
- show_stream: a slow model shows nothing for minutes, then a wall of text; a connection
  dropped mid-reply, or text that cannot be sent, ends in a traceback or a misleading line.
- _argument: a long command is cut, and what it does at its end is never shown.
- _colour: colour codes end up in log files and pipes.
- usage lines and show_session: the cost of a session is invisible.
"""

import json
import os
import re
import sys
import threading
import time
from urllib.parse import urlsplit

from harness.config import api_timeout, base_url
from harness.errors import EndpointError, dropped, unsendable
from harness.sdk import anthropic
from harness.session.record import RECORD

PREVIEW_CHARS = 100                  # width of a tool result's preview in the terminal
PREVIEW_LINES = 6                    # lines of a tool result's preview (a board or todo list fits)
ARGUMENT_CHARS = 60                  # a tool argument's share of the tool-call line
COMMAND_CHARS = 1000                 # a shell command is shown whole up to this: all of it runs
# What a terminal would act on instead of showing: C0 controls but newline and tab, DEL, C1
# (\x9b alone is a CSI), and the bidi controls that make text read in another order than it runs.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """text with every lone surrogate replaced by U+FFFD, so it can be encoded as UTF-8.

    A model's stream can carry half an emoji ("\\ud83d" in its JSON); a prompt read with
    surrogateescape carries a stray byte as one. Both make every later request unsendable.
    A surrogate pair split over two code points is joined back into its character.
    """
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


def printable(text) -> str:
    """text as a terminal should show it, not obey it: each control character as a visible \\x1b."""
    text = clean_text(str(text)).replace("\r\n", "\n")   # a Windows line end is only a line end
    return CONTROL.sub(_escaped, text)


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def show(text, colour: str | None = None, stream=None, end: str = "\n", redraw: bool = False):
    """Write text made printable, then the harness's own codes: the one way out to the screen.

    redraw first clears the line the cursor is on (the waiting line, a growing tool call).
    """
    stream = stream or sys.stderr
    shown = printable(text)
    if colour:
        shown = _colour(colour, shown, stream)
    stream.write(("\r\033[K" if redraw else "") + shown + end)


def show_out(text) -> None:
    """What a lesson prints itself (the board for /tasks), to stdout, made printable."""
    show(text, stream=sys.stdout)


def _colour(code, s, stream=None):
    stream = stream or sys.stderr
    if os.environ.get("NO_COLOR") or not stream.isatty():
        return s
    return f"\033[{code}m{s}\033[0m"


def _short(s, limit):
    s = " ".join(str(s).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _argument(value, limit: int) -> str:
    """One argument as JSON (one line); a long one as head …[size]… tail.

    Its end is always shown: what a command does last (`; curl … | sh`) is where it hides.
    """
    shown = json.dumps(value, ensure_ascii=False)
    if len(shown) <= limit:
        return shown
    size = len(value) if isinstance(value, str) else len(shown)
    head, tail = limit // 2, limit // 4            # the rest of the limit is for the marker
    return f"{shown[:head]}…[{size:,} characters]…{shown[-tail:]}"


def show_tool_call(name, args):
    """Before the tool runs, so a slow command shows what it is waiting for."""
    if not isinstance(args, dict):  # a model may send a list or a string; the tool will refuse it
        args = {"input": args}
    shown = " ".join(f"{k}={_argument(v, COMMAND_CHARS if k == 'command' else ARGUMENT_CHARS)}"
                     for k, v in args.items())
    show(f"> {name} {shown}".rstrip(), "36")


def show_tool_result(output, is_error):
    lines = str(output).splitlines() or [""]
    if len(lines) > PREVIEW_LINES:
        lines = lines[: PREVIEW_LINES - 1] + [f"… ({len(lines) - PREVIEW_LINES + 1} more lines)"]
    mark, code = ("!", "31") if is_error else ("=", "2")
    for n, line in enumerate(lines):
        show(f"  {mark if n == 0 else ' '} {_short(line, PREVIEW_CHARS)}", code)


def show_text(text):
    """What the model says between tool calls, for a log; on a terminal show_stream showed it live."""
    if text.strip() and not sys.stderr.isatty():
        show(text.strip(), "1")


def usage_counts(usage):
    """(uncached input, read from cache, written to cache, output); a missing or null field is 0."""
    names = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")
    return tuple(getattr(usage, n, None) or 0 for n in names)


SESSION = {"calls": 0, "fresh": 0, "read": 0, "written": 0, "out": 0}  # every call since the program started


def show_usage(usage, label="tokens", tools=None):
    fresh, read, written, out = usage_counts(usage)
    for key, n in zip(("fresh", "read", "written", "out"), (fresh, read, written, out)):
        SESSION[key] += n
    SESSION["calls"] += 1
    RECORD.call(usage, label)           # for /cost and the session page
    show(f"  [{label}: {fresh:,} in · {read:,} from cache · {written:,} to cache · {out:,} out]", "2")
    if tools and SESSION["calls"] == 1:
        warn_if_tools_dropped(fresh + read + written, tools)


def warn_if_tools_dropped(counted, tools):
    """Say so when the endpoint counted fewer input tokens than the tool definitions alone hold.

    A local server whose chat template has no place for tools drops them without an error
    (seen with llama-server: 132 input tokens counted for s07's first request, 1,214 with a
    template that has tools). The model then cannot call a tool and answers in prose.
    """
    expected = len(json.dumps(tools)) // 4          # about 4 characters per token
    if 0 < counted < expected // 2:                 # 0: the endpoint sent no usage at all
        show_note(f"[the endpoint counted {counted:,} input tokens, fewer than the tool definitions alone "
                  f"(about {expected:,}): it seems to have dropped the tools, so the model cannot call them. "
                  "A local server needs a chat template that includes tools (llama-server: --jinja, "
                  "or --chat-template-file)]")


def show_session():
    """The session's total, printed when a run ends: what the cache saved is the share read from it."""
    total = SESSION["fresh"] + SESSION["read"] + SESSION["written"]
    if SESSION["calls"]:
        share = f"{SESSION['read'] / total:.0%}" if total else "0%"
        show(f"[session: {SESSION['calls']} call{'s' * (SESSION['calls'] != 1)} · {total:,} input "
             f"tokens, {share} from cache · {SESSION['out']:,} out]", "2")


# ---------------------------------------------------------------- the streaming display

_LIVE = {"text": ""}   # the text of the last reply shown live, so print_answer does not repeat it


def show_stream(request):
    """Run a streamed request (`client.messages.stream(...)`), show it as it arrives, return the Message.

    On a terminal: a waiting line with the seconds until the first token, the text live, and a
    tool call being written as `> write_file … 2.1 kB so far`. Elsewhere (a pipe, a log) nothing
    is shown here: the loop prints the finished text and tool calls.
    """
    live = sys.stderr.isatty()
    waiting = _Waiting(request) if live else None
    shown, tool, size = [], None, 0
    try:
        with request as stream:
            for event in stream:
                if waiting:
                    waiting = waiting.stop()
                if not live:
                    continue
                if event.type == "text":
                    shown.append(event.text)
                    show(event.text, "1", end="")
                elif event.type == "content_block_start" and event.content_block.type == "tool_use":
                    tool, size = event.content_block.name, 0
                elif event.type == "input_json":
                    size += len(event.partial_json)
                    show(f"> {tool} … {size / 1000:.1f} kB so far", "36", end="", redraw=True)
                elif event.type == "content_block_stop":
                    if tool:                   # the finished call is printed by the loop, in full
                        sys.stderr.write("\r\033[K")
                    elif shown and not shown[-1].endswith("\n"):
                        sys.stderr.write("\n")
                        shown.append("\n")
                    tool = None
                sys.stderr.flush()
            message = stream.get_final_message()
    except anthropic.APIError:
        raise
    except UnicodeEncodeError as exc:       # a ValueError, but ours: the request cannot be encoded
        raise EndpointError(unsendable(exc)) from None
    except _connection_errors() as exc:     # a connection lost mid-reply: the SDK does not wrap it
        raise EndpointError(dropped(exc, base_url(), api_timeout())) from None
    except (ValueError, TypeError, KeyError, AttributeError, AssertionError, RuntimeError) as exc:
        raise EndpointError(f"the endpoint at {base_url()} did not answer like the Messages API "
                            f"({type(exc).__name__}: {_short(exc, 120)})") from None
    finally:
        if waiting:
            waiting.stop()
    if not isinstance(getattr(message, "content", None), list):
        raise EndpointError(f"the endpoint at {base_url()} sent a reply without content "
                            "(is ANTHROPIC_BASE_URL the Messages API?)")
    _LIVE["text"] = "".join(shown).strip()
    return message


def _connection_errors() -> type:
    """The HTTP library's base class for a connection that failed (httpx; httpx2 in newer SDKs)."""
    try:
        import httpx
    except ImportError:
        import httpx2 as httpx
    return httpx.TransportError


class _Waiting:
    """`waiting for the model at host · 12 s`, redrawn every second until the first event."""

    def __init__(self, request):
        self._done, self._start = threading.Event(), time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._done.wait(1.0):
            seconds = int(time.monotonic() - self._start)
            line = f"  waiting for the model at {urlsplit(base_url()).netloc} · {seconds} s (Ctrl-C abandons the turn)"
            show(line, "2", end="", redraw=True)
            sys.stderr.flush()

    def stop(self):
        if not self._done.is_set():
            self._done.set()
            self._thread.join()
            sys.stderr.write("\r\033[K")
        return None


def print_answer(answer):
    """The final answer to stdout; on a terminal, only what show_stream has not shown already."""
    shown = _LIVE["text"]
    _LIVE["text"] = ""
    if shown and sys.stdout.isatty() and sys.stderr.isatty() and answer.startswith(shown):
        answer = answer[len(shown):].strip()
        if not answer:
            return
    show(answer, stream=sys.stdout)


def show_note(line):
    show(line, "33")


def show_error(line):
    show(f"error: {line}", "31")

