"""The command line every lesson shares: one-shot runs, the REPL, and --demo.

Relied on by all three lessons: each main() is one call to run_cli. Without each piece:
- parsing before the SDK loads: --help takes seconds, and fails without the SDK.
- the budget (--max-steps, MAX_STEPS, StepLimit, STEPS_RAN_OUT): a turn that ran out of
  model calls exits 0 as if done, and a script cannot tell it from a finished one (it exits
  3, naming --continue). A bad MAX_STEPS is refused before anything is written.
- no key, the REPL still opens: /tasks, /task, /context, /cost and /help need no model;
  a typed prompt gets one line saying how to reach one.
- _repl's error handling (_run_turn, _run_command): one failed call, or a connection dropped
  in the middle of a reply, ends the session and loses the conversation.
- _keep_completed and ToolsInterrupted: after a failed or abandoned turn (Ctrl-C in the
  middle of a batch of tool calls) the model forgets the tool calls that already ran (and
  wrote files), and does them again; or, after a compaction in that turn, the history is
  left with a tool call and no result, and the API refuses every later request.
- _read_prompt and readline: a pasted block of several lines becomes several prompts;
  arrow keys print ^[[A and there is no history of earlier prompts. The history is read and
  written by us (_start_history, _save_history): readline truncated the target of a link
  planted there, hung on a FIFO before the first prompt, and gave the terminal the escape
  codes a planted line held.
- _clean_prompt and _tolerate_stray_bytes: a prompt with a byte that is not UTF-8 (a
  Latin-1 é) ends the REPL with a traceback, or makes every later request unsendable.
- _reader_gone: `python sNN.py "..." | head -1` ends in a BrokenPipeError traceback.
- _run_demo: without it a learner needs a key to see a lesson run. Its folder is opened
  without following a link: `demo` as a file or a dangling link ended in a traceback, and a
  link to a folder would send the demo's files there.
- --continue and the session log: a stopped run cannot be resumed; its work is redone.
- before_prompt (s07's live board): a person at the REPL does not see what other agents did.
- end_of_run: no session total and no session page (session/page.py) at the end of a run.
"""

import argparse
import difflib
import io
import os
import select
import sys
import textwrap
from pathlib import Path

from harness import clean, config, files, terminal, writer
from harness.errors import EndpointError, NoKey, SetupError, reason
from harness.sdk import anthropic
from harness.session import log as session_log
from harness.session import page, views
from harness.session.record import RECORD
from harness.stand_in import StandInAPI
from harness.tool_calls import NOT_RUN, ToolsInterrupted

try:
    import readline     # line editing and history for input(), where the platform has it
except ImportError:     # Windows without pyreadline: input() still works, without editing
    readline = None

STEPS_RAN_OUT = 3     # a one-shot run's exit status when the turn's budget ran out (README)
HISTORY = config.TRANSCRIPTS / "repl_history"   # the REPL's earlier prompts (up and down)
HISTORY_LINES = 1000  # prompts kept in it
HISTORY_BYTES = 4_000_000   # read of it at most: a thousand prompts of 4 kB
DEMO = Path("demo")   # where --demo runs: nothing it writes lands beside your own files
NO_MODEL = ("no model to talk to: set ANTHROPIC_API_KEY in your environment or in ./.env (copy "
            ".env.example; any value will do for a local server at ANTHROPIC_BASE_URL), or try "
            "--demo, which needs no key")
REPL_HELP = ('a line """ starts a prompt of several lines and the next """ ends it; '
             "Ctrl-C clears the line; up and down recall earlier prompts")


class StepLimit(str):
    """What a loop returns when its turn used up its budget of model calls (not finished)."""


def step_limit(steps: int) -> StepLimit:
    return StepLimit(f"[stopped: {steps} model calls in this turn without finishing; say "
                     "'continue' to go on, or raise --max-steps]")


