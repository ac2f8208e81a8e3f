"""Shared fixtures: run a lesson as a user does, against the loopback stand-in."""

import errno
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import endpoints, layer1, spill  # noqa: E402
from harness.run import Run  # noqa: E402
from harness.stand_in import StandInAPI  # noqa: E402
from harness.stand_in.script import reply, tool  # noqa: E402


def clean_env(home, **extra):
    """The environment of a user with no key and nothing configured, plus `extra`. No
    COLUMNS: the output is a pipe, and laid out for 80 columns, as the docs quote it."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANTHROPIC_", "CLAUDE_"))
           and k not in ("MODEL_ID", "COMPACT_THRESHOLD", "NO_COLOR", "COLUMNS", "LINES")}
    env.update(HOME=str(home), PYTHONIOENCODING="utf-8", PYTHONPATH=str(ROOT))
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture(autouse=True)
def plain_width(monkeypatch):
    """Every test lays out its output for 80 columns, as a pipe is (terminal.width), whatever
    COLUMNS the shell that runs pytest exported; a test that wants another width sets it."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def workdir(tmp_path):
    """An empty folder to run a lesson in, and a separate clean HOME."""
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


@pytest.fixture
def run_lesson(workdir):
    """run_lesson("s03_todo", "prompt", script=[...]) -> (CompletedProcess, StandInAPI)."""
    def run(lesson, *args, script=(), summary=None, stdin=None, env=None, key="test-key",
            timeout=60):
        with StandInAPI(script, summary=summary) as api:
            extra = {"ANTHROPIC_BASE_URL": api.url, **(env or {})}
            if key:
                extra["ANTHROPIC_API_KEY"] = key
            proc = subprocess.run([sys.executable, str(ROOT / f"{lesson}.py"), *args], cwd=workdir,
                                  env=clean_env(workdir.parent / "home", **extra), input=stdin,
                                  capture_output=True, text=True, encoding="utf-8", timeout=timeout)
        return proc, api
    return run


@pytest.fixture
def run():
    """A fresh Run (harness/run.py) without a client: what a new process starts with, its
    record, log (no file) and saved results empty. Closed after the test (its pins let go)."""
    made = Run()
    yield made
    made.close()


@pytest.fixture
def fresh_layers(monkeypatch, tmp_path):
    """s06's layer state is the lesson's own, on two module objects: what layer 1 cleared
    (CLEARED) and what layer 2 measured (CONTEXT). The test gets new ones, as a new process
    does, and runs in its own tmp folder (whatever a layer saves lands there). Returns the
    function that makes them new again: run_main calls it before each run."""
    import s06_compact

    def renew() -> None:
        monkeypatch.setattr(s06_compact, "CLEARED", layer1.Cleared())
        monkeypatch.setattr(s06_compact, "CONTEXT", s06_compact.ContextSize())
    renew()
    monkeypatch.chdir(tmp_path)
    return renew


def tool_results(request, index=-1):
    """The tool_result blocks of one message of a recorded request."""
    content = request["messages"][index]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


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
    commands[running] = "echo $$ > running.pid; sleep 30"
    return reply(*[tool("bash", {"command": command}) for command in commands])


def running_command(workdir: Path, proc: subprocess.Popen, seconds: float = 20) -> int:
    """The process group of the sleeping command of batch_of_three, once it runs."""
    pid_file = workdir / "running.pid"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if pid_file.exists() and pid_file.read_text().endswith("\n"):
            return int(pid_file.read_text())
        time.sleep(0.05)
    pytest.fail(f"the lesson never ran the sleeping call (exit code {proc.poll()})")


def group_ends(group: int, seconds: float = 5) -> bool:
    """Whether no process of the group is left within `seconds` (a killed one takes a moment
    to be reaped)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def end_group(group: int) -> None:
    """Kill a command's process group that its lesson (killed with -9) left running."""
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture
def run_main(fresh_layers, workdir, monkeypatch, capsys):
    """In-process twin of run_lesson, for edge cases: calls lesson.main(argv) with the real client.

    Cheaper than a subprocess (the anthropic import is paid once), same code path; each run
    starts as a new process would (main() makes its own Run; s06's layers are made new).
    Returns (exit code, stdout, stderr, StandInAPI).
    """
    import io
    saved = dict(os.environ)
    monkeypatch.chdir(workdir)

    def run(lesson, *args, script=(), summary=None, stdin="", env=None, key="test-key"):
        fresh_layers()
        os.environ.clear()
        os.environ.update(clean_env(workdir.parent / "home"))
        with StandInAPI(script, summary=summary) as api:
            os.environ.update({"ANTHROPIC_BASE_URL": api.url, **(env or {})})
            if key:
                os.environ["ANTHROPIC_API_KEY"] = key
            monkeypatch.setattr("sys.stdin",
                                io.StringIO(stdin) if isinstance(stdin, str) else stdin)
            try:
                code = lesson.main(list(args))
            except SystemExit as exc:  # argparse's --help and usage errors
                code = exc.code
        out, err = capsys.readouterr()
        return code, out, err, api

    yield run
    os.environ.clear()
    os.environ.update(saved)


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


def call_tool(name, args, tools, handlers):
    """One tool call as the loop runs it: the input checked against the tool's schema (as
    endpoints.ask does), s03's dispatch, and the cap (the whole saved): (output, is_error)."""
    import s03_todo
    call = endpoints.make_call("toolu_test", name, args, tools)
    output, is_error = s03_todo.call_tool(call, handlers)
    return spill.keep_whole(output, s03_todo.OUTPUT_CAP, name, spill.SavedTexts()), is_error
