"""The command line every lesson shares: one-shot runs, the REPL, and --demo.

Relied on by all three lessons: each main() is one call to run_cli. Without each piece:
- parsing before importing the SDK: --help takes two seconds and fails without the SDK.
- _repl's error handling (_run_turn, _run_command): one failed call, or a connection dropped
  in the middle of a reply, ends the session and loses the conversation.
- _keep_completed and ToolsInterrupted: after a failed or abandoned turn (Ctrl-C in the middle
  of a batch of tool calls) the model forgets the tool calls that already ran (and wrote
  files), and does them again.
- _read_prompt: a pasted block of several lines becomes several prompts; a block cut off by
  the end of the input is dropped without a word.
- _clean_prompt and _tolerate_stray_bytes: a prompt with a byte that is not UTF-8 (a Latin-1
  é) ends the REPL with a traceback, or makes every later request of the session unsendable.
- _reader_gone: `python sNN.py "..." | head -1` ends in a BrokenPipeError traceback.
- _run_demo: without it a learner needs a key to see a lesson run.
- --max-steps, StepLimit and _one_shot: a turn that ran out of model calls exits 0 as if done,
  and a script cannot tell it from a finished one (it exits STEPS_RAN_OUT, 3, naming --continue).
- --continue and session_log: a stopped run cannot be resumed; its work is redone.
- before_prompt (s07's live board): a person at the REPL does not see what other agents did.
- end_of_run: no session total and no session page (session_page.py) at the end of a run.
"""

import argparse
import difflib
import io
import os
import select
import sys
import textwrap

from harness.session import log as session_log
from harness.session.page import end_of_run as write_session_page
from harness.session.record import RECORD
from harness.session.views import cost_command
from harness.config import api_error_line, load_env, make_client
from harness.errors import EndpointError, SetupError
from harness.sdk import anthropic
from harness.terminal import (SESSION, _colour, clean_json, clean_text, print_answer, show,
                              show_error, show_note, show_out, show_session)

STEPS_RAN_OUT = 3   # a one-shot run's exit status when the turn's budget ran out (README)
NOT_RUN = "not run: interrupted by the user"   # the result of a call Ctrl-C kept from running


def not_run(call) -> dict:
    """The tool_result of a call that Ctrl-C kept from running."""
    return {"type": "tool_result", "tool_use_id": call.id, "content": NOT_RUN, "is_error": True}


class ToolsInterrupted(KeyboardInterrupt):
    """Ctrl-C in the middle of a batch of tool calls (raised by the lesson's run_tool_calls).

    results: one tool_result block for EVERY tool_use of the assistant message, in order: the
    calls that ran with their output, the others is_error with NOT_RUN as their content. The
    REPL appends them after that message, so what was done is kept and the history is valid.
    """

    def __init__(self, results: list):
        super().__init__("tool calls interrupted")
        self.results = results


def run_cli(name, doc, agent_loop, commands=None, demo=None, argv=None, options=(), on_start=None, help_extra="",
            before_prompt=None):
    """`sNN.py "prompt"` runs one turn; `sNN.py` opens a REPL; `--demo` plays a script.

    agent_loop(messages, client) -> final text.  commands: {"/x": fn(messages, client, arg)}, arg being
    the rest of the line. options: [(flags, add_argument kwargs)]. on_start(args) runs after .env is
    read and may return a word for the REPL banner. help_extra: more text for --help.
    before_prompt() runs before each REPL prompt (s07: what other agents changed on the board).
    demo: () -> (script, prompt, summary), played by the loopback stand-in with no key;
    summary answers compaction calls (None if the lesson does not compact).
    """
    commands = {**(commands or {}), "/cost": cost_command}   # /cost: what the session has billed
    parser = _parser(name, doc, commands, demo, options, help_extra)
    args = parser.parse_args(argv)  # before importing the SDK, so --help is instant
    if args.prompt is not None and not args.prompt.strip():
        parser.error("the prompt is empty; give a prompt, or none for the REPL")
    if demo and args.demo and args.prompt is not None:
        parser.error("--demo plays its own scripted prompt; leave out the prompt (or drop --demo)")
    if demo and args.demo and args.continue_:
        parser.error("--demo always starts afresh; drop --continue")
    if args.max_steps is not None:   # the loops read MAX_STEPS (config.max_steps) on every call
        os.environ["MAX_STEPS"] = str(args.max_steps)
    try:
        anthropic.APIError        # the SDK loads here (harness/sdk.py), or says it is missing
    except (ImportError, AttributeError):
        show_error("the anthropic package is not installed here: run  python -m pip install -r requirements.txt")
        return 1
    try:
        code = _run(name, args, agent_loop, commands, demo, on_start, before_prompt)
        sys.stdout.flush()           # here, not at exit, so a reader that has gone is caught below
        return code
    except BrokenPipeError:
        return _reader_gone()