def run_cli(name, doc, agent_loop, commands=None, demo=None, argv=None, options=(),
            on_start=None, help_extra="", before_prompt=None):
    """`sNN.py "prompt"` runs one turn; `sNN.py` opens a REPL; `--demo` plays a script.

    agent_loop(messages, client, max_steps=...) -> the final text. commands: {"/x": fn(messages,
    client, arg)}, arg being the rest of the line (client is None without a key). options:
    [(flags, add_argument kwargs)]. on_start(args) runs after .env is read and may return a
    word for the REPL banner. before_prompt() runs before each REPL prompt. demo: () ->
    (script, prompt, summary), played by the loopback stand-in with no key; summary answers
    compaction calls (None if the lesson does not compact).
    """
    commands = {**(commands or {}), "/cost": views.cost_command, "/clear": clear}
    parser = _parser(name, doc, commands, demo, options, help_extra)
    args = parser.parse_args(argv)  # before the SDK loads, so --help is instant
    if args.prompt is not None and not args.prompt.strip():
        parser.error("the prompt is empty; give a prompt, or none for the REPL")
    if demo and args.demo and args.prompt is not None:
        parser.error("--demo plays its own scripted prompt; leave out the prompt (or drop --demo)")
    if demo and args.demo and args.continue_:
        parser.error("--demo always starts afresh; drop --continue")
    if anthropic is None:
        terminal.show_error("the anthropic package is not installed here: run  "
                            "python -m pip install -r requirements.txt")
        return 1
    try:
        code = _run(name, args, agent_loop, commands, demo, on_start, before_prompt)
        sys.stdout.flush()         # here, not at exit, so a reader that has gone is caught below
        return code
    except BrokenPipeError:
        return _reader_gone()


def _parser(name, doc, commands, demo, options, help_extra):
    repl_help = f" In the REPL: {', '.join(['/help', *commands])}." if commands else ""
    epilog = textwrap.fill("Set ANTHROPIC_API_KEY (or put it in ./.env); ANTHROPIC_BASE_URL, "
                           f"MODEL_ID and API_TIMEOUT are optional.{repl_help}", 79)
    if help_extra:
        epilog += f"\n\n{help_extra}"
    parser = argparse.ArgumentParser(prog=f"python {name}.py",
                                     description=doc.strip().splitlines()[0], epilog=epilog,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prompt", nargs="?", help="none: open a REPL (q or exit to quit); "
                                                  "a prompt: run one turn with it and exit")
    if demo:
        parser.add_argument("--demo", action="store_true",
                            help="play a scripted session through the real loop and tools; "
                                 "no key, no network; it writes only under demo/")
    parser.add_argument("--continue", dest="continue_", action="store_true",
                        help="resume the latest session saved in .transcripts/ here (with a "
                             "prompt: one more turn; without: the REPL)")
    parser.add_argument("--max-steps", type=_steps, metavar="N",
                        help="model calls a turn may make before it stops (default: "
                             "MAX_STEPS, else the lesson's own)")
    for flags, kwargs in options:
        parser.add_argument(*flags, **kwargs)
    return parser


def _run(name, args, agent_loop, commands, demo, on_start, before_prompt):
    RECORD.reset(name)                  # before on_start: s07 registers its board there
    try:
        config.load_env()
        budget = _budget(args)          # before any file is written: a bad value is one line
        banner = on_start(args) if on_start else None
        if demo and args.demo:
            return _run_demo(demo, agent_loop)
        client = _client_or_none(args)
        history = session_log.open_session(args.continue_)   # [] or the resumed one
        if args.prompt is not None:
            prompt = _clean_prompt(args.prompt)
            return _one_shot(name, history, client, agent_loop, budget, prompt)
    except (SetupError, EndpointError) as exc:
        terminal.show_error(str(exc))
        return 1
    except KeyboardInterrupt:
        terminal.show_error("interrupted")
        return 130
    try:
        return _repl(name, client, agent_loop, budget, commands, banner, history, before_prompt)
    finally:
        end_of_run()


def _budget(args) -> dict:
    """The loop's max_steps: --max-steps, else MAX_STEPS, else the lesson's own default."""
    steps = args.max_steps or config.positive_int("MAX_STEPS", 0, "model calls")
    return {"max_steps": steps} if steps else {}


