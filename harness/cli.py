"""The command line every lesson shares: one-shot runs, the REPL, and --demo.

Relied on by all three lessons: each main() hands its Lesson to run_cli, which makes the Run
(harness/run.py) and gives it to the loop. Without each piece:
- parsing before the SDK loads: --help takes seconds, and fails without the SDK.
- _unrecognized: `--demoo` gets argparse's bare "unrecognized arguments".
- _missing_sdk: no SDK is a traceback, not one line to paste from any folder.
- the budget (--max-steps, MAX_STEPS, step_limit.py, STEPS_RAN_OUT): a one-shot turn that ran
  out of model calls exits 0, as if done; a bad MAX_STEPS is refused after files are written.
- _client_or_none: with no key, no REPL, though /tasks, /context, /cost and /help need no model.
- _unknown_command: a mistyped /command is sent to the model as a prompt, and costs a call.
- _run_turn and _run_command: one failed call, or a connection dropped mid-reply, ends the
  session and loses the conversation.
- _keep_completed and ToolsInterrupted: after a failed or abandoned turn (Ctrl-C mid-batch) the
  model forgets the tool calls that ran (and wrote files) and does them again; or, after a
  compaction in that turn, a tool call is left without its result, and the API refuses every
  later request.
- TurnRefused: a refused reply stays in the conversation, and the API refuses every later
  request that holds it.
- _read_prompt and readline: a pasted block becomes several prompts; arrow keys print ^[[A and
  earlier prompts cannot be recalled.
- _start_history and _save_history (not readline's own): readline truncates the target of a
  link planted there, hangs on a FIFO, and sends the terminal a planted line's escape codes.
- _clean_prompt and _tolerate_stray_bytes: a prompt byte that is not UTF-8 (a Latin-1 é) ends
  the REPL in a traceback, or makes every later request unsendable.
- _tolerate_narrow_terminals: an answer an ASCII or Latin-1 terminal cannot encode undoes the
  turn, or ends a one-shot run in a traceback.
- _reader_gone: `python sNN.py "..." | head -1` ends in a BrokenPipeError traceback.
  _output_lost: `> /dev/full`, stdout on a full disk, ends in an OSError traceback.
- _run_demo: a learner needs a key to see a lesson run.
- _what_the_demo_ignores: --demo --max-steps 2 (or --name bob) plays the whole script, as
  agent demo, and says nothing of the flag it ignored.
- --continue and the session log: a stopped run cannot be resumed; its work is redone.
- before_prompt (s07's live board): a person at the REPL does not see what other agents did.
- end_of_run and bash.signals_raise: no session total nor page at the end of a run, nor when
  the terminal is closed (SIGHUP, and every write after it fails) or the run killed politely
  (SIGTERM); a Ctrl-C while the page is written is a traceback.
- _closed_streams_to_devnull: a run started with stdout closed ends in a traceback.
- a new Run for every run: a second main() in one process (a test) counts and logs on the
  first one's.
"""

import argparse
import contextlib
import dataclasses
import errno
import functools
import io
import os
import select
import shlex
import sys
from pathlib import Path
from typing import Callable, Optional

from harness import (bash, clean, client, config, env_file, errors, files, model_call,
                     step_limit, terminal, writer)
from harness.errors import EndpointError, NoKey, SetupError, reason
from harness.run import Run
from harness.sdk import anthropic
from harness.session import log as session_log
from harness.session import repair
from harness.tool_calls import ToolsInterrupted

try:
    import readline     # line editing and history for input(), where the platform has it
except ImportError:     # Windows without pyreadline: input() still works, without editing
    readline = None

STEPS_RAN_OUT = 3     # a one-shot run's exit status when the turn's budget ran out (README)
HISTORY = config.TRANSCRIPTS / "repl_history"   # the REPL's earlier prompts (up and down)
HISTORY_LINES = 1000  # prompts kept in it
HISTORY_BYTES = 4_000_000   # read of it at most: a thousand prompts of 4 kB
DEMO = Path("demo")   # where --demo runs: nothing it writes lands beside your own files
# Why a write to stdout fails, other than a reader gone: it ends the run in one line.
OUTPUT_LOST = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}
REQUIREMENTS = Path(__file__).resolve().parent.parent / "requirements.txt"
REPL_HELP = ('A line """ starts a prompt of several lines, and the next """ ends it. Ctrl-C '
             "clears the line; up and down recall earlier prompts. docs/real-use.md says what "
             "each command does.")


