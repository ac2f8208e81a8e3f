"""Plumbing shared by the lessons: configuration, the client, terminal output, the CLI.

None of this is what the lessons teach; it is kept here so each lesson file
holds only its own idea. Nothing runs at import: the client is built by
`make_client()`, called from a lesson's `main()`.
"""

import argparse
import json
import os
import sys
from pathlib import Path

# anthropic and dotenv are imported inside the functions that use them, so importing
# a lesson needs neither and costs nothing (the SDK alone takes about 2 s to import).

DEFAULT_MODEL = "claude-sonnet-5-5"  # any model id works; MODEL_ID overrides it
PREVIEW_CHARS = 100                  # width of a tool result's preview in the terminal
PREVIEW_LINES = 6                    # lines of a tool result's preview (a board or todo list fits)


class SetupError(Exception):
    """A configuration problem the user must fix; shown as one line, exit 1."""


# ---------------------------------------------------------------- configuration

def load_env():
    """Read ./.env; a variable already set in the real environment wins."""
    from dotenv import load_dotenv
    load_dotenv(Path.cwd() / ".env", override=False)


def model_id():
    return os.environ.get("MODEL_ID") or DEFAULT_MODEL


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
    base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
    return anthropic.Anthropic(api_key=api_key, auth_token=auth_token, base_url=base_url)


def describe_api_error(exc):
    """One line saying what failed and what to do about it."""
    import anthropic
    where = os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
    status = getattr(exc, "status_code", None)
    detail = _error_message(exc)
    if isinstance(exc, anthropic.APITimeoutError):
        return f"the API at {where} did not answer in time, even after retries: try again later"
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
    shown = " ".join(f"{k}={_short(json.dumps(v, ensure_ascii=False), 60)}" for k, v in (args or {}).items())
    print(_colour("36", f"> {name} {shown}".rstrip()), file=sys.stderr)


def show_tool_result(output, is_error):
    lines = str(output).splitlines() or [""]
    if len(lines) > PREVIEW_LINES:
        lines = lines[: PREVIEW_LINES - 1] + [f"… ({len(lines) - PREVIEW_LINES + 1} more lines)"]
    mark, code = ("!", "31") if is_error else ("=", "2")
    for n, line in enumerate(lines):
        print(_colour(code, f"  {mark if n == 0 else ' '} {_short(line, PREVIEW_CHARS)}"), file=sys.stderr)


def show_text(text):
    """What the model says between tool calls."""
    if text.strip():
        print(_colour("1", text.strip()), file=sys.stderr)


def usage_counts(usage):
    """(uncached input, read from cache, written to cache, output); a missing or null field is 0."""
    names = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")
    return tuple(getattr(usage, n, None) or 0 for n in names)


def show_usage(usage, label="tokens"):
    fresh, read, written, out = usage_counts(usage)
    print(_colour("2", f"  [{label}: {fresh:,} in · {read:,} from cache · {written:,} to cache · {out:,} out]"),
          file=sys.stderr)


def show_note(line):
    print(_colour("33", line), file=sys.stderr)


def show_error(line):
    print(_colour("31", f"error: {line}"), file=sys.stderr)


# ---------------------------------------------------------------- the CLI

def run_cli(name, doc, agent_loop, commands=None, demo=None, argv=None, options=(), on_start=None):
    """`sNN.py "prompt"` runs one turn; `sNN.py` opens a REPL; `--demo` plays a script.

    agent_loop(messages, client) -> final text.  commands: {"/x": fn(messages, client, arg)}, arg being
    the rest of the line. options: [(flags, add_argument kwargs)]. on_start(args) runs after .env is
    read and may return a word for the REPL banner.
    demo: () -> (script, prompt, summary), played by the loopback stand-in with no key;
    summary answers compaction calls (None if the lesson does not compact).
    """
    import anthropic
    commands = commands or {}
    repl_help = f" In the REPL: {', '.join(commands)}." if commands else ""
    parser = argparse.ArgumentParser(prog=f"python {name}.py", description=doc.strip().splitlines()[0],
                                     epilog="Set ANTHROPIC_API_KEY (or put it in ./.env); "
                                            f"ANTHROPIC_BASE_URL and MODEL_ID are optional.{repl_help}")
    parser.add_argument("prompt", nargs="?", help="run one turn with this prompt and exit; "
                                                  "without it, open a REPL (q or exit to quit)")
    if demo:
        parser.add_argument("--demo", action="store_true",
                            help="play a scripted session through the real loop and tools; no key, no network")
    for flags, kwargs in options:
        parser.add_argument(*flags, **kwargs)
    args = parser.parse_args(argv)
    load_env()
    try:
        banner = on_start(args) if on_start else None
        if demo and args.demo:
            return _run_demo(demo, agent_loop)
        client = make_client()
        if args.prompt is not None:
            print(agent_loop([{"role": "user", "content": args.prompt}], client))
            return 0
    except SetupError as exc:
        show_error(str(exc))
        return 1
    except anthropic.APIError as exc:
        show_error(describe_api_error(exc))
        return 1
    except KeyboardInterrupt:
        show_error("interrupted")
        return 130
    return _repl(name, client, agent_loop, commands, banner)


def _repl(name, client, agent_loop, commands, banner=None):
    import anthropic
    history = []
    label = name.split("_")[0]
    helps = ", ".join(["q/exit", *commands])
    print(f"{name}{f' ({banner})' if banner else ''}: type a prompt ({helps})", file=sys.stderr)
    while True:
        try:
            query = input(_colour("36", f"{label} >> ", sys.stdout))
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if query.strip().lower() in ("q", "exit", "quit"):
            return 0
        if not query.strip():
            continue
        saved = list(history)  # so a failed or interrupted turn can be undone whole
        try:
            word, _, arg = query.strip().partition(" ")
            if word.lower() in commands:
                commands[word.lower()](history, client, arg.strip())
                continue
            history.append({"role": "user", "content": query})
            print(agent_loop(history, client))
        except KeyboardInterrupt:
            history[:] = saved
            show_note("[turn abandoned; the conversation is as it was before it]")
        except anthropic.APIError as exc:
            history[:] = saved
            show_error(describe_api_error(exc))
        except (SetupError, ValueError) as exc:  # a command's refusal, or a setting to fix
            history[:] = saved
            show_error(str(exc))


def _run_demo(demo, agent_loop):
    from stand_in_api import StandInAPI
    script, prompt, summary = demo()
    with StandInAPI(script, summary=summary) as api:
        show_note(f"[demo] a SCRIPTED stand-in model answers on {api.url}: no key, no network.")
        show_note("[demo] the loop, the tools and the files they write are real.")
        print(_colour("36", f">> {prompt}", sys.stdout))
        client = make_client(base_url=api.url, api_key="demo-no-key")
        print(agent_loop([{"role": "user", "content": prompt}], client))
    if api.violations:
        show_error(f"the demo sent an invalid request: {api.violations[0]}")
        return 1
    return 0
