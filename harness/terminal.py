"""What the user sees: tool calls, results, usage lines, notes, and the streamed reply.

Relied on by all three lessons (show_stream is the model call every loop makes) and by cli.
Progress goes to stderr, so that `python sNN.py "..." > answer.txt` keeps just the answer.
Without each piece:
- show_stream: a slow model shows nothing for minutes, then a wall of text.
- _colour: colour codes end up in log files and pipes.
- usage lines and show_session: the cost of a session is invisible.
"""

import json
import os
import sys
import threading
import time
from urllib.parse import urlsplit

from harness.config import EndpointError, base_url

PREVIEW_CHARS = 100                  # width of a tool result's preview in the terminal
PREVIEW_LINES = 6                    # lines of a tool result's preview (a board or todo list fits)


def _colour(code, s, stream=None):
    stream = stream or sys.stderr
    if os.environ.get("NO_COLOR") or not stream.isatty():
        return s
    return f"\033[{code}m{s}\033[0m"


def _short(s, limit):
    s = " ".join(str(s).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def show_tool_call(name, args):
    """Before the tool runs, so a slow command shows what it is waiting for."""
    if not isinstance(args, dict):  # a model may send a list or a string; the tool will refuse it
        args = {"input": args}
    shown = " ".join(f"{k}={_short(json.dumps(v, ensure_ascii=False), 60)}" for k, v in args.items())
    print(_colour("36", f"> {name} {shown}".rstrip()), file=sys.stderr)


def show_tool_result(output, is_error):
    lines = str(output).splitlines() or [""]
    if len(lines) > PREVIEW_LINES:
        lines = lines[: PREVIEW_LINES - 1] + [f"… ({len(lines) - PREVIEW_LINES + 1} more lines)"]
    mark, code = ("!", "31") if is_error else ("=", "2")
    for n, line in enumerate(lines):
        print(_colour(code, f"  {mark if n == 0 else ' '} {_short(line, PREVIEW_CHARS)}"), file=sys.stderr)


def show_text(text):
    """What the model says between tool calls, for a log; on a terminal show_stream showed it live."""
    if text.strip() and not sys.stderr.isatty():
        print(_colour("1", text.strip()), file=sys.stderr)


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
    print(_colour("2", f"  [{label}: {fresh:,} in · {read:,} from cache · {written:,} to cache · {out:,} out]"),
          file=sys.stderr)
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
        print(_colour("2", f"[session: {SESSION['calls']} call{'s' * (SESSION['calls'] != 1)} · {total:,} input "
                           f"tokens, {share} from cache · {SESSION['out']:,} out]"), file=sys.stderr)


# ---------------------------------------------------------------- the streaming display

_LIVE = {"text": ""}   # the text of the last reply shown live, so print_answer does not repeat it


def show_stream(request):
    """Run a streamed request (`client.messages.stream(...)`), show it as it arrives, return the Message.

    On a terminal: a waiting line with the seconds until the first token, the text live, and a
    tool call being written as `> write_file … 2.1 kB so far`. Elsewhere (a pipe, a log) nothing
    is shown here: the loop prints the finished text and tool calls.
    """
    import anthropic
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
                    sys.stderr.write(_colour("1", event.text))
                elif event.type == "content_block_start" and event.content_block.type == "tool_use":
                    tool, size = event.content_block.name, 0
                elif event.type == "input_json":
                    size += len(event.partial_json)
                    sys.stderr.write("\r\033[K" + _colour("36", f"> {tool} … {size / 1000:.1f} kB so far"))
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
            sys.stderr.write("\r\033[K" + _colour("2", line))
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
    print(answer)


def show_note(line):
    print(_colour("33", line), file=sys.stderr)


def show_error(line):
    print(_colour("31", f"error: {line}"), file=sys.stderr)