@dataclasses.dataclass(frozen=True)
class Lesson:
    """What a lesson hands run_cli. doc: its docstring, for --help; system and tools: what its
    requests send, for /context. loop(messages, run, max_steps=...) -> the final text.
    commands: {"/x": fn(messages, run, arg)}, arg the rest of the line (run.client is None
    without a key); /context, /cost and /clear are added. demo_args: given to the lesson's demo
    in harness/demos.py (s03_demo for s03_todo). on_start(run, args) runs after .env is read
    and may return a word for the REPL banner; before_prompt() runs before each REPL prompt.
    options: [(flags, add_argument kwargs)]; help_extra ends --help; repl_help is a line /help
    adds. context_view(messages, run) is what /context measures (s06: layer 1's view), and
    context_size the lesson's measure of it.
    """
    name: str
    doc: str
    loop: Callable
    system: str = ""
    tools: list = dataclasses.field(default_factory=list)
    commands: dict = dataclasses.field(default_factory=dict)
    demo_args: tuple = ()
    on_start: Optional[Callable] = None
    before_prompt: Optional[Callable] = None
    options: tuple = ()
    help_extra: str = ""
    repl_help: str = ""
    context_view: Optional[Callable] = None
    context_size: object = None


def _what_the_demo_ignores(parser, args) -> None:
    """Refused: the demo plays its own prompt, afresh, to its end, as agent "demo"."""
    if args.prompt is not None:
        parser.error("--demo plays its own scripted prompt; leave out the prompt (or drop --demo)")
    if args.continue_:
        parser.error("--demo always starts afresh; drop --continue")
    if args.max_steps:
        parser.error("--demo plays its script to its end; drop --max-steps")
    if getattr(args, "name", None):
        parser.error("--demo's agent is always demo, on its own board; drop --name")


def run_cli(lesson: Lesson, argv: list = None) -> int:
    """`sNN.py "prompt"` runs one turn; `sNN.py` opens a REPL; `--demo` plays a script."""
    _closed_streams_to_devnull()
    context = functools.partial(_context, lesson)
    commands = {**lesson.commands, "/context": context, "/cost": _cost,
                "/clear": functools.partial(clear, lesson)}
    lesson = dataclasses.replace(lesson, commands=commands)
    parser = _parser(lesson)
    args, unknown = parser.parse_known_args(argv)  # before the SDK loads: --help is instant
    if unknown:
        # The words typed: the hint repeats them, the prompt's quoted.
        typed = sys.argv[1:] if argv is None else list(argv)
        parser.error(_unrecognized(unknown, parser) + _quote_hint(unknown, parser, args, typed))
    if args.prompt is not None and not args.prompt.strip():
        parser.error("the prompt is empty; give a prompt, or none for the REPL")
    if args.demo:
        _what_the_demo_ignores(parser, args)
    if anthropic is None:
        terminal.show_error(_missing_sdk())
        return 1
    _tolerate_narrow_terminals()
    try:
        # SIGTERM and SIGHUP end the run as q does, so that end_of_run writes its page and
        # total (made from memory: never afterwards).
        with bash.signals_raise() as armed:
            armed()
            code = _run(lesson, args)
        sys.stdout.flush()         # here, not at exit, so a reader that has gone is caught below
        return code
    except BrokenPipeError:
        return _reader_gone()
    except OSError as exc:
        if exc.errno not in OUTPUT_LOST:
            raise
        return _output_lost(exc)
    except KeyboardInterrupt:       # Ctrl-C after q, while the page is written (it is not)
        terminal.show_error("interrupted")
        return 130


def _output_lost(exc: OSError) -> int:
    """stdout on a full disk (`> /dev/full`) or a failed device: one line, on stderr if it can
    still take it; stdout to /dev/null, as for a reader that has gone; exit 1."""
    with contextlib.suppress(OSError):
        terminal.show_error(f"the output could not be written: {reason(exc)}")
    return _reader_gone()


def _closed_streams_to_devnull() -> None:
    """stdout or stderr closed (`>&-`), which Python leaves None: write there to /dev/null;
    stdin closed (`<&-`): read from it, which is the end of input at once."""
    for name, mode in (("stdout", "w"), ("stderr", "w"), ("stdin", "r")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode, encoding="utf-8"))


