"""Helpers shared by the tests: plain functions and classes, used by two files or more (the
fixtures are in conftest.py; a helper only one file needs stays in that file).

- running a lesson: its environment, the tool_results of a request, one tool call as the loop
  runs it, a child that takes Ctrl-C;
- processes and time: a call with a deadline, a fork with no other thread running, processes
  released together at a barrier, a command's process group, an endpoint whose reply never
  comes (Pinging);
- files: a full disk, a crash at a chosen byte of a write;
- a pseudo-terminal, read as a user's terminal window shows it;
- histories as the loop builds them, and the stand-in's verdict on them;
- output read as words, however the terminal's width wrapped it;
- boards: the PostgreSQL helpers, and a person's hand edits, on either store;
- the session page, on synthetic sessions;
- the README's quoted commands, run as a terminal shows them;
- the tests a table of the docs names, looked up without importing their files.
"""

import errno
import faulthandler
import fcntl
import json
import multiprocessing
import os
import pty
import re
import secrets
import select
import shlex
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from unittest import mock
from urllib.parse import urlsplit, urlunsplit

import pytest

import pg_server
import s03_todo
from harness import model_call
from harness.compaction import SUMMARY_OPENING
from harness.run import Run
from harness.session import repair
from harness.session.recorder import Recorder
from harness.stand_in import StandInAPI
from harness.stand_in.rules import check_request
from harness.stand_in.script import reply, text, tool
from readme_blocks import checked_block, runs, terminal_view

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


# ---------------------------------------------------------------- running a lesson

def lesson_command(lesson: str, *args, python=(), root: Path = ROOT) -> list:
    """`python s03_todo.py args`, as a user types it, with this Python; python: its own
    options (-X importtime), root: where the lessons are (a copy of them, elsewhere). The
    run_lesson fixture runs it; a test that must signal or type to the process starts it."""
    return [sys.executable, *python, str(root / f"{lesson}.py"), *args]


