"""Plumbing shared by the lessons: configuration, the client, terminal output, the CLI.

None of this is what the lessons teach; it is kept here so each lesson file
holds only its own idea. The one piece a reader meets in every loop is
show_stream(): the model call is streamed, and the reply is shown as it
arrives. Nothing runs at import: the client is built by `make_client()`,
called from a lesson's `main()`.
"""

import argparse
import difflib
import json
import os
import select
import sys
import textwrap
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

# anthropic and dotenv are imported inside the functions that use them, so importing
# a lesson needs neither and costs nothing (the SDK alone takes about 2 s to import).

DEFAULT_MODEL = "claude-sonnet-5-5"  # any model id works; MODEL_ID overrides it
PREVIEW_CHARS = 100                  # width of a tool result's preview in the terminal
PREVIEW_LINES = 6                    # lines of a tool result's preview (a board or todo list fits)
DEFAULT_TIMEOUT = 300                # seconds of silence from the endpoint before giving up (API_TIMEOUT);
                                     # a small local model can take minutes before its first token
MAX_RETRIES = 2                      # for 429/5xx and dropped connections; the SDK waits between tries
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


class SetupError(Exception):
    """A configuration problem the user must fix; shown as one line, exit 1."""


class EndpointError(Exception):
    """The endpoint answered, but not like the Messages API (HTML, other JSON, no content)."""


# ---------------------------------------------------------------- configuration

def load_env():
    """Read ./.env; a variable already set in the real environment wins, unless it is empty."""
    from dotenv import dotenv_values
    path = Path.cwd() / ".env"
    if not path.is_file():
        return
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:  # Notepad and PowerShell often save UTF-16
        raise SetupError(f"{path} is not UTF-8 text; save it as UTF-8 (one NAME=value per line)") from None
    for name, value in dotenv_values(path, encoding="utf-8").items():
        if value is not None and not os.environ.get(name):  # `export ANTHROPIC_API_KEY=` counts as unset
            os.environ[name] = value


def model_id():
    return os.environ.get("MODEL_ID") or DEFAULT_MODEL


def base_url():
    return os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"


def api_timeout():
    raw = os.environ.get("API_TIMEOUT", "").strip()
    try:
        seconds = float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        seconds = 0
    if not seconds > 0:
        raise SetupError(f"API_TIMEOUT must be a positive number of seconds, got {raw!r}")
    return seconds


def make_client(base_url=None, api_key=None):
    """Build the Anthropic client, or raise SetupError before any request is made."""
    import anthropic
    auth_token = None
    if api_key is None:
        api_key = os.environ.get("ANTHROPIC_API_KEY") or None
        auth_token = None if api_key else os.environ.get("ANTHROPIC_AUTH_TOKEN") or None
        if not (api_key or auth_token):
            raise SetupError("no API key: set ANTHROPIC_API_KEY in your environment or in ./.env "
                             "(copy .env.example), or try --demo, which needs no key")
    url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
    timeout = api_timeout()
    options = dict(api_key=api_key, auth_token=auth_token, base_url=url, max_retries=MAX_RETRIES,
                   timeout=anthropic.Timeout(timeout, connect=min(10.0, timeout)))
    if url and urlsplit(url).hostname in LOOPBACK:  # a local server: never through HTTP_PROXY/ALL_PROXY
        options["http_client"] = anthropic.DefaultHttpxClient(trust_env=False)
    return anthropic.Anthropic(**options)


def describe_api_error(exc, client=None):
    """One line saying what failed and what to do about it, naming the URL actually used."""
    import anthropic
    where = str(client.base_url).rstrip("/") if client is not None else base_url()
    status = getattr(exc, "status_code", None)
    detail = _error_message(exc)
    if isinstance(exc, anthropic.APITimeoutError):
        return (f"the API at {where} did not answer within API_TIMEOUT={api_timeout():g}s, even after retries: "
                "try again later, or raise API_TIMEOUT for a slow model")
    if isinstance(exc, anthropic.APIConnectionError):
        return f"cannot reach the API at {where}: check ANTHROPIC_BASE_URL and your network"
    if status == 401:
        return f"the API rejected the key (401 {detail}): check ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)"
    if status == 403:
        return f"the key may not do this (403 {detail}): check the key's permissions"
    if status == 404:
        return f"not found (404 {detail}): check MODEL_ID={model_id()!r} and ANTHROPIC_BASE_URL"
    if status == 429:
        return f"rate limited (429 {detail}) even after retries: wait a minute and try again"
    if status == 400:
        return f"the API refused the request (400 {detail})"
    if status is not None and status >= 500:
        return f"the API failed ({status} {detail}) even after retries: try again later"
    return f"the API call failed: {detail}"