def _parser(lesson: Lesson):
    repl_help = f" In the REPL: {', '.join(['/help', *lesson.commands])}."
    epilog = ("Set ANTHROPIC_API_KEY (or put it in ./.env); ANTHROPIC_BASE_URL, MODEL_ID and "
              f"API_TIMEOUT are optional.{repl_help}")
    if lesson.help_extra:
        epilog += f"\n\n{lesson.help_extra}"
    # argparse fits its own parts to the terminal (its width less 2); the epilog is ours.
    epilog = terminal.fit(epilog, terminal.width(sys.stdout) - 2)
    parser = argparse.ArgumentParser(prog=f"python {lesson.name}.py",
                                     description=lesson.doc.strip().splitlines()[0],
                                     epilog=epilog,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prompt", nargs="?", help="none: open a REPL (q or exit to quit); "
                                                  "a prompt: run one turn with it and exit")
    parser.add_argument("--demo", action="store_true",
                        help="play a scripted session through the real loop and tools; no "
                             "key, no network; it writes only under demo/")
    parser.add_argument("--continue", dest="continue_", action="store_true",
                        help="resume the latest session saved in .transcripts/ here (with a "
                             "prompt: one more turn; without: the REPL)")
    parser.add_argument("--max-steps", type=_steps, metavar="N",
                        help="model calls a turn may make before it stops (default: "
                             "MAX_STEPS, else the lesson's own)")
    for flags, kwargs in lesson.options:
        parser.add_argument(*flags, **kwargs)
    return parser


def _unrecognized(unknown: list, parser) -> str:
    """argparse's message, and "did you mean --demo?" for a flag close to one it has (argparse
    suggests only from 3.14; parse_known_args leaves it to us on every version)."""
    known = list(parser._option_string_actions)    # argparse's table of flags (no public one)
    hints = []
    for word in unknown:
        flag = word.split("=")[0]
        if flag.startswith("-"):
            hints.append(errors.did_you_mean(flag, known))
    typed = terminal.printable(" ".join(unknown))     # an escape code typed: shown, not obeyed
    return f"unrecognized arguments: {typed}{''.join(hints)}"


def _quote_hint(unknown: list, parser, args, given: list) -> str:
    """For words after a prompt: the same command with the prompt quoted, or, for a REPL
    command (/task add x), where to type it. "" for a flag or --demo (refused for itself)."""
    if args.prompt is None or args.demo or any(word.startswith("-") for word in unknown):
        return ""
    if _is_command_word(args.prompt):
        return terminal.printable(f"; {args.prompt} is typed in the REPL: run {parser.prog}, "
                                  f"then type {' '.join([args.prompt, *unknown])}")
    # The words typed, the prompt's quoted as one: flags and their values kept as they were.
    rest = list(given)
    for word in [args.prompt, *unknown]:
        rest.remove(word)
    quoted = shlex.join([*rest, " ".join([args.prompt, *unknown])])
    return terminal.printable(f"; a prompt of several words goes in quotes: {parser.prog} "
                              f"{quoted}")


def _missing_sdk() -> str:
    """The line to paste: this Python, and requirements.txt from the folder the user is in."""
    try:
        requirements = os.path.relpath(REQUIREMENTS)
    except ValueError:                # another drive (Windows): the whole path
        requirements = str(REQUIREMENTS)
    python = shlex.quote(sys.executable)
    return (f"the anthropic package is not installed for this Python: run {python} -m pip "
            f"install -r {shlex.quote(requirements)}")


def _run(lesson: Lesson, args) -> int:
    run = Run(lesson=lesson.name)       # before on_start: s07 registers its board on it
    try:
        run.secrets = env_file.load_env()
        run.model = config.model_id()
        config.check_numbers(run.model)     # a bad number: one line, before anything runs
        budget = _budget(args)          # before any file is written: a bad value is one line
        banner = lesson.on_start(run, args) if lesson.on_start else None
        if args.demo:
            return _run_demo(lesson, run)
        run.client = _client_or_none(args, run.secrets)
        # The history: [] or the resumed one; after the API compacted, from its summary, which
        # is what layer 2 and /context measure.
        run.log, history = session_log.open_session(args.continue_, resume_from=run.resumed,
                                                    about=run.about())
        if args.prompt is not None:
            prompt = _clean_prompt(args.prompt)
            return _one_shot(lesson, run, history, budget, prompt, _go_on(lesson, args))
    except (SetupError, EndpointError) as exc:
        terminal.show_error(str(exc))
        return 1
    except KeyboardInterrupt:
        terminal.show_error("interrupted")
        return 130
    try:
        return _repl(lesson, run, budget, banner, history)
    finally:
        end_of_run(run)