def _parser(name, doc, commands, demo, options, help_extra):
    repl_help = f" In the REPL: {', '.join(['/help', *commands])}." if commands else ""
    parser = argparse.ArgumentParser(prog=f"python {name}.py", description=doc.strip().splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=textwrap.fill("Set ANTHROPIC_API_KEY (or put it in ./.env); "
                                                          "ANTHROPIC_BASE_URL, MODEL_ID and API_TIMEOUT are "
                                                          f"optional.{repl_help}", 79)
                                            + (f"\n\n{help_extra}" if help_extra else ""))
    parser.add_argument("prompt", nargs="?", help="none: open a REPL (q or exit to quit); "
                                                  "a prompt: run one turn with it and exit")
    if demo:
        parser.add_argument("--demo", action="store_true",
                            help="play a scripted session through the real loop and tools; no key, no network")
    parser.add_argument("--continue", dest="continue_", action="store_true",
                        help="resume the latest session saved in .transcripts/ here (with a prompt: "
                             "one more turn; without: the REPL)")
    parser.add_argument("--max-steps", type=_steps, metavar="N",
                        help="model calls a turn may make before it stops (default: MAX_STEPS, else "
                             "the lesson's own)")
    for flags, kwargs in options:
        parser.add_argument(*flags, **kwargs)
    return parser


def _run(name, args, agent_loop, commands, demo, on_start, before_prompt=None):
    SESSION.update(dict.fromkeys(SESSION, 0))
    RECORD.reset(name)                  # before on_start: s07 registers its board there
    try:
        load_env()
        banner = on_start(args) if on_start else None
        if demo and args.demo:
            return _run_demo(demo, agent_loop)
        client = make_client()
        history = session_log.open_session(args.continue_)   # [] or the resumed conversation
        if args.prompt is not None:
            return _one_shot(name, history, client, agent_loop, _clean_prompt(args.prompt))
    except (SetupError, EndpointError) as exc:
        show_error(str(exc))
        return 1
    except anthropic.APIError as exc:
        show_error(api_error_line(exc))
        return 1
    except KeyboardInterrupt:
        show_error("interrupted")
        return 130
    try:
        return _repl(name, client, agent_loop, commands, banner, history, before_prompt)
    finally:
        end_of_run()


def _one_shot(name, history, client, agent_loop, prompt) -> int:
    """One turn; 0 when it finished, STEPS_RAN_OUT when its budget ran out (say how to go on)."""
    history.append({"role": "user", "content": prompt})
    try:
        answer = agent_loop(history, client)
        if isinstance(answer, StepLimit):    # a one-shot run cannot be told 'continue'
            answer = StepLimit(answer.split(";")[0] + "]")
        print_answer(answer)
    finally:
        session_log.record(history)
        end_of_run()
    if isinstance(answer, StepLimit):
        show_note(f'[to go on: python {name}.py --continue "go on"  (or raise --max-steps)]')
        return STEPS_RAN_OUT
    return 0


class StepLimit(str):
    """What a loop returns when its turn used up its budget of model calls (not a finished turn)."""


def step_limit(steps: int) -> StepLimit:
    return StepLimit(f"[stopped: {steps} model calls in this turn without finishing; say 'continue' "
                     "to go on, or raise --max-steps]")


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
    except (OSError, ValueError):    # stdout is not a file (a test's capture): nothing to flush
        pass
    return 1


REPL_HELP = 'a line """ starts a prompt of several lines and the next """ ends it; Ctrl-C clears the line'


def _repl(name, client, agent_loop, commands, banner=None, history=None, before_prompt=None):
    history = [] if history is None else history
    label = name.split("_")[0]
    names = ["q/exit", "/help", *commands]
    _tolerate_stray_bytes()
    show(f"{name}{f' ({banner})' if banner else ''}: type a prompt ({', '.join(names)})")
    while True:
        if before_prompt:
            _run_command(lambda *_: before_prompt(), "(board news)", history, client, "")
        try:
            query = _clean_prompt(_read_prompt(_colour("36", f"{label} >> ", sys.stdout)))
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
            _run_command(commands[word.lower()], word.lower(), history, client, arg.strip())
        elif _is_command_word(word):        # answered here: a typo must not cost a model call
            _unknown_command(word, commands)
        else:
            _run_turn(history, client, agent_loop, query)
        session_log.record(history)         # saved as it goes: --continue picks it up


def _run_command(command, word, history, client, arg):
    try:
        command(history, client, arg)
    except (SetupError, ValueError) as exc:  # a command's refusal, or a setting to fix
        show_error(str(exc))
    except BrokenPipeError:                  # stdout's reader has gone: run_cli ends quietly
        raise
    except Exception as exc:                 # a bug or an odd file: one line, the talk stays
        show_error(f"/{word.lstrip('/')} failed: {type(exc).__name__}: {exc}")
    except KeyboardInterrupt:
        show_note("[command interrupted]")


