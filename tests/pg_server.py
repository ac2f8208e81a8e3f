"""A PostgreSQL server for the tests and the benchmark: the one in TEST_DATABASE_URL, or a
throwaway.

Used by tests/conftest.py (its pg_url fixture: once per pytest worker) and bench/bench_tasks.py.
Without each piece:
- TEST_DATABASE_URL first: CI (or you) may already run a server; starting a second wastes seconds.
- the binaries found by `pg_config --bindir`, then /usr/lib/postgresql/*/bin: Debian keeps initdb
  off PATH, so `which initdb` finds nothing on a machine that has the server.
- an unprivileged user: initdb and postgres refuse to run as root. As root we run them as
  `nobody` (present on Debian), through runuser; as anyone else, as ourselves.
- 127.0.0.1, a free port, no Unix socket, a temporary folder: nothing outside this machine can
  reach it, and it cannot collide with a server already running here.
- a password (scram-sha-256): the wrong-password test needs a server that checks passwords.
- skip_or_fail: locally a missing server skips with one line; with CI=true it fails, so a
  CI that forgot to install the server cannot go green by skipping.

As a script, for .ci/run (one cluster for the whole suite, its URL in TEST_DATABASE_URL):
    eval "$(python tests/pg_server.py start)"     # exports TEST_DATABASE_URL and PG_BOARD_DIR
    python tests/pg_server.py stop "$PG_BOARD_DIR"
"""

import glob
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

SUPERUSER = "postgres"
UNPRIVILEGED = "nobody"      # initdb refuses root; Debian always has this user
START_TIMEOUT = 30           # seconds pg_ctl waits for the server to accept connections
# Tests only: a throwaway cluster need not survive a power cut; the benchmark keeps fsync.
FAST = ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]


def bin_dir() -> Optional[Path]:
    """The folder holding initdb and pg_ctl, or None when this machine has no PostgreSQL server."""
    candidates = []
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10)
        candidates.append(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)  # the newest first
    for folder in candidates:
        if folder and (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThrowawayServer:
    """initdb + pg_ctl start in a temporary folder; stop() removes it all."""

    def __init__(self, binaries: Path, durable: bool = False):
        self.bin, self.durable = binaries, durable
        self.root = Path(tempfile.mkdtemp(prefix="pg_board_"))
        self.data, self.password, self.port = self.root / "data", secrets.token_hex(12), free_port()
        self.url = f"postgresql://{SUPERUSER}:{self.password}@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:  # root: as the unprivileged user, who owns the folder
            command = ["runuser", "-u", UNPRIVILEGED, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"{args[0]} failed: {last[0]} (log: {self.root / 'log'})")

    def start(self) -> "ThrowawayServer":
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if os.geteuid() == 0:
            shutil.chown(self.root, UNPRIVILEGED)
            shutil.chown(pwfile, UNPRIVILEGED)
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "-E", "UTF8", "--locale=C",
                  "--auth=scram-sha-256", f"--pwfile={pwfile}", "--no-sync")
        pwfile.unlink()
        options = ["-c", "listen_addresses=127.0.0.1", "-p", str(self.port),
                   "-c", "unix_socket_directories=", *([] if self.durable else FAST)]
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w",
                  "-t", str(START_TIMEOUT), "-o", " ".join(options), "start")
        return self

    def stop(self) -> None:
        """Stop at once (nothing here must survive) and remove the folder."""
        try:   # -W and our own wait: pg_ctl's -w polls once a second, which would cost a second
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-W", "stop")
        except (RuntimeError, OSError, subprocess.SubprocessError):
            pass                     # already gone: removing the folder is all that is left
        deadline = time.monotonic() + START_TIMEOUT
        while (self.data / "postmaster.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        shutil.rmtree(self.root, ignore_errors=True)


NO_PSYCOPG = "psycopg is not installed (python -m pip install -r requirements-postgres.txt)"
NO_SERVER = ("no PostgreSQL server (apt-get install postgresql, for a throwaway one the tests "
             "start; or TEST_DATABASE_URL=postgresql://... of a server of yours)")


def psycopg_missing() -> bool:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return True
    return False


def missing() -> Optional[str]:
    """What a PostgreSQL board lacks here and how to get it, in one line; or None. Each piece
    that is missing is named: a newcomer's venv has neither psycopg nor, often, a server."""
    lacking = [NO_PSYCOPG] * psycopg_missing()
    if not os.environ.get("TEST_DATABASE_URL") and bin_dir() is None:
        lacking.append(NO_SERVER)
    return "; ".join(lacking) or None


def server(durable: bool = False):
    """(url, stop): TEST_DATABASE_URL as it is, or a throwaway cluster started now."""
    if os.environ.get("TEST_DATABASE_URL"):
        return os.environ["TEST_DATABASE_URL"], lambda: None
    # Three tries: the free port is closed before postgres binds it, and another pytest-xdist
    # worker's server (or a test's) may take it in between.
    for attempt in range(3):
        started = ThrowawayServer(bin_dir(), durable=durable)
        try:
            started.start()
            return started.url, started.stop
        except RuntimeError:
            started.stop()
            if attempt == 2:
                raise
        except BaseException:
            started.stop()
            raise


def skip_or_fail(reason: str) -> None:
    """Skip with a one-line reason; in CI (CI=true) fail instead: CI must run these tests."""
    import pytest
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def main(argv: list) -> int:
    if argv[:1] == ["start"] and bin_dir() is not None:
        started = ThrowawayServer(bin_dir()).start()
        print(f"export TEST_DATABASE_URL='{started.url}' PG_BOARD_DIR='{started.root}'")
        return 0
    if argv[:1] == ["stop"] and len(argv) == 2:
        # only its folders: the server is running
        stopped = ThrowawayServer.__new__(ThrowawayServer)
        stopped.bin, stopped.root = bin_dir(), Path(argv[1])
        stopped.data = stopped.root / "data"
        stopped.stop()
        return 0
    print("usage: pg_server.py start | stop FOLDER (start needs the PostgreSQL server binaries)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