def _budget(args) -> dict:
    """The loop's max_steps: --max-steps, else MAX_STEPS, else the lesson's own default."""
    steps = args.max_steps or config.positive_int("MAX_STEPS", 0, "model calls")
    return {"max_steps": steps} if steps else {}


def _client_or_none(args, secrets: dict):
    """The client; without a key, None for the REPL (its commands need no model)."""
    try:
        return client.make_client(secrets=secrets)
    except NoKey:
        if args.prompt is not None:
            raise SetupError(env_file.no_key_message()) from None
        terminal.show_note(f"[{env_file.no_key_message()}; the REPL's commands work without one, "
                           "but /compact]")
        return None


def _go_on(lesson: Lesson, args) -> str:
    """The command that goes on from a one-shot run: --continue "go on", with the board, the
    agent and the context management it ran with (as parsed, however typed), a password in
    the board's address shown as ***, and said to be (pasted as it is, it was refused)."""
    words, hidden = [f"{lesson.name}.py"], ""
    if getattr(args, "board", None) is not None:
        from harness import board
        shown = board.shown(args.board)
        words += ["--board", shown]
        if shown != args.board:
            hidden = " (with the board's password where it shows ***)"
    for flag, value in (("--name", getattr(args, "name", None)),
                        ("--api-context", getattr(args, "api_context", None))):
        if value:
            words += [flag, value]
    return f'python {shlex.join(words)} --continue "go on"{hidden}'


def _one_shot(lesson: Lesson, run: Run, history, budget, prompt, go_on: str) -> int:
    """One turn; 0 when it finished, STEPS_RAN_OUT when its budget ran out (says how to go on:
    the command go_on), 1 when the API refused it (the work is not done either)."""
    saved = len(history)
    status = 0
    message = {"role": "user", "content": prompt}
    history.append(message)
    try:
        try:
            answer = _turn(lesson, run, history, budget)
        except (EndpointError, SetupError, ValueError):
            # As _keep_completed, without its note: the error is the one line. A turn that
            # ran no tool is undone: --continue does not send it again.
            repair.keep_completed(history, saved, message, None, list(run.log.ran.values()))
            raise
        except TurnRefused as refused:
            answer = str(refused)
            status = 1
            _keep_completed(run, history, saved, message, "turn refused")
        if isinstance(answer, step_limit.StepLimit):    # a one-shot run cannot be told 'continue'
            answer = step_limit.StepLimit(answer.split(";")[0] + "]")
        terminal.print_answer(answer, run.screen)
    finally:
        run.log.record(history)
        end_of_run(run)
    if isinstance(answer, step_limit.StepLimit):
        terminal.show_note(f"[to go on: {go_on}, or raise --max-steps]")
        return STEPS_RAN_OUT
    return status


class TurnRefused(Exception):
    """The API refused the turn's last reply (model_call.Refused); its text is the answer."""


def _turn(lesson: Lesson, run: Run, history: list, budget: dict) -> str:
    """One turn of the lesson's loop; what it must still tell the model (run.carried: s07's
    board after the API's summary ended the turn) follows in a message of its own."""
    # The prompt on disk before the first call: a kill during it leaves it for --continue.
    run.log.record(history)
    answer = lesson.loop(history, run, **budget)
    if isinstance(answer, model_call.Refused):
        # The API refuses again while the refused reply is in the conversation: it goes, and
        # the rest of the turn is kept or undone as a failed turn's (_keep_completed).
        if history and history[-1]["role"] == "assistant":
            history.pop()
        raise TurnRefused(answer)
    if run.carried:
        history.append({"role": "user", "content": run.carried})
        run.carried = []
    return answer


