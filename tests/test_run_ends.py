"""How a run ends when it does not end normally: a closed terminal, a polite kill, a closed
stdout. Each still leaves what a normal end leaves: the session page and total, and no
traceback.

The lessons run as a user runs them, as a subprocess against the stand-in.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from harness.stand_in import StandInAPI
from harness.stand_in.script import reply, text, tool
from helpers import Pinging, lesson_command, ROOT, clean_env, command_ended, words


PROMPT = "s03 >> "


def printed_until_the_next_prompt(proc) -> str:
    """What the REPL printed up to its second prompt: the first prompt's answer is printed, and
    it waits for the next line (input() flushes the prompt, and the answer before it, to the
    pipe). Read from the pipe itself, so that communicate() gets all the rest. The suite's
    bound against hanging ends a REPL that never prompts again."""
    shown = b""
    while shown.decode("utf-8", "replace").count(PROMPT) < 2:
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:                       # the REPL ended: what it printed is all there is
            break
        shown += chunk
    return shown.decode("utf-8")


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_a_closed_terminal_or_a_kill_at_the_prompt_writes_the_page_and_the_total(workdir,
                                                                                  signum):
    """The page is made from the run's memory: a run ended by a signal after one answered
    prompt must write it, as q does, or it is lost for good."""
    with StandInAPI([reply(text("first answer"))]) as api:
        env = clean_env(workdir.parent / "home", ANTHROPIC_BASE_URL=api.url,
                        ANTHROPIC_API_KEY="test-key")
        proc = subprocess.Popen(lesson_command("s03_todo"), cwd=workdir, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        proc.stdin.write("hello\n")
        proc.stdin.flush()
        shown = printed_until_the_next_prompt(proc)     # the REPL waits at its prompt
        proc.send_signal(signum)
        rest, err = proc.communicate(timeout=60)
    out = shown + rest
    assert proc.returncode == 128 + signum, err
    assert "first answer" in out and "Traceback" not in err
    assert "[session: 1 call · " in err and "[session page: .transcripts/session_s03_" in err
    assert list((workdir / ".transcripts").glob("session_s03_*.html"))


# s03's REPL as a user runs it, with one more signal, a SIGTERM, just as the run ends.
SECOND_SIGNAL_AS_IT_ENDS = """
import os, runpy, signal, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
from harness import cli
real = cli.end_of_run
def end_of_run(run):
    os.kill(os.getpid(), signal.SIGTERM)
    real(run)
