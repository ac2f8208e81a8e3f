"""The hardened bash runner behind s03's `bash` tool (and so s06's and s07's).

s03's run_bash hands a command to run(). Without each piece:
- a new session (process group): a timeout kills the shell but leaves its children running.
- _read_output: reading all output first holds it in memory (`yes`: 2.9 GB in 10 s), and
  waits for ever on a background job that keeps the pipe open. _until_then: a command that
  times out tells the model nothing of what it printed (which test hung).
- _drop_later_output: a background job that prints after the shell ended (a dev server's
  log line) dies of SIGPIPE, as the harness closed the pipe.
- KEEP_UP_TO: `cat` of a 3 GB log is held in memory whole, then saved whole.
- the flood stop (FLOOD_BYTES): a command that writes without end is never stopped.
- signals_raise: SIGTERM or a closed terminal (SIGHUP) kills Python, a Ctrl-C inside Popen loses
  the pid: the command runs on, an orphan. cli.py ends a whole run with it too, so that its page
  and total are written, a second signal or not (systemd sends SIGTERM, then SIGHUP), and a
  SIGHUP that comes as a Ctrl-C kills a command ends the run too.
- child_env (config.py): the API key and the board's and a gateway's passwords reach every
  command the model runs (`env` prints them) and every install script those start.
This is not a sandbox: a command runs with your rights. Run the lessons in a scratch folder.
"""

import os
import select
import shutil
import signal
import subprocess
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path

from harness.config import child_env

# Characters of a command's output kept (at most 8 MB of memory, and of disk once spill.py saves
# it); past them it is cut, with a note saying to send it to a file and read it in parts.
KEEP_UP_TO = 2_000_000
FLOOD_BYTES = 10_000_000  # output beyond the cap after which a command is stopped (`yes`: 0.1 s)
FLOOD_SECONDS = 10        # a background job's flood: FLOOD_BYTES within this (a log is less)
# Seconds a process the command started may go on printing once the shell has exited, before
# bash returns without the rest: a filter (`exec > >(ts)`) may still be printing the command's
# own output; a job that logs every 50 ms, never quiet for 0.2 s, costs this wait.
EXIT_GRACE = 5
# Seconds of quiet, once the shell has exited, that mean a background job holds the pipe: a
# filter may pause that long (a fork, an import) before it prints the command's own output.
EXIT_QUIET = 1.5
# The tool is named bash, and models write bash ([[ ]], {1..3}, source): /bin/sh is often
# another shell (dash, on Debian and Ubuntu). None, where there is no bash: /bin/sh.
BASH = shutil.which("bash")
HELD_NOTE = ("[a process this command started still holds its output open: what it prints "
             "from now on is dropped; to keep it, send it to a file: cmd > job.log 2>&1 &]")