def _error_message(exc):
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body["error"].get("message", str(exc))
    return str(exc)


# ---------------------------------------------------------------- terminal output
# Progress goes to stderr so that `python sNN.py "..." > answer.txt` keeps just the answer.

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


# ---------------------------------------------------------------- the CLI

def run_cli(name, doc, agent_loop, commands=None, demo=None, argv=None, options=(), on_start=None, help_extra=""):
    """`sNN.py "prompt"` runs one turn; `sNN.py` opens a REPL; `--demo` plays a script.

    agent_loop(messages, client) -> final text.  commands: {"/x": fn(messages, client, arg)}, arg being
    the rest of the line. options: [(flags, add_argument kwargs)]. on_start(args) runs after .env is
    read and may return a word for the REPL banner. help_extra: more text for --help.
    demo: () -> (script, prompt, summary), played by the loopback stand-in with no key;
    summary answers compaction calls (None if the lesson does not compact).
    """
    commands = commands or {}
    repl_help = f" In the REPL: {', '.join(['/help', *commands])}." if commands else ""
    parser = argparse.ArgumentParser(prog=f"python {name}.py", description=doc.strip().splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=textwrap.fill("Set ANTHROPIC_API_KEY (or put it in ./.env); "
                                                          "ANTHROPIC_BASE_URL, MODEL_ID and API_TIMEOUT are "
                                                          f"optional.{repl_help}", 79)
                                            + (f"\n\n{help_extra}" if help_extra else ""))
    parser.add_argument("prompt", nargs="?", help="run one turn with this prompt and exit; "
                                                  "without it, open a REPL (q or exit to quit)")
    if demo:
        parser.add_argument("--demo", action="store_true",
                            help="play a scripted session through the real loop and tools; no key, no network")
    for flags, kwargs in options:
        parser.add_argument(*flags, **kwargs)
    args = parser.parse_args(argv)  # before importing the SDK, so --help is instant
    if args.prompt is not None and not args.prompt.strip():
        parser.error("the prompt is empty; give a prompt, or none for the REPL")
    if demo and args.demo and args.prompt is not None:
        parser.error("--demo plays its own scripted prompt; leave out the prompt (or drop --demo)")
    try:
        import anthropic
    except ImportError:
        show_error("the anthropic package is not installed here: run  python -m pip install -r requirements.txt")
        return 1
    SESSION.update(dict.fromkeys(SESSION, 0))
    try:
        load_env()
        banner = on_start(args) if on_start else None
        if demo and args.demo:
            return _run_demo(demo, agent_loop)
        client = make_client()
        if args.prompt is not None:
            try:
                print_answer(agent_loop([{"role": "user", "content": args.prompt}], client))
            finally:
                show_session()
            return 0
    except SetupError as exc:
        show_error(str(exc))
        return 1
    except anthropic.APIError as exc:
        show_error(describe_api_error(exc))
        return 1
    except EndpointError as exc:
        show_error(str(exc))
        return 1
    except KeyboardInterrupt:
        show_error("interrupted")
        return 130
    try:
        return _repl(name, client, agent_loop, commands, banner)
    finally:
        show_session()


REPL_HELP = 'a line """ starts a prompt of several lines and the next """ ends it; Ctrl-C clears the line'