def clean_env(home, **extra):
    """The environment of a user with no key and nothing configured, plus `extra`. No
    COLUMNS: the output is a pipe, and laid out for 80 columns, as the docs quote it."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANTHROPIC_", "CLAUDE_"))
           and k not in ("MODEL_ID", "COMPACT_THRESHOLD", "NO_COLOR", "COLUMNS", "LINES")}
    # ENV_FILE: settings from ./.env only, never from a key a learner put in the repository's.
    env.update(HOME=str(home), PYTHONIOENCODING="utf-8", PYTHONPATH=str(ROOT), ENV_FILE=".env")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def tool_results(request, index=-1):
    """The tool_result blocks of one message of a recorded request."""
    content = request["messages"][index]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def call_tool(name, args, tools, handlers):
    """One tool call as the loop runs it: (the tool_result's content, is_error).

    s03's run_tool_calls runs it as every lesson's loop does: the input checked against the
    tool's schema, the dispatch, the cap (the whole result saved), the text mended, the result
    block made. A fresh Run, as a new process has; closed after (its pins let go)."""
    call = {"type": "tool_use", "id": "toolu_test", "name": name, "input": args}
    response = model_call.Response([call], "tool_use", tool_uses=[call])
    run = Run()
    try:
        (block,) = s03_todo.run_tool_calls(run, response, handlers, tools)
    finally:
        run.close()
    return block["content"], block.get("is_error", False)


def popen_taking_ctrl_c(*args, **kwargs) -> subprocess.Popen:
    """subprocess.Popen, with a child that takes Ctrl-C (SIGINT) as from a terminal, even when
    this suite was started with SIGINT ignored (`pytest &` in a shell without job control): an
    ignored signal stays ignored through exec, and the child would never see the test's Ctrl-C;
    a handled one is reset to the default there."""
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(*args, **kwargs)
    finally:
        if saved is not None:
            signal.signal(signal.SIGINT, saved)


def batch_of_three(running: int) -> dict:
    """A reply of three bash calls, each writing a file (one.txt, two.txt, three.txt); call
    number `running` (0, 1 or 2) instead writes its shell's pid to running.pid and sleeps: the
    call that is running when the test stops the lesson."""
    commands = [f"echo {n} > {n}.txt; echo wrote {n}" for n in ("one", "two", "three")]
    commands[running] = "echo $$ > running.pid; sleep 600"
    return reply(*[tool("bash", {"command": command}) for command in commands])


def running_command(workdir: Path, proc: subprocess.Popen, seconds: float = 60) -> int:
    """The process group of the sleeping command of batch_of_three, once it runs."""
    pid_file = workdir / "running.pid"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if pid_file.exists() and pid_file.read_text().endswith("\n"):
            return int(pid_file.read_text())
        time.sleep(0.05)
    pytest.fail(f"the lesson never ran the sleeping call (exit code {proc.poll()})")


# ---------------------------------------------------------------- processes and time

def within(seconds: float, fn, unblock=None):
    """fn() in a thread: its value, or a failure if it is still running after `seconds`."""
    box = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # raised again below, in the test's own thread
            box["error"] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if unblock:
            unblock()
        pytest.fail(f"still running after {seconds} s: it hangs")
    if "error" in box:
        raise box["error"]
    return box["value"]


# The last resort against a hang (conftest.py): faulthandler's watchdog, which runs in a thread
# of its own while a test runs. {"seconds", "file", "since"} while it is armed.
WATCHDOG = {}


def arm_watchdog(seconds: float, file: int) -> None:
    """In `seconds`, faulthandler dumps every thread's stack to `file` and ends the process."""
    WATCHDOG.update(seconds=seconds, file=file, since=time.monotonic())
    faulthandler.dump_traceback_later(seconds, exit=True, file=file)


def disarm_watchdog() -> None:
    faulthandler.cancel_dump_traceback_later()
    WATCHDOG.clear()


@contextmanager
def forking():
    """Fork (a process, a pool's workers) with no other thread running: wrap the fork alone.
    A forked child holds only the thread that forked, and any lock another thread held stays
    held there for good: Python 3.12 warns of it (\"is multi-threaded, use of fork() may lead
    to deadlocks\"). The one thread the suite keeps is the watchdog's: it stops for the fork,
    then is armed again for the time its test phase had left, if that phase still runs. (The
    SIGALRM bound, which needs no thread, stays.) Under pytest-xdist, its worker's own thread
    (execnet's, which Python's count misses) stays too: it was there before any test ran."""
    armed = dict(WATCHDOG)
    faulthandler.cancel_dump_traceback_later()
    # Its thread ends a moment after it is told to, and a fork before that still forks a
    # process of two threads: wait for the count (Linux keeps it in /proc) to drop.
    deadline = time.monotonic() + 2
    while _os_threads() > threading.active_count() + FOREIGN_THREADS \
            and time.monotonic() < deadline:
        time.sleep(0.005)
    try:
        yield
    finally:
        # Not after its phase ended (or was armed anew): that would end a later test.
        if armed and WATCHDOG.get("since") == armed["since"]:
            left = armed["seconds"] - (time.monotonic() - armed["since"])
            faulthandler.dump_traceback_later(max(left, 1), exit=True, file=armed["file"])


# Threads of this process that Python does not count and the suite did not start: execnet's
# in a pytest-xdist worker. Set once, before the first test (conftest.py's pytest_configure).
FOREIGN_THREADS = 0


def note_foreign_threads() -> None:
    global FOREIGN_THREADS
    FOREIGN_THREADS = max(_os_threads() - threading.active_count(), 0)


def _os_threads() -> int:
    """The threads of this process, Python's and others (faulthandler's): 1 where unknown."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


@contextmanager
def refusing_port():
    """A loopback port that refuses every connection, for as long as the block runs: bound, never
    listening. (Bound and closed at once, another test's server, in this pytest worker or
    another, could take it before the connection is tried.)"""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


FORK = multiprocessing.get_context("fork")


@contextmanager
def forks_alone():
    """While open, the fork context's pools and processes each fork inside forking(), and only
    the fork: for code that forks by itself (the benchmarks), whose runs the watchdog still
    bounds. (get_context("fork") is one object: a bench's own call gets this one.)"""
    pool, process = FORK.Pool, FORK.Process

    def quiet_pool(*args, **kwargs):
        with forking():
            return pool(*args, **kwargs)

    class QuietProcess(process):
        def start(self):
            with forking():
                super().start()
    with mock.patch.object(FORK, "Pool", quiet_pool), \
            mock.patch.object(FORK, "Process", QuietProcess):
        yield


def _report(work, wait, args, index, results) -> None:
    """In a forked process: work's value, or the error it raised, as a line."""
    try:
        results.put((index, work(wait, *args)))
    except BaseException as exc:  # noqa: BLE001 - the test reports whatever failed
        results.put((index, f"failed: {type(exc).__name__}: {exc}"))


def at_once(work, *arguments, seconds: float = 60) -> list:
    """work(wait, *args) in one forked process for each args tuple, all started together.
    Each calls wait() where it must race the others: a barrier, which releases them all at
    once when the last one comes. The values they return, in the order of `arguments` (one
    that raised gives "failed: ..." instead)."""
    barrier, results = FORK.Barrier(len(arguments)), FORK.Queue()
    procs = [FORK.Process(target=_report, args=(work, barrier.wait, args, n, results))
             for n, args in enumerate(arguments)]
    with forking():
        for proc in procs:
            proc.start()
    try:
        values = dict(results.get(timeout=seconds) for _ in procs)
    finally:
        for proc in procs:
            proc.join(seconds)
            if proc.is_alive():
                proc.kill()
    return [values[n] for n in range(len(arguments))]


def _gone(probe, seconds: float) -> bool:
    """Whether probe() raises ProcessLookupError within `seconds` (a killed process takes a
    moment to be reaped)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            probe()
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def group_ends(group: int, seconds: float = 60) -> bool:
    """Whether no process of the group is left running within `seconds`. A killed child whose
    shell died first is a zombie until init reaps it (here, a second or more later; longer on
    a busy machine): it runs no more, so it counts as ended."""
    def probe():
        os.killpg(group, 0)                 # ProcessLookupError: none left at all
        if _only_zombies(group):
            raise ProcessLookupError
    return _gone(probe, seconds)


def _only_zombies(group: int) -> bool:
    """Whether every process of the group is a zombie (Linux's /proc; elsewhere: unknown)."""
    states = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _fields(stat)
        if fields and int(fields[2]) == group:      # after the name: state, ppid, pgrp
            states.append(fields[0])
    return bool(states) and all(state == "Z" for state in states)


def _fields(stat: Path) -> list:
    """The fields of a /proc/PID/stat after the command's name; [] if it is gone, or there is
    no /proc (not Linux)."""
    try:
        return stat.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []                           # gone as we looked


def _state(stat: Path) -> str:
    """A process's state letter (Z: a zombie), from its /proc/PID/stat; "" if unknown."""
    fields = _fields(stat)
    return fields[0] if fields else ""


def process_ends(pid: int, seconds: float = 60) -> bool:
    """Whether the process runs no more within `seconds`: gone, or a zombie, as group_ends
    counts it (a killed child whose shell died first waits a second or more for init)."""
    def probe():
        os.kill(pid, 0)                     # ProcessLookupError: gone
        if _state(Path(f"/proc/{pid}/stat")) == "Z":
            raise ProcessLookupError
    return _gone(probe, seconds)


def end_group(group: int) -> None:
    """Kill a command's process group that its lesson (killed with -9) left running."""
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass


def command_ended(group: int) -> None:
    """Fail if the command's process group outlived the harness (and end it, so that no
    `sleep 600` is left behind by a failing test)."""
    if not group_ends(group):
        end_group(group)
        pytest.fail("the command outlived the harness")


class Pinging:
    """A loopback endpoint that answers message_start (5,000 input tokens), then an event every
    0.2 s, forever: a ping, or another that carries nothing of the reply (a gateway's
    keep-alive of its own). requests: the bodies it was sent."""

    # 5,000 input tokens: more than the tool definitions, so no dropped-tools warning.
    START = {"type": "message_start",
             "message": {"id": "msg_cut", "type": "message", "role": "assistant", "model": "m",
                         "content": [], "stop_reason": None, "stop_sequence": None,
                         "usage": {"input_tokens": 5000, "output_tokens": 1}}}

    def __init__(self, event: dict):
        self.event = event
        self.requests = []

    def __enter__(self):
        import http.server

        def sse(event):
            return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                requests.append(json.loads(body))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                try:
                    self.wfile.write(sse(Pinging.START))
                    while not stopping.is_set():
                        self.wfile.write(sse(event))
                        self.wfile.flush()
                        stopping.wait(0.2)
                except OSError:            # the client gave up: what the test wants
                    pass

        stopping = threading.Event()
        event, requests = self.event, self.requests
        self.stopping = stopping
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # shutdown() waits for the serve loop's next poll: half a second by default.
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


# ---------------------------------------------------------------- files

VICTIM = "the user's file, outside the workspace\n"   # what a planted link points to


class FullDisk:
    """A file that stores half of what write() or writelines() is given, then fails as a full
    disk does (ENOSPC): what a write in place leaves behind when the disk fills."""

    def __init__(self, f) -> None:
        self._f = f

    def write(self, data) -> int:
        self._f.write(data[:len(data) // 2])
        self._f.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def writelines(self, lines) -> None:
        lines = list(lines)
        self._f.writelines(lines[:len(lines) // 2])
        self._f.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._f.close()


# The kernel ends the child the moment it writes byte `limit` of any file (RLIMIT_FSIZE, and
# SIGXFSZ set back to its default action, which Python ignores): a crash inside the write, at a
# chosen byte, whatever function the code writes with (open().write, Path.write_bytes, os.write).
# No finally block runs, as with kill -9. Nothing is guessed: every run dies at its byte.
CRASH_AT_BYTE = """
import resource, signal, sys
sys.dont_write_bytecode = True                 # a .pyc written mid-action would take the kill
sys.path.insert(0, {root!r})
{setup}
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
{action}
print("finished without reaching byte {limit}")
"""


def crash_at_byte(limit: int, setup: str, action: str, cwd: Path) -> None:
    """Run `action` in a child that dies writing byte `limit`; fail if it did not die so."""
    script = CRASH_AT_BYTE.format(root=str(ROOT), setup=setup, action=action, limit=limit)
    proc = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == -signal.SIGXFSZ, (limit, proc.returncode, proc.stdout, proc.stderr)
    sizes = [p.stat().st_size for p in cwd.rglob("*") if p.is_file()]
    assert limit in sizes, (f"no file of {limit} bytes: the child did not die inside a write of "
                            "this folder")


# A crash inside the final step. A temp file and then os.replace never writes into the target
# itself; a copy over it (shutil.copyfile) or a write in place does. Here an audit hook arms the
# byte limit the moment a file of the target's name is opened for writing, so the child dies at
# byte `limit` of the target, inside that final step; where nothing writes into the target, the
# child finishes. Either way the target must then hold the old version or the new, whole.
CRASH_IN_TARGET = """
import os, resource, signal, sys
sys.dont_write_bytecode = True
sys.path.insert(0, {root!r})
{setup}
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
HARD = resource.getrlimit(resource.RLIMIT_FSIZE)[1]

def arm(event, args):
    if event != "open" or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    writes = args[2] & (os.O_WRONLY | os.O_RDWR)
    if writes and os.path.basename(os.fsdecode(args[0])) == {target!r}:
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, HARD))

sys.addaudithook(arm)
{action}
"""


def crash_inside_target(target: str, limit: int, setup: str, action: str, cwd: Path) -> None:
    """Run `action` in a child that dies at byte `limit` of any write into a file named
    `target`, and finishes if nothing writes into it."""
    script = CRASH_IN_TARGET.format(root=str(ROOT), setup=setup, action=action, limit=limit,
                                    target=target)
    proc = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode in (0, -signal.SIGXFSZ), (limit, proc.returncode, proc.stderr)


# ---------------------------------------------------------------- a pseudo-terminal

class Pty:
    """The terminal side of a pseudo-terminal: what the program shows, and what is typed."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.unread = b""         # what came from the program and was not yet looked for

    def read_until(self, needle: bytes, seconds: float = 60) -> bytes:
        """Everything up to and including needle (all that came, if it never did within
        `seconds`); what came after it stays for the next call: a prompt that arrived in the
        same read as an answer must not be waited for again."""
        seen, end = self.unread, time.monotonic() + seconds
        while needle not in seen and time.monotonic() < end:
            if select.select([self.fd], [], [], 0.2)[0]:
                try:
                    seen += os.read(self.fd, 65536)
                except OSError:                 # the other side closed
                    break
        head, found, self.unread = seen.partition(needle)
        return head + found

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)


@contextmanager
def on_a_terminal(args: list, cwd: Path, env: dict, columns: int = 80):
    """A program run on a pseudo-terminal, as in a terminal window `columns` wide: (its
    process, the Pty). Killed at the end if it is still running."""
    terminal, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdin=child, stdout=child, stderr=child,
                            close_fds=True)
    os.close(child)
    try:
        yield proc, Pty(terminal)
    finally:
        proc.kill()
        proc.wait()
        os.close(terminal)


# ---------------------------------------------------------------- histories

def valid(messages):
    """None if the real API would accept this history, else the rule it breaks."""
    return check_request({"model": "m", "max_tokens": 1, "messages": messages},
                         context_window=10 ** 9)


def call(id, name="bash", **input):
    return {"type": "tool_use", "id": id, "name": name, "input": input or {"command": "ls"}}


def result(id, content="ok"):
    return {"type": "tool_result", "tool_use_id": id, "content": content}


def interrupted(id):
    """The result a call gets when it was running as the session (or the turn) stopped."""
    return {"type": "tool_result", "tool_use_id": id, "content": repair.STOPPED,
            "is_error": True}


def conversation(*calls, prompt="go", answer=None):
    """The one history builder: a conversation as the loop builds it. The prompt, then for each
    call (tool name, input[, result]) one assistant tool_use, id t0, t1, ..., and its
    tool_result (its content "result N" when left out); answer: a last reply in words."""
    messages = [{"role": "user", "content": prompt}]
    for n, (name, args, *content) in enumerate(calls):
        said = content[0] if content else f"result {n}"
        use = {"type": "tool_use", "id": f"t{n}", "name": name, "input": args}
        messages += [{"role": "assistant", "content": [use]},
                     {"role": "user", "content": [result(f"t{n}", said)]}]
    if answer is not None:
        messages.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
    return messages


def session(n_calls):
    """A finished turn: n bash calls, each with its output, then "Done."."""
    calls = [("bash", {"command": "ls"}, f"output {n}") for n in range(n_calls)]
    return conversation(*calls, prompt="fix the tests", answer="Done.")


# ---------------------------------------------------------------- output read as words

def words(output: str) -> str:
    """The text with every run of white space one space: a message wrapped to the terminal's
    width (terminal.fit), or a phrase wrapped in a page of docs, reads as one line."""
    return " ".join(output.split())


def widest(output: str, prompt: str = "") -> int:
    """The longest line of the output, a REPL's prompt (echoed before what a piped command
    prints, where a terminal would have ended the typed line) left out."""
    lines = [line.removeprefix(prompt) if prompt else line for line in output.splitlines()]
    return max(map(len, lines), default=0)


def messages(output: str) -> list:
    """The output's messages, each one line: a line, and the indented lines that continue it
    (terminal.fit wraps a long one to the width), joined back. "One line, no traceback" is
    one message here, however many rows of the terminal it takes."""
    found = []
    for line in output.splitlines():
        if line.startswith(" ") and found:
            found[-1] += " " + line.strip()
        else:
            found.append(line)
    return found


# ---------------------------------------------------------------- boards

BUSY_AFTER = 0.5      # seconds: LOCK_TIMEOUT of the busy board (conftest.busy): it fails fast


def on_postgres(board) -> bool:
    """Whether the board (as --board takes it) is a PostgreSQL URL, not a folder."""
    return str(board).startswith("postgresql://")


def psycopg_or_skip():
    """psycopg, or a skip (a failure with CI=true) saying why there is no server here."""
    why = pg_server.missing()
    if why:
        pg_server.skip_or_fail(why)
    import psycopg
    return psycopg


def in_schema(url, schema):
    """The same server and database, with the tables looked up (and made) in `schema` only."""
    parts = urlsplit(url)
    query = "&".join(filter(None, [parts.query, f"options=-csearch_path%3D{schema}"]))
    return urlunsplit(parts._replace(query=query))


def sql(url, statement, params=()):
    """One statement on its own connection, committed: its rows, if it returns any."""
    import psycopg
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else None


@contextmanager
def role_with_schema(pg_url, password):
    """A login role with this password, owning a schema of its own: (role, schema), both
    dropped afterwards."""
    psycopg = psycopg_or_skip()
    role, schema = f"agent_{secrets.token_hex(4)}", f"board_{secrets.token_hex(6)}"
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
            conn.execute(f"CREATE SCHEMA {schema} AUTHORIZATION {role}")
    except psycopg.Error as exc:
        pg_server.skip_or_fail(f"TEST_DATABASE_URL cannot create a role ({exc})")
    yield role, schema
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
        conn.execute(f"DROP ROLE {role}")


def gather(watcher, count, seconds=60.0):
    """The live board's lines until `count` have come, or `seconds` passed: a notification
    reaches a listener some time after the commit that sent it, and a loaded machine may hand
    several over in several reads."""
    lines, deadline = [], time.monotonic() + seconds
    while len(lines) < count and time.monotonic() < deadline:
        lines += watcher.changes(wait=0.1)
    return lines


def listing(tasks):
    """{id: (status, owner, blockedBy)} of every task, as a rechecking scan reads them."""
    board = tasks.store.scan(recheck=True)[0]
    return {t["id"]: (t["status"], t["owner"], t["blockedBy"]) for t in board.values()}


# A task's fields as a person edits them: the file's keys, the table's columns.
COLUMNS = {"subject": "subject", "description": "description", "status": "status",
           "owner": "owner", "blockedBy": "blocked_by"}


def edit_by_hand(board, task_id, **fields):
    """What a person does: change fields of a task in its file with an editor (no lock, no
    stamp), or its row in psql."""
    if on_postgres(board):
        for field, value in fields.items():
            sql(board, f"UPDATE tasks SET {COLUMNS[field]} = %s WHERE id = %s", (value, task_id))
        return
    path = Path(board) / f"task_{task_id}.json"
    task = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**task, **fields}, indent=2), encoding="utf-8")


def remove_by_hand(board, task_id):
    """What a person does: delete the task's file, or its row in psql."""
    if on_postgres(board):
        sql(board, "DELETE FROM tasks WHERE id = %s", (task_id,))
    else:
        os.remove(Path(board) / f"task_{task_id}.json")


# ---------------------------------------------------------------- the session page

HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>\x1b[31m\x00\u202e\ud800'


def usage(uncached=0, read=0, written=0, out=0):
    return SimpleNamespace(input_tokens=uncached, cache_read_input_tokens=read,
                           cache_creation_input_tokens=written, output_tokens=out)


def task(tid, subject, status="pending", blocked=(), owner=None):
    return {"id": tid, "subject": subject, "status": status, "blockedBy": list(blocked),
            "owner": owner}


BOARD = {1: {**task(1, "Design the data model", "completed", owner="demo"), "unblocked": [2, 3]},
         2: task(2, "Implement the API", "in_progress", owner="alice"),   # #1 was cleared from both
         3: task(3, "Write the docs"), 4: task(4, "Write the API tests", blocked=[2]),
         5: task(5, "Dropped idea", "deleted")}


SYSTEM = "You are a coding agent. Plan on the task board."
TOOLS = [{"name": "bash", "description": "Run a shell command.", "input_schema": {}},
         {"name": "task_list", "description": "The board.", "input_schema": {}}]
# As s07 writes it (board_message): the tag, the heading, the board.
BOARD_TEXT = ("<task-board>\nThe task board (.tasks/), just read:\n"
              "[>] #2: Implement the API (owner: alice)\n</task-board>")


def use(tid, name, **given):
    return {"type": "tool_use", "id": tid, "name": name, "input": given}


def sent_result(tid, content, error=False):
    """A tool_result as a request sent it, is_error spelt out (the page shows both)."""
    return {"type": "tool_result", "tool_use_id": tid, "content": content, "is_error": error}


def synthetic_record(subject="Write the API tests", summary="Summary: planned four tasks.",
                     output="ok"):
    """Six calls, each with the request it sent: layer 1 clears before call 3 (its request
    holds the placeholder), call 4 is a summary that compacts, call 5 starts from the summary
    with s07's board after it; the board is read at the compaction and at the end."""
    rec = Recorder("s07_task_system")
    board = {**BOARD, 4: {**BOARD[4], "subject": subject}}
    rec.watch_board(lambda: (board, []))
    rec.threshold(9_000)
    ask = {"role": "user", "content": "plan the project"}
    seq = [{"role": "assistant", "content": [use("t1", "bash", command="seq 1 5000")]},
           {"role": "user", "content": [sent_result("t1", "1 2 3 " * 900)]}]
    rec.call(usage(uncached=1_000, out=50), sent=[ask], system=SYSTEM, tools=TOOLS)
    rec.tool("bash", {"command": "seq 1 5000"}, "1 2 3 " * 900, False)
    rec.call(usage(read=1_000, written=6_000, out=40), sent=[ask, *seq], system=SYSTEM, tools=TOOLS)
    rec.tool("read_file", {"path": "missing.txt"}, "ValueError: missing.txt: no such file", True)
    rec.cleared(2, 6_500)
    cleared = {"role": "user", "content": [sent_result("t1", "[Previous: used bash]")]}
    read = [{"role": "assistant", "content": [use("t2", "read_file", path="missing.txt")]},
            {"role": "user", "content": [sent_result("t2", "ValueError: missing.txt: no such "
                                                           "file", True)]}]
    history = [ask, seq[0], cleared, *read]
    rec.call(usage(uncached=2_600, out=30), sent=history, system=SYSTEM, tools=TOOLS)
    rec.call(usage(read=2_500, written=200, out=300), "summary call",
             sent=[*history, {"role": "user", "content": "Summarize the conversation."}],
             system=SYSTEM)
    rec.compacted(9_400, 350, summary, ".transcripts/transcript_1.jsonl", counted=8_200)
    restart = {"role": "user", "content": f"{SUMMARY_OPENING} The full transcript is in "
               f"t.jsonl.]\n\n{summary}\n\n{BOARD_TEXT}"}
    rec.call(usage(uncached=600, out=20), sent=[restart], system=SYSTEM, tools=TOOLS)
    rec.tool("task_list", {}, output, False)
    listed = [{"role": "assistant", "content": [use("t3", "task_list")]},
              {"role": "user", "content": [sent_result("t3", output)]}]
    rec.call(usage(read=500, written=150, out=10), sent=[restart, *listed], system=SYSTEM,
             tools=TOOLS)
    rec.finish()                                     # as end_of_run does: the board at the end
    return rec


class Elements(HTMLParser):
    """Every start tag with its attributes, and all text, as a browser's parser would see them."""

    def __init__(self, page):
        super().__init__(convert_charrefs=True)
        self.tags, self.text = [], []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)

    def having(self, tag, cls=None, **attrs):
        return [a for t, a in self.tags
                if t == tag and (cls is None or cls in a.get("class", "").split())
                and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]


# ---------------------------------------------------------------- the README's commands

README = (ROOT / "README.md").read_text(encoding="utf-8")
PROMPT = "s07 >> "          # what the s07 REPL prints before it reads a line
LESSON = re.compile(r"python (s0\d_\w+)\.py")


def command_of(line):
    """`A=1 python s07_task_system.py --demo` -> ("s07_task_system", ["--demo"], {"A": "1"})."""
    words = shlex.split(line)
    env = {}
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    found = LESSON.fullmatch(" ".join(words[:2]))
    assert found, f"the block runs {line!r}, which is not a lesson"
    return found[1], words[2:], env


def shown_by(command, cwd, script=(), summary=None, inputs=None, key="test-key", env=None):
    """Run a block's `$` command in cwd: (exit code, what a terminal shows)."""
    lesson, args, settings = command_of(command)
    with StandInAPI(script, summary=summary) as api:
        extra = {"ANTHROPIC_BASE_URL": api.url, "PYTHONUNBUFFERED": "1", **(env or {}),
                 **settings}
        if key:
            extra["ANTHROPIC_API_KEY"] = key
        typed = None if inputs is None else "".join(f"{line}\n" for line in inputs)
        proc = subprocess.run(lesson_command(lesson, *args), cwd=cwd,
                              env=clean_env(cwd.parent / "home", **extra), input=typed,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, encoding="utf-8", timeout=60)
    assert api.violations == [], api.violations
    return proc.returncode, terminal_view(proc.stdout, PROMPT, inputs or [])


# The README's walkthrough: the model's part, scripted.
WALK_MODEL = [reply(text("First, the board."), tool("task_list", {})),
              reply(text("#1 is ready; starting it."),
                    tool("task_update", {"task_id": 1, "status": "in_progress"})),
              reply(text("The data model is designed; marking #1 done."),
                    tool("task_update", {"task_id": 1, "status": "completed"})),
              reply(text("#1 is done, and #2 Implement the API can start now."))]
WALK_SUMMARY = "Summary: #1 is done; #2 Implement the API is next."
# The default agent name holds the host and the terminal, and the model reads it in every
# owner; one fixed name keeps the token counts the same on every machine.
NAME = {"AGENT_NAME": "alice"}


def plan_by_hand(cwd, key):
    """The walkthrough's first block, run as written: (its runs, what each showed)."""
    block = runs(checked_block(README, "walkthrough"), (PROMPT,))
    shown = []
    for run in block:
        code, out = shown_by(run.command, cwd, inputs=run.inputs, key=key, env=NAME)
        assert code == 0, out
        shown.append(out)
    return block, shown


# ---------------------------------------------------------------- tests named by other tests

def missing_test(test: str):
    """None if `file.py::test_name` names a test defined at the top of tests/file.py (one that
    pytest runs); else what is not there. A table that names the tests of another file checks
    them so, without importing that file."""
    name, _, function = test.partition("::")
    path = TESTS / name
    if not re.fullmatch(r"test_\w+\.py", name) or not path.is_file():
        return f"there is no test file {name}"
    if not re.search(rf"^def {re.escape(function)}\(", path.read_text(encoding="utf-8"), re.M):
        return f"there is no test {function} in {name}"
    return None