def run(command: str, cwd: Path, timeout: float, cap: int = KEEP_UP_TO) -> str:
    """Run a shell command; its output (stdout and stderr together), cut at `cap` characters.
    Past `timeout`: TimeoutError, with the output until then."""
    # The handlers go in first: a SIGTERM or a Ctrl-C as the command starts must still stop it.
    with signals_raise(ctrl_c=True) as armed:
        proc = subprocess.Popen(command, shell=True, executable=BASH, cwd=cwd,
                                stdin=subprocess.DEVNULL, env=child_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            armed()
            kept, dropped, late, held = _read_output(proc, timeout, cap)
        except BaseException:  # Ctrl-C, a closed terminal: leave no command running
            _kill_group(proc)
            raise
    # Only the end trimmed, and blank lines at the start: a first line's indent means something
    # (git status --short: " M" is not staged).
    out = kept.decode("utf-8", errors="replace").rstrip().lstrip("\r\n")
    if len(out) > cap or dropped:
        more = len(out[cap:].encode("utf-8")) + dropped
        out = out[:cap] + (f"\n... [output cut: {more:,} more bytes; to keep all of it, send it "
                           "to a file (cmd > out.txt) and read parts of it]")
    if late:      # the group was killed as the time ran out (_read_output)
        raise TimeoutError(f"command timed out after {timeout:g}s and was killed with the "
                           "processes it started (not one started with setsid or set -m, which "
                           "may still run); for a long job, send its output to a file and run "
                           "it in the background: cmd > job.log 2>&1 &\n" + _until_then(out))
    if dropped > FLOOD_BYTES:
        written = (len(kept) + dropped) // 1_000_000
        return out + (f"\n[stopped: the command wrote more than {written:,} MB, so it was "
                      "killed; send big output to a file (cmd > out.txt) and read parts of it]")
    parts = [part for part in (out, _how_it_ended(proc.wait())) if part]
    if held:
        parts.append(HELD_NOTE)
    return "\n".join(parts) or "(no output)"


def _until_then(out: str) -> str:
    return f"[its output until then:]\n{out}" if out else "[it printed nothing]"


def _how_it_ended(status: int) -> str:
    """"" for success; else the exit status, or the signal that killed the shell."""
    if status < 0:
        # A real-time signal (kill -40) has no name in signal.Signals.
        name = signal.strsignal(-status) or "no name"
        return f"[killed by signal {-status} ({name})]"
    return f"[exit status {status}]" if status else ""


def _read_output(proc: subprocess.Popen, timeout: float, cap: int) -> tuple:
    """(kept bytes, dropped bytes, timed out, held) of the output, read as it comes, until its
    end, the shell's exit (held: a background job still holds the pipe), a flood or the
    timeout."""
    kept, dropped = bytearray(), 0
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    late = held = False
    exited_at, reads_since = None, 0    # when the shell was seen to have exited; reads since
    while dropped <= FLOOD_BYTES:
        left = deadline - time.monotonic()
        if left <= 0:
            late = True
            _kill_group(proc)       # now, not after the output is decoded: nothing outlives it
            break
        if exited_at is None and proc.poll() is not None:
            exited_at = time.monotonic()
        if reads_since and time.monotonic() - exited_at > EXIT_GRACE:
            held = True
            break
        # Until the shell exits, a look every 0.2 s whether it has.
        wait = 0.2 if exited_at is None else EXIT_QUIET
        if not select.select([fd], [], [], min(left, wait))[0]:
            # Quiet after the shell had exited: a job holds the pipe (`job &`), and is not
            # waited for. (An exit seen only now may have come with output: look again.)
            if exited_at is not None:
                held = True
                break
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            # End of output: the shell is about to exit, or sent its output elsewhere (exec >).
            try:
                proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                late = True
                _kill_group(proc)
            break
        room = max(4 * cap - len(kept), 0)  # a character is at most 4 bytes of UTF-8
        kept += chunk[:room]
        dropped += max(len(chunk) - room, 0)
        if exited_at is not None:
            reads_since += 1
    if dropped > FLOOD_BYTES:
        _kill_group(proc)           # here too: after the signals' guard, a Ctrl-C would spare it
    if held:
        _drop_later_output(proc.stdout)
    else:
        proc.stdout.close()
    return kept, dropped, late, held


def _drop_later_output(pipe) -> None:
    """Read and drop what a background job writes after the shell ended, until it closes the
    pipe: closed now, the job's next write would kill it (SIGPIPE), as a server started with
    `&` at its first log line. Past FLOOD_BYTES within FLOOD_SECONDS, the pipe is closed: a
    flood ends so, not a server that logs for hours."""
    def drain() -> None:
        dropped, since = 0, time.monotonic()
        with pipe:
            while dropped <= FLOOD_BYTES:
                chunk = os.read(pipe.fileno(), 1 << 16)
                if not chunk:
                    break
                if time.monotonic() - since > FLOOD_SECONDS:
                    dropped, since = 0, time.monotonic()      # a new window
                dropped += len(chunk)
    threading.Thread(target=drain, name="a background job's output", daemon=True).start()


def _kill_group(proc: subprocess.Popen) -> None:
    """The command and every child it started: killing only the shell would leave them running."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


# The signals of each open signals_raise block (a run's, a command's in it); only a block's first
# raises: a second (systemd's SIGHUP after SIGTERM), as a command is killed or a page made, not.
_BLOCKS = []


@contextmanager
def signals_raise(ctrl_c: bool = False):
    """Inside, SIGTERM and SIGHUP raise SystemExit(128 + the signal's number), and with ctrl_c
    (run()'s) Ctrl-C its usual KeyboardInterrupt: the command is killed; a run (cli) ends as q
    does. The handlers are put back after (a test runs main() in its own process). Yields
    armed(): until run() has the command's pid, a signal is only noted (raised inside Popen, it
    would lose the pid, and leave the command running); armed() raises for it then."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    came, ready = [], []

    def stop(signum, frame):
        for block in _BLOCKS if signum != signal.SIGINT else [came]:
            block.append(signum)
        if ready and came == [signum]:
            armed()          # raises for it: armed() found none before, so came[0] is this one

    def armed():
        ready.append(True)
        if came:
            raise KeyboardInterrupt if came[0] == signal.SIGINT else SystemExit(128 + came[0])

    saved = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    # Ctrl-C unless it is ignored (a run started in the background keeps that).
    if ctrl_c and callable(signal.getsignal(signal.SIGINT)):
        saved[signal.SIGINT] = signal.signal(signal.SIGINT, stop)
    outer = _BLOCKS[-1] if _BLOCKS else []
    outer_before = len(outer)
    _BLOCKS.append(came)
    try:
        yield armed
    finally:
        _BLOCKS.pop()                  # nested, in one thread: the last is this block's
        for s, handler in saved.items():
            signal.signal(s, handler)
        # The enclosing block's first signal, if it came while this block was open and this
        # block raised another (its Ctrl-C) or none: raised now, or a SIGHUP as a Ctrl-C killed
        # the command, or as the block closed, would leave the run going.
        if outer_before == 0 and outer and came[:1] != outer[:1]:
            raise SystemExit(128 + outer[0])