def _repl(name, client, agent_loop, commands, banner=None):
    import anthropic
    history = []
    label = name.split("_")[0]
    names = ["q/exit", "/help", *commands]
    print(f"{name}{f' ({banner})' if banner else ''}: type a prompt ({', '.join(names)})", file=sys.stderr)
    while True:
        try:
            query = _read_prompt(_colour("36", f"{label} >> ", sys.stdout))
        except KeyboardInterrupt:          # Ctrl-C at the prompt clears the line, as in a shell
            print(file=sys.stderr)
            continue
        except EOFError:
            print()
            return 0
        if query.strip().lower() in ("q", "exit", "quit"):
            return 0
        if not query.strip():
            continue
        word, _, arg = query.strip().partition(" ")
        if word.lower() in commands:
            try:
                commands[word.lower()](history, client, arg.strip())
            except (SetupError, ValueError) as exc:  # a command's refusal, or a setting to fix
                show_error(str(exc))
            except Exception as exc:                 # a bug or an odd file: one line, the conversation stays
                show_error(f"/{word.lower().lstrip('/')} failed: {type(exc).__name__}: {exc}")
            except KeyboardInterrupt:
                show_note("[command interrupted]")
            continue
        if _is_command_word(word):          # answered here: a typo must not cost a model call
            _unknown_command(word, commands)
            continue
        saved = len(history)
        try:
            history.append({"role": "user", "content": query})
            print_answer(agent_loop(history, client))
        except KeyboardInterrupt:
            _keep_completed(history, saved, "turn abandoned")
        except (anthropic.APIError, EndpointError) as exc:
            show_error(describe_api_error(exc, client) if isinstance(exc, anthropic.APIError) else str(exc))
            _keep_completed(history, saved, "turn failed")
        except (SetupError, ValueError) as exc:
            show_error(str(exc))
            _keep_completed(history, saved, "turn failed")


def _read_prompt(prompt):
    """One prompt: a line; a block between two \"\"\" lines; or, on a terminal, all lines pasted at once."""
    line = input(prompt)
    if line.strip() == '"""':
        lines = []
        while (more := input("... ")).strip() != '"""':
            lines.append(more)
        return "\n".join(lines)
    lines = [line]
    while sys.stdin.isatty() and select.select([sys.stdin], [], [], 0.03)[0]:  # more of a paste is waiting
        lines.append(input())
    return "\n".join(lines)


def _is_command_word(word):
    return word.startswith("/") and len(word) > 1 and word[1:].replace("-", "").replace("_", "").isalnum() \
        and word[1].isalpha() and "/" not in word[1:]


def _unknown_command(word, commands):
    known = ["/help", *commands]
    if word.lower() == "/help":
        print(f"commands: {', '.join(known)}, q or exit to quit; {REPL_HELP}; anything else is a prompt")
        return
    close = difflib.get_close_matches(word.lower(), known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    show_error(f"unknown command {word}{hint} (commands: {', '.join(known)}); nothing was sent to the model")


def _keep_completed(history, saved, what):
    """After a failed turn keep what was done: every tool call that ran and its result.

    The files those tools wrote are on disk either way; forgetting them would make the model
    redo (or duplicate) them. A trailing assistant message whose tool calls got no results is
    dropped, so the history stays valid for the API.
    """
    while len(history) > saved + 1 and not _ends_with_results(history):
        history.pop()
    done = sum(1 for m in history[saved + 1:] if m["role"] == "user" for b in m["content"]
               if isinstance(b, dict) and b.get("type") == "tool_result")
    if len(history) <= saved + 1 or not done:
        del history[saved:]
        show_note(f"[{what}; the conversation is as it was before it]")
    else:
        show_note(f"[{what} after {done} tool call{'s' * (done != 1)}: they are kept in the conversation, "
                  "so the model knows what was done]")


def _ends_with_results(history):
    last = history[-1]
    return last["role"] == "user" and isinstance(last["content"], list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in last["content"])


def _run_demo(demo, agent_loop):
    from stand_in_api import StandInAPI
    script, prompt, summary = demo()
    with StandInAPI(script, summary=summary) as api:
        show_note(f"[demo] a SCRIPTED stand-in model answers on {api.url}: no key, no network.")
        show_note("[demo] the loop, the tools and the files they write are real.")
        print(_colour("36", f">> {prompt}", sys.stdout))
        os.environ["ANTHROPIC_BASE_URL"] = api.url   # so every message names the stand-in, not the real API
        client = make_client(base_url=api.url, api_key="demo-no-key")
        print_answer(agent_loop([{"role": "user", "content": prompt}], client))
    show_session()
    if api.violations:
        show_error(f"the demo sent an invalid request: {api.violations[0]}")
        return 1
    return 0