def _steps(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a positive whole number of model calls, got {text!r}")
    return int(text)


def _reader_gone() -> int:
    """stdout's reader left (`| head -1`): stdout to /dev/null, as the Python docs say; exit 1."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):   # stdout is not a file (a test's capture): nothing to flush
        pass
    return 1


# ---------------------------------------------------------------- the REPL

def _repl(lesson: Lesson, run: Run, budget, banner, history):
    commands = lesson.commands
    label = lesson.name.split("_")[0]
    names = ["q/exit", "/help", *commands]
    _tolerate_stray_bytes()
    _start_history()
    about = f" ({banner})" if banner else ""
    terminal.show(f"{lesson.name}{about}: type a prompt ({', '.join(names)})", wrap=True)
    while True:
        if lesson.before_prompt:
            _run_command(lambda *_: lesson.before_prompt(), "(board news)", history, run, "")
        try:
            prompt = terminal.colour("36", f"{label} >> ", sys.stdout, _readline_marks())
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
            _run_command(commands[word.lower()], word.lower(), history, run, arg.strip())
        # Answered here: a typo (/taks, or a lone /) must not cost a model call.
        elif _is_command_word(word) or not query.strip().strip("/"):
            _unknown_command(word, lesson)
        elif run.client is None:
            terminal.show_error(env_file.no_key_message())
        else:
            _run_turn(lesson, run, history, budget, query)
        run.log.record(history)          # saved as it goes: --continue picks it up


def _context(lesson: Lesson, messages: list, run, arg: str) -> None:
    """/context: what the next request would send, part by part (session/views.py)."""
    from harness.session import views
    view = lesson.context_view(messages, run) if lesson.context_view else messages
    views.print_context(run.recorder, lesson.system, lesson.tools, view, lesson.context_size, run)


def _cost(messages: list, run, arg: str) -> None:
    """/cost: this run's calls at its model's price (session/views.py, loaded when typed)."""
    from harness.session import views
    terminal.show_out(views.cost_report(run.recorder.data, config.price(run.model),
                                        views.in_charge(run)))


def clear(lesson: Lesson, messages: list, run, arg: str = "") -> None:
    """/clear: a fresh conversation. What the tools did (files, s07's board) stays."""
    # Words after it were meant for something else (a prompt?): nothing so final on a guess.
    if arg:
        raise ValueError("/clear takes no words after it; nothing was cleared")
    messages.clear()
    # Layer 2 (s06's ContextSize) measures the new conversation from nothing: after a failed
    # summary it waited for the old one to grow, and let a new one as big outgrow the window.
    size = lesson.context_size
    if size is not None:
        size.reported, size.seen, size.after_compaction = None, 0, 0
    terminal.show_note("[a fresh conversation: the model remembers nothing of the last one; "
                       "files and the task board (s07) are as they were]")


def _run_command(command, word, history, run, arg):
    try:
        command(history, run, arg)
    except (SetupError, ValueError) as exc:  # a command's refusal, or a setting to fix
        terminal.show_error(str(exc))
    except BrokenPipeError:                  # stdout's reader has gone: run_cli ends quietly
        raise
    except Exception as exc:                 # a bug or an odd file: one line, the talk stays
        terminal.show_error(f"/{word.lstrip('/')} failed: {type(exc).__name__}: {exc}")
    except KeyboardInterrupt:
        terminal.show_note("[command interrupted]")


def _run_turn(lesson: Lesson, run: Run, history, budget, query):
    """One prompt through the loop; a failed or abandoned turn keeps what was done in it."""
    saved = len(history)
    prompt = {"role": "user", "content": query}
    try:
        history.append(prompt)
        terminal.print_answer(_turn(lesson, run, history, budget), run.screen)
    except TurnRefused as refused:
        terminal.print_answer(str(refused), run.screen)
        _keep_completed(run, history, saved, prompt, "turn refused")
    except ToolsInterrupted as exc:
        _keep_completed(run, history, saved, prompt, "turn abandoned", exc.results)
    except KeyboardInterrupt:
        _keep_completed(run, history, saved, prompt, "turn abandoned")
    except (EndpointError, SetupError, ValueError) as exc:
        terminal.show_error(str(exc))
        _keep_completed(run, history, saved, prompt, "turn failed")
    except BrokenPipeError:                  # stdout's reader has gone: run_cli ends quietly
        raise
    except Exception as exc:                 # a bug, or an endpoint odder than any above
        terminal.show_error(f"the turn failed: {type(exc).__name__}: {exc}")
        _keep_completed(run, history, saved, prompt, "turn failed")
    finally:
        run.screen.release()                 # a usage line held for an answer that never came


def _keep_completed(run, history, saved, prompt, what, results=None):
    """After a failed turn, repair.keep_completed, and a note saying what was kept. results:
    ToolsInterrupted's; without them, calls are answered from what the run's log was given."""
    ran = list(run.log.ran.values())
    compacted, done = repair.keep_completed(history, saved, prompt, results, ran)
    calls = terminal.plural(done, "tool call")
    if compacted:
        terminal.show_note(f"[{what} after a compaction; the conversation goes on from its "
                           f"summary ({calls} since it kept)]")
    elif not done:
        terminal.show_note(f"[{what}; the conversation is as it was before it]")
    else:
        terminal.show_note(f"[{what} after {calls}: they are kept in the conversation, so the "
                           "model knows what was done]")


def _readline_marks() -> tuple:
    """What tells readline a prompt's bytes take no columns, when input() will use it (both
    ends a terminal); else nothing, since input() would print the marks."""
    if readline is None or not (sys.stdin.isatty() and sys.stdout.isatty()):
        return ("", "")
    return ("\001", "\002")


def _read_prompt(prompt):
    """One prompt: a line, a block between two \"\"\" lines, or a whole paste on a terminal."""
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
    """Earlier prompts for the up and down keys (on a terminal, not on Windows): a regular
    file only; a line holding a control character is left out."""
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
    """stdin with surrogateescape: a stray byte becomes a surrogate that _clean_prompt mends."""
    if isinstance(sys.stdin, io.TextIOWrapper) and sys.stdin.errors == "strict":
        sys.stdin.reconfigure(errors="surrogateescape")


def _tolerate_narrow_terminals():
    """Print with errors='replace' where stdout cannot encode every character: a model's check
    mark shows as '?'. stderr already has 'backslashreplace'."""
    if isinstance(sys.stdout, io.TextIOWrapper) and sys.stdout.errors == "strict":
        sys.stdout.reconfigure(errors="replace")


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


def _unknown_command(word, lesson: Lesson):
    known = ["/help", *lesson.commands]
    if word.lower() == "/help":
        said = [f"commands: {', '.join(known)}; q or exit quits; anything else is a prompt."]
        if lesson.repl_help:
            said.append(lesson.repl_help)
        said.append(REPL_HELP)
        terminal.show_out("\n".join(said))
        return
    hint = errors.did_you_mean(word.lower(), known)
    terminal.show_error(f"unknown command {word}{hint} (commands: {', '.join(known)}); nothing "
                        "was sent to the model")


# ---------------------------------------------------------------- the end of a run, the demo

def end_of_run(run: Run) -> None:
    """The run closed (its log, its pins), then its total and its page (session/page.py)."""
    run.screen.release()            # a usage line held for an answer that never came
    run.close()
    # A terminal window closed (SIGHUP) fails every later write (EIO): the page is made even so.
    with contextlib.suppress(OSError):
        terminal.show_session(run.recorder.data)
    # The page is loaded only here, at the end of a run that made a call.
    if run.recorder.data.totals["calls"]:
        from harness.session import page
        with contextlib.suppress(OSError):      # the line naming it, to a closed terminal
            page.end_of_run(run.recorder, screen=run.screen)


def _run_demo(lesson: Lesson, run: Run):
    """The lesson's script through its real loop, in demo/, where all that it writes goes."""
    home = Path.cwd()
    try:
        with writer.folder(DEMO) as folder:   # a real folder: a link would take its files away
            os.fchdir(folder)
    except OSError as exc:
        raise SetupError(f"--demo cannot run in {DEMO}/: {reason(exc)}") from None
    run.screen.seen_from = home              # its paths are shown as demo/…, from your folder
    try:
        terminal.show_note(f"[demo] it runs in {DEMO}/: everything it writes goes there")
        # Loaded only for --demo: the scripts, and the loopback API they are played on.
        from harness import demos
        with demos.played(lesson.name, lesson.demo_args, run) as (api, prompt):
            where = api.url.removeprefix("http://")
            terminal.show_note(f"[demo] a SCRIPTED stand-in model answers, on {where}: no "
                               "key, no network")
            terminal.show_note("[demo] the loop, the tools and the files they write are real.")
            terminal.show(f">> {prompt}", "36", sys.stdout, wrap=True)
            run.client = client.make_client(base_url=api.url, api_key="demo-no-key")
            messages = [{"role": "user", "content": prompt}]
            terminal.print_answer(_turn(lesson, run, messages, {}), run.screen)
    finally:
        end_of_run(run)                      # in demo/, where its .transcripts/ are
        os.chdir(home)
    if api.violations:
        terminal.show_error(f"the demo sent an invalid request: {api.violations[0]}")
        return 1
    return 0