cli.end_of_run = end_of_run
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize("during", ["the prompt", "a command"])
def test_a_second_signal_as_the_run_ends_still_writes_the_page_and_the_total(workdir, during):
    """A closed terminal (SIGHUP) at the prompt or while a command runs, then a SIGTERM while
    the page is made (systemd sends both): the second raised in end_of_run, and the page and
    the total were lost."""
    script = [reply(text("first answer"))]
    if during == "a command":
        script = [reply(tool("bash", {"command": "echo $$ > shell.pid.tmp; "
                                                 "mv shell.pid.tmp shell.pid; sleep 600"}))]
    with StandInAPI(script) as api:
        env = clean_env(workdir.parent / "home", ANTHROPIC_BASE_URL=api.url,
                        ANTHROPIC_API_KEY="test-key")
        proc = subprocess.Popen([sys.executable, "-c", SECOND_SIGNAL_AS_IT_ENDS,
                                 str(ROOT / "s03_todo.py")], cwd=workdir, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        proc.stdin.write("hello\n")
        proc.stdin.flush()
        if during == "a command":
            while not (workdir / "shell.pid").exists() and proc.poll() is None:
                time.sleep(0.05)
        else:
            printed_until_the_next_prompt(proc)
        proc.send_signal(signal.SIGHUP)
        rest, err = proc.communicate(timeout=60)
    if during == "a command":
        command_ended(int((workdir / "shell.pid").read_text()))
    assert proc.returncode == 128 + signal.SIGHUP and "Traceback" not in err, err
    assert "[session: 1 call · " in err and "[session page: .transcripts/session_s03_" in err
    assert list((workdir / ".transcripts").glob("session_s03_*.html"))


@pytest.mark.slow
def test_a_kill_while_a_reply_comes_counts_what_the_api_read_in_the_total(workdir):
    """SIGTERM (or a closed terminal) while a reply streams: the API bills the input it read
    (message_start's 5,000 tokens), as for Ctrl-C; the total left it out."""
    with Pinging({"type": "ping"}) as endpoint:
        env = clean_env(workdir.parent / "home", ANTHROPIC_BASE_URL=endpoint.url,
                        ANTHROPIC_API_KEY="test-key")
        proc = subprocess.Popen(lesson_command("s03_todo", "hello"), cwd=workdir, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not endpoint.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)                                  # message_start has come
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err
    assert "[session: 1 call · 5,000 input tokens" in words(err), err


def test_a_kill_during_a_sessions_first_call_leaves_its_prompt_for_continue(run_main, workdir):
    """kill -9 while the first reply was awaited: the prompt was written only with the reply,
    so the log stayed empty, and --continue went on with the session before it, unsaid."""
    import s03_todo
    run_main(s03_todo, "refactor billing", script=[reply(text("Billing done."))])
    with Pinging({"type": "ping"}) as endpoint:
        env = clean_env(workdir.parent / "home", ANTHROPIC_BASE_URL=endpoint.url,
                        ANTHROPIC_API_KEY="test-key")
        proc = subprocess.Popen(lesson_command("s03_todo", "migrate the database"),
                                cwd=workdir, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not endpoint.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.kill()
        proc.wait(timeout=60)
    code, out, err, api = run_main(s03_todo, "--continue", "go on",
                                   script=[reply(text("Migrating."))])
    sent = str(api.requests[0]["messages"])
    assert code == 0 and "migrate the database" in sent and "billing" not in sent, err


# A window's shell: its own session, the terminal its controlling one, then the lesson. (A
# new process does this, not a fork of the suite: the suite has threads, the stand-in's.)
IN_A_WINDOW = ("import fcntl, os, sys, termios; os.setsid(); "
               "fcntl.ioctl(0, termios.TIOCSCTTY, 0); os.execv(sys.argv[1], sys.argv[1:])")


@pytest.mark.skipif(sys.platform == "win32", reason="no pseudo-terminals on Windows")
def test_a_terminal_window_closed_at_the_prompt_still_writes_the_page(workdir):
    """The window closed, not only signalled: the kernel sends SIGHUP and every later write to
    the terminal fails (EIO). The total's line failed first, and the page was never written."""
    import pty
    with StandInAPI([reply(text("first answer"))]) as api:
        env = clean_env(workdir.parent / "home", ANTHROPIC_BASE_URL=api.url,
                        ANTHROPIC_API_KEY="test-key", TERM="xterm")
        terminal, child = pty.openpty()
        proc = subprocess.Popen([sys.executable, "-c", IN_A_WINDOW,
                                 *lesson_command("s03_todo")], cwd=workdir, env=env,
                                stdin=child, stdout=child, stderr=child)
        os.close(child)
        shown = b""
        while shown.count(PROMPT.encode()) < 1:
            shown += os.read(terminal, 4096)
        os.write(terminal, b"hello\r")
        while shown.count(PROMPT.encode()) < 2:
            shown += os.read(terminal, 4096)
        os.close(terminal)                  # the terminal window is closed
        code = proc.wait(timeout=60)
    assert b"first answer" in shown
    assert code == 128 + signal.SIGHUP
    assert list((workdir / ".transcripts").glob("session_s03_*.html"))


def test_a_closed_stdout_is_no_traceback_after_the_work_is_done(workdir):
    """`python s06_compact.py "write it" >&-`: the file is written, and the run ends quietly."""
    script = [reply(tool("write_file", {"path": "it.txt", "content": "done\n"})),
              reply(text("Written."))]
    with StandInAPI(script) as api:
        env = clean_env(workdir.parent / "home", ANTHROPIC_BASE_URL=api.url,
                        ANTHROPIC_API_KEY="test-key")
        command = f'{sys.executable} "{ROOT / "s06_compact.py"}" "write it" >&-'
        proc = subprocess.run(["sh", "-c", command], cwd=workdir, env=env,
                              capture_output=True, text=True, timeout=60)
    assert (workdir / "it.txt").read_text() == "done\n"
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "[session page: " in words(proc.stderr)


def test_a_kill_during_the_demo_writes_the_page_and_the_total(run_main, workdir, monkeypatch):
    """docs/real-use.md: 143 after writing the session page and total as a normal end does,
    --demo included. The signal's handler raises SystemExit(143) wherever the run is; here it
    is raised as the demo's turn ends, before the demo's own end, deterministically."""
    import s06_compact
    from harness import terminal

    def killed(*args):
        raise SystemExit(128 + signal.SIGTERM)
    monkeypatch.setattr(terminal, "print_answer", killed)
    code, out, err, api = run_main(s06_compact, "--demo", key=None)
    assert code == 143 and "Traceback" not in err
    assert "[session: " in words(err) and "[session page: demo/.transcripts/session_s06_" in err
    assert list((workdir / "demo" / ".transcripts").glob("session_s06_*.html"))


def test_ctrl_c_while_the_page_is_written_after_q_is_one_line(run_main, monkeypatch):
    """A long session's page takes a moment to write after q; a Ctrl-C then ended in a
    traceback (status -2)."""
    from harness.session import page

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(page, "write_page", interrupted)
    import s03_todo
    try:
        code, out, err, api = run_main(s03_todo, stdin="hi\nq\n", script=[reply(text("hello"))])
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C escaped main(): a traceback for the user")
    assert code == 130 and "Traceback" not in err, err
    assert err.rstrip().endswith("error: interrupted") and "hello" in out