def _run_turn(history, client, agent_loop, query):
    """One prompt through the loop; a failed or abandoned turn keeps what was done in it."""
    saved = len(history)
    try:
        history.append({"role": "user", "content": query})
        print_answer(agent_loop(history, client))
    except ToolsInterrupted as exc:
        _keep_completed(history, saved, "turn abandoned", exc.results)
    except KeyboardInterrupt:
        _keep_completed(history, saved, "turn abandoned")
    except (anthropic.APIError, EndpointError) as exc:
        show_error(api_error_line(exc, client) if isinstance(exc, anthropic.APIError) else str(exc))
        _keep_completed(history, saved, "turn failed")
    except (SetupError, ValueError) as exc:
        show_error(str(exc))
        _keep_completed(history, saved, "turn failed")
    except BrokenPipeError:                  # stdout's reader has gone: run_cli ends quietly
        raise
    except Exception as exc:                 # a bug, or an endpoint odder than any above: one line
        show_error(f"the turn failed: {type(exc).__name__}: {exc}")
        _keep_completed(history, saved, "turn failed")


def _read_prompt(prompt):
    """One prompt: a line; a block between two \"\"\" lines; or, on a terminal, all lines pasted at once."""
    line = input(prompt)
    if line.strip() == '"""':
        return _read_block()
    lines = [line]
    while sys.stdin.isatty() and select.select([sys.stdin], [], [], 0.03)[0]:  # more of a paste is waiting
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
            show_note('[the input ended inside a """ block: sending the lines it held]')
            return "\n".join(lines)
        if more.strip() == '"""':
            return "\n".join(lines)
        lines.append(more)


def _tolerate_stray_bytes():
    """Decode stdin with surrogateescape: a byte that is not UTF-8 arrives as a lone surrogate
    (which _clean_prompt replaces) instead of a UnicodeDecodeError that ends the REPL."""
    if isinstance(sys.stdin, io.TextIOWrapper) and sys.stdin.errors == "strict":
        sys.stdin.reconfigure(errors="surrogateescape")


def _clean_prompt(text: str) -> str:
    """The prompt with each lone surrogate (a stray byte, half an emoji) as U+FFFD, said once."""
    cleaned = clean_text(text)
    if cleaned.count("\ufffd") > text.count("\ufffd"):
        show_note("[the prompt held bytes that are not UTF-8 text; each is sent as \ufffd]")
    return cleaned


def _is_command_word(word):
    return word.startswith("/") and len(word) > 1 and word[1:].replace("-", "").replace("_", "").isalnum() \
        and word[1].isalpha() and "/" not in word[1:]


def _unknown_command(word, commands):
    known = ["/help", *commands]
    if word.lower() == "/help":
        show_out(f"commands: {', '.join(known)}, q or exit to quit; {REPL_HELP}; anything else is a prompt")
        return
    close = difflib.get_close_matches(word.lower(), known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    show_error(f"unknown command {word}{hint} (commands: {', '.join(known)}); nothing was sent to the model")


def _keep_completed(history, saved, what, results=None):
    """After a failed turn keep what was done: every tool call that ran and its result.

    The files those tools wrote are on disk either way; forgetting them would make the model
    redo (or duplicate) them. results (from ToolsInterrupted) answer every call of the last
    assistant message. A trailing assistant message whose tool calls got no results is
    dropped, so the history stays valid for the API; what is kept is cleaned (clean_json), so
    text that could not be sent does not fail every later request too.
    """
    if results and history[-1]["role"] == "assistant":
        history.append({"role": "user", "content": results})
    while len(history) > saved + 1 and not _ends_with_results(history):
        history.pop()
    done = sum(1 for m in history[saved + 1:] if m["role"] == "user"
               for b in (m["content"] if isinstance(m["content"], list) else []) if _ran(b))
    if len(history) <= saved + 1 or not done:
        del history[saved:]
        show_note(f"[{what}; the conversation is as it was before it]")
    else:
        history[saved:] = clean_json(history[saved:])
        show_note(f"[{what} after {done} tool call{'s' * (done != 1)}: they are kept in the conversation, "
                  "so the model knows what was done]")


def _ran(block) -> bool:
    """A tool_result of a call that ran (one Ctrl-C kept from running says NOT_RUN)."""
    return (isinstance(block, dict) and block.get("type") == "tool_result"
            and block.get("content") != NOT_RUN)


def _ends_with_results(history):
    last = history[-1]
    return last["role"] == "user" and isinstance(last["content"], list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in last["content"])


def end_of_run() -> None:
    """The session's total, its page (harness/session/page.py) with the path, the log closed."""
    session_log.close_session()
    show_session()
    write_session_page()


def _run_demo(demo, agent_loop):
    from harness.stand_in_api import StandInAPI
    script, prompt, summary = demo()
    with StandInAPI(script, summary=summary) as api:
        show_note(f"[demo] a SCRIPTED stand-in model answers on {api.url}: no key, no network.")
        show_note("[demo] the loop, the tools and the files they write are real.")
        show(f">> {prompt}", "36", sys.stdout)
        os.environ["ANTHROPIC_BASE_URL"] = api.url   # so every message names the stand-in, not the real API
        client = make_client(base_url=api.url, api_key="demo-no-key")
        print_answer(agent_loop([{"role": "user", "content": prompt}], client))
    end_of_run()
    if api.violations:
        show_error(f"the demo sent an invalid request: {api.violations[0]}")
        return 1
    return 0