def _client_or_none(args):
    """The client; without a key, None for the REPL (its commands need no model)."""
    try:
        return config.make_client()
    except NoKey:
        if args.prompt is not None:
            raise SetupError(NO_MODEL) from None
        terminal.show_note(f"[{NO_MODEL}; the REPL's commands work without one]")
        return None


def _one_shot(name, history, client, agent_loop, budget, prompt) -> int:
    """One turn; 0 when it finished, STEPS_RAN_OUT when its budget ran out (says how to go on)."""
    history.append({"role": "user", "content": prompt})
    try:
        answer = agent_loop(history, client, **budget)
        if isinstance(answer, StepLimit):    # a one-shot run cannot be told 'continue'
            answer = StepLimit(answer.split(";")[0] + "]")
        terminal.print_answer(answer)
    finally:
        session_log.record(history)
        end_of_run()
    if isinstance(answer, StepLimit):
        terminal.show_note(f'[to go on: python {name}.py --continue "go on"  (or raise '
                           "--max-steps)]")
        return STEPS_RAN_OUT
    return 0


def _steps(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a positive whole number of model calls, got {text!r}")
    return int(text)


def _reader_gone() -> int:
    """stdout's reader has left (`| head -1`): stop quietly, as the Python docs recommend.

    stdout is pointed at /dev/null, so the flush at exit does not raise a second time.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):   # stdout is not a file (a test's capture): nothing to flush
        pass
    return 1


# ---------------------------------------------------------------- the REPL

def _repl(name, client, agent_loop, budget, commands, banner, history, before_prompt):
    label = name.split("_")[0]
    names = ["q/exit", "/help", *commands]
    _tolerate_stray_bytes()
    _start_history()
    about = f" ({banner})" if banner else ""
    terminal.show(f"{name}{about}: type a prompt ({', '.join(names)})")
    while True:
        if before_prompt:
            _run_command(lambda *_: before_prompt(), "(board news)", history, client, "")
        try:
            prompt = terminal.colour("36", f"{label} >> ", sys.stdout)
            query = _clean_prompt(_read_prompt(prompt))
        except KeyboardInterrupt:       # Ctrl-C at the prompt clears the line, as in a shell
            print(file=sys.stderr)
            continue
        except EOFError:
            print()
            return 0
        if query.strip().lower() in ("q", "exit", "quit"):
            return 0
        if not query.strip():
            continue
        _save_history()
        word, _, arg = query.strip().partition(" ")
        if word.lower() in commands:
            _run_command(commands[word.lower()], word.lower(), history, client, arg.strip())
        elif _is_command_word(word):     # answered here: a typo must not cost a model call
            _unknown_command(word, commands)
        elif client is None:
            terminal.show_error(NO_MODEL)
        else:
            _run_turn(history, client, agent_loop, budget, query)
        session_log.record(history)      # saved as it goes: --continue picks it up


def clear(messages: list, client, arg: str = "") -> None:
    """/clear: a fresh conversation. What the tools did (files, s07's board) stays."""
    messages.clear()
    terminal.show_note("[a fresh conversation: the model remembers nothing of the last one; "
                       "files and the task board (s07) are as they were]")


def _run_command(command, word, history, client, arg):
    try:
        command(history, client, arg)
    except (SetupError, ValueError) as exc:  # a command's refusal, or a setting to fix
        terminal.show_error(str(exc))
    except BrokenPipeError:                  # stdout's reader has gone: run_cli ends quietly
        raise
    except Exception as exc:                 # a bug or an odd file: one line, the talk stays
        terminal.show_error(f"/{word.lstrip('/')} failed: {type(exc).__name__}: {exc}")
    except KeyboardInterrupt:
        terminal.show_note("[command interrupted]")


def _run_turn(history, client, agent_loop, budget, query):
    """One prompt through the loop; a failed or abandoned turn keeps what was done in it."""
    saved = len(history)
    prompt = {"role": "user", "content": query}
    try:
        history.append(prompt)
        terminal.print_answer(agent_loop(history, client, **budget))
    except ToolsInterrupted as exc:
        _keep_completed(history, saved, prompt, "turn abandoned", exc.results)
    except KeyboardInterrupt:
        _keep_completed(history, saved, prompt, "turn abandoned")
    except (EndpointError, SetupError, ValueError) as exc:
        terminal.show_error(str(exc))
        _keep_completed(history, saved, prompt, "turn failed")
    except BrokenPipeError:                  # stdout's reader has gone: run_cli ends quietly
        raise
    except Exception as exc:                 # a bug, or an endpoint odder than any above
        terminal.show_error(f"the turn failed: {type(exc).__name__}: {exc}")
        _keep_completed(history, saved, prompt, "turn failed")


def _keep_completed(history, saved, prompt, what, results=None):
    """After a failed turn, a history the API accepts that keeps what was done: every tool
    call that ran, with its result. The files those tools wrote are on disk either way;
    forgetting them would make the model redo (or duplicate) them.

    results (from ToolsInterrupted) answer every call of the last assistant message. An
    assistant message at the end whose calls got no result never ran them: it is dropped.
    If a compaction replaced the history during the turn (the prompt is no longer in it),
    the turn cannot be undone: the history goes on from the summary.
    """
    if results and history and history[-1]["role"] == "assistant":
        history.append({"role": "user", "content": results})
    # Calls without a result: answered from the log, the one running marked (session/log.py).
    history[:] = session_log.repair_live(history)[0]
    compacted = not any(m is prompt for m in history)
    start = 0 if compacted else saved + 1
    done = _ran_calls(history[start:])
    if compacted:
        history[:] = clean.clean_json(history) or []
        terminal.show_note(f"[{what} after a compaction; the conversation goes on from its "
                           f"summary ({terminal.plural(done, 'tool call')} since it kept)]")
    elif not done:
        del history[saved:]
        terminal.show_note(f"[{what}; the conversation is as it was before it]")
    else:
        history[saved:] = clean.clean_json(history[saved:])
        terminal.show_note(f"[{what} after {terminal.plural(done, 'tool call')}: they are "
                           "kept in the conversation, so the model knows what was done]")


def _ran_calls(messages: list) -> int:
    """Tool results of calls that ran (one Ctrl-C kept from running says NOT_RUN)."""
    count = 0
    for message in messages:
        content = message.get("content") if message["role"] == "user" else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result" \
                    and block.get("content") != NOT_RUN:
                count += 1
    return count


def _read_prompt(prompt):
    """One prompt: a line; a block between two \"\"\" lines; or, on a terminal, all the lines
    pasted at once."""
    line = input(prompt)
    if line.strip() == '"""':
        return _read_block()
    lines = [line]
    # more of a paste is waiting
    while sys.stdin.isatty() and select.select([sys.stdin], [], [], 0.03)[0]:
        lines.append(input())
    return "\n".join(lines)


def _read_block():
    """The lines up to the closing \"\"\"; if the input ends first, what it held, said so."""
    lines = []
    while True:
        try:
            more = input("... ")
        except EOFError:
            if not lines:
                raise
            terminal.show_note('[the input ended inside a """ block: sending the lines it held]')
            return "\n".join(lines)
        if more.strip() == '"""':
            return "\n".join(lines)
        lines.append(more)


def _start_history() -> None:
    """Earlier prompts for the up and down keys, from .transcripts/ (not on Windows, and only
    on a terminal: a pipe has no keys to press). Read by us, not by readline (which follows a
    link and waits on a FIFO): a regular file only; a line holding a control character is
    left out, since the up key would send it to the terminal."""
    if readline is None or os.name == "nt" or not sys.stdin.isatty():
        return
    try:
        saved = files.read_bytes(HISTORY, str(HISTORY), HISTORY_BYTES, follow=False)
    except ValueError as exc:
        if os.path.lexists(HISTORY):     # a link, a FIFO: said; the end of the REPL replaces it
            terminal.show_note(f"[earlier prompts not loaded: {exc}]")
        return
    for line in saved.decode("utf-8", "replace").splitlines()[-HISTORY_LINES:]:
        if not clean.CONTROL.search(line):
            readline.add_history(line)


def _save_history() -> None:
    """The last HISTORY_LINES prompts, through the writer: whole, 0600, never through a link."""
    if readline is None or os.name == "nt" or not sys.stdin.isatty():
        return
    count = readline.get_current_history_length()
    first = max(count - HISTORY_LINES, 0) + 1
    lines = [readline.get_history_item(n) or "" for n in range(first, count + 1)]
    data = "".join(f"{line}\n" for line in lines).encode("utf-8", "replace")
    try:
        writer.replace(HISTORY, data, writer.PRIVATE)
    except OSError:          # a read-only folder: the REPL goes on without saved history
        pass


def _tolerate_stray_bytes():
    """Decode stdin with surrogateescape: a byte that is not UTF-8 arrives as a lone surrogate
    (which _clean_prompt replaces) instead of a UnicodeDecodeError that ends the REPL."""
    if isinstance(sys.stdin, io.TextIOWrapper) and sys.stdin.errors == "strict":
        sys.stdin.reconfigure(errors="surrogateescape")


def _clean_prompt(text: str) -> str:
    """The prompt with each lone surrogate (a stray byte, half an emoji) as U+FFFD, said once."""
    cleaned = clean.clean_text(text)
    if cleaned.count("\ufffd") > text.count("\ufffd"):
        terminal.show_note("[the prompt held bytes that are not UTF-8 text; each is sent as "
                           "\ufffd]")
    return cleaned


def _is_command_word(word):
    rest = word[1:].replace("-", "").replace("_", "")
    return (word.startswith("/") and len(word) > 1 and rest.isalnum() and word[1].isalpha()
            and "/" not in word[1:])


def _unknown_command(word, commands):
    known = ["/help", *commands]
    if word.lower() == "/help":
        terminal.show_out(f"commands: {', '.join(known)}, q or exit to quit; {REPL_HELP}; "
                          "anything else is a prompt")
        return
    close = difflib.get_close_matches(word.lower(), known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    terminal.show_error(f"unknown command {word}{hint} (commands: {', '.join(known)}); nothing "
                        "was sent to the model")


# ---------------------------------------------------------------- the end of a run, the demo

def end_of_run(seen_from: Path = None) -> None:
    """The session's total, its page (session/page.py) with the path, the log closed.
    seen_from: the user's folder, when the run was in demo/."""
    session_log.close_session()
    totals = RECORD.totals()
    terminal.show_session(totals["calls"], totals["fresh"], totals["read"], totals["written"],
                          totals["out"])
    page.end_of_run(seen_from=seen_from)


def _run_demo(demo, agent_loop):
    """The lesson's script through its real loop, inside demo/: whatever the demo writes (its
    files, s07's board, .transcripts/) is there, and nothing of the user's is touched."""
    home = Path.cwd()
    try:
        with writer.folder(DEMO) as folder:   # a real folder: not a link, not a file
            os.fchdir(folder)
    except OSError as exc:
        raise SetupError(f"--demo cannot run in {DEMO}/: {reason(exc)}") from None
    try:
        terminal.show_note(f"[demo] it runs in {DEMO}/: everything it writes goes there")
        script, prompt, summary = demo()
        with StandInAPI(script, summary=summary) as api:
            terminal.show_note(f"[demo] a SCRIPTED stand-in model answers on {api.url}: no "
                               "key, no network.")
            terminal.show_note("[demo] the loop, the tools and the files they write are real.")
            terminal.show(f">> {prompt}", "36", sys.stdout)
            client = config.make_client(base_url=api.url, api_key="demo-no-key")
            messages = [{"role": "user", "content": prompt}]
            terminal.print_answer(agent_loop(messages, client))
        end_of_run(seen_from=home)
    finally:
        os.chdir(home)
    if api.violations:
        terminal.show_error(f"the demo sent an invalid request: {api.violations[0]}")
        return 1
    return 0
