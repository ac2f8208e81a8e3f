"""Every fixture of the suite, and the hooks around each test (the helpers are in helpers.py).

- every test's output laid out for 80 columns, as a pipe is;
- a lesson run as a user runs it (a subprocess, against the loopback stand-in), or in process,
  and its client's retries without the SDK's waits between them;
- a folder to work in;
- the boards: a folder, a PostgreSQL schema, and `board`, which is each in turn;
- what a few files need of their own: a busy PostgreSQL board, a board reached with a
  password, a big log, a browser, a planted link's victim, a REPL history;
- and, around every test, a bound against hanging (the hooks at the end).
"""

import errno
import faulthandler
import importlib
import io
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))        # session_screenshot: how Chromium is found

import helpers  # noqa: E402
import pg_server  # noqa: E402
import s07_task_system as s07  # noqa: E402
import session_screenshot  # noqa: E402
from harness import config, spill  # noqa: E402
from harness.board import postgres, record  # noqa: E402
from harness.run import Run  # noqa: E402
from harness.stand_in import StandInAPI  # noqa: E402


# ---------------------------------------------------------------- a lesson, as a user runs it

@pytest.fixture(autouse=True, scope="session")
def one_tls_context():
    """Every client the harness makes (one per lesson run in process, hundreds in the suite)
    builds a TLS context and loads the CA bundle into it: 20 ms each, seconds of the suite,
    for a loopback that never uses TLS. The SDK's HTTP library (httpx2, or httpx in older
    SDKs) makes the default one once and shares it, as its docs allow a context to be."""
    transport = None
    for name in ("httpx2._transports.default", "httpx._transports.default"):
        try:
            transport = importlib.import_module(name)
            break
        except ImportError:
            continue
    if transport is None or not hasattr(transport, "create_ssl_context"):
        yield
        return
    made, shared = transport.create_ssl_context, {}

    def create_ssl_context(verify=True, cert=None, trust_env=True, **more):
        if verify is not True or cert is not None or more:
            return made(verify=verify, cert=cert, trust_env=trust_env, **more)
        if trust_env not in shared:
            shared[trust_env] = made(verify=verify, cert=cert, trust_env=trust_env)
        return shared[trust_env]
    transport.create_ssl_context = create_ssl_context
    yield
    transport.create_ssl_context = made


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
def in_tmp(workdir, monkeypatch):
    """The test runs in workdir: the file tools' workspace, and where anything the harness
    saves lands. A file may stand outside it, in workdir.parent."""
    monkeypatch.chdir(workdir)
    return workdir


@pytest.fixture
def run_lesson(workdir, run_main):
    """The one way a test runs a lesson: run_lesson("s03_todo", "prompt", script=[...]) ->
    (CompletedProcess, StandInAPI), in workdir, with a clean environment (helpers.clean_env)
    and a stand-in on 127.0.0.1 that answers from `script`.

    By default as a user runs it: `python s03_todo.py prompt`, a subprocess, through the real
    client. in_process=True calls the lesson's main() in this process instead (run_main, the
    same code and the same stand-in): about a second less a run, the SDK's import, for a test
    of what a lesson does, not of how a process starts, ends or is signalled (timeout bounds
    only the subprocess; in process, the suite's HANG_LIMIT does). stand_in: more settings of
    the stand-in (a small context_window, say)."""
    def run(lesson, *args, script=(), summary=None, stdin=None, env=None, key="test-key",
            timeout=60, in_process=False, stand_in=None):
        if in_process:
            code, out, err, api = run_main(importlib.import_module(lesson), *args,
                                           script=script, summary=summary, stdin=stdin or "",
                                           env=env, key=key, stand_in=stand_in)
            return subprocess.CompletedProcess([lesson, *args], code, out, err), api
        with StandInAPI(script, summary=summary, **(stand_in or {})) as api:
            extra = {"ANTHROPIC_BASE_URL": api.url, **(env or {})}
            if key:
                extra["ANTHROPIC_API_KEY"] = key
            proc = subprocess.run(helpers.lesson_command(lesson, *args),
                                  cwd=workdir,
                                  env=helpers.clean_env(workdir.parent / "home", **extra),
                                  input=stdin, capture_output=True, text=True, encoding="utf-8",
                                  timeout=timeout)
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
    """The state a new process starts without: s06's layers, on two module objects (what
    layer 1 cleared, CLEARED; what layer 2 measured, CONTEXT), s03's todo list, and the
    secrets the harness learnt as it ran. The test gets them new, and runs in its own tmp
    folder (whatever a layer saves lands there). Returns the function that makes them new
    again: run_main calls it before each run."""
    import s03_todo
    import s06_compact

    def renew() -> None:
        monkeypatch.setattr(s06_compact, "CLEARED", s06_compact.Cleared())
        monkeypatch.setattr(s06_compact, "CONTEXT", s06_compact.ContextSize())
        # TOOL_HANDLERS holds TODO's bound method: the same object, emptied.
        monkeypatch.setattr(s03_todo.TODO, "items", [])
        monkeypatch.setattr(config, "_LEARNT_SECRETS", set())
    renew()
    monkeypatch.chdir(tmp_path)
    return renew


@pytest.fixture
def run_main(fresh_layers, workdir, monkeypatch, capsys):
    """In-process twin of run_lesson, for edge cases: calls lesson.main(argv) with the real client.

    Cheaper than a subprocess (the anthropic import is paid once), same code path; each run
    starts as a new process would (main() makes its own Run; s06's layers are made new).
    base_url: how the stand-in's address reaches the lesson. By default its URL is in
    ANTHROPIC_BASE_URL; a function of that URL gives the variable's value instead, or None
    to leave it unset (the test put the address in a .env, which the environment would beat).
    Returns (exit code, stdout, stderr, StandInAPI).
    """
    saved = dict(os.environ)
    monkeypatch.chdir(workdir)

    def run(lesson, *args, script=(), summary=None, stdin="", env=None, key="test-key",
            stand_in=None, base_url=None):
        fresh_layers()
        with StandInAPI(script, summary=summary, **(stand_in or {})) as api:
            # The environment run_lesson's subprocess gets: made from the test's own (PATH,
            # LANG...), less any key or setting; a value may be given as a number.
            os.environ.clear()
            os.environ.update(saved)
            url = api.url if base_url is None else base_url(api.url)
            extra = {**({"ANTHROPIC_BASE_URL": url} if url is not None else {}), **(env or {})}
            made = helpers.clean_env(workdir.parent / "home", **extra)
            os.environ.clear()
            os.environ.update(made)
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


@pytest.fixture
def quick_retries(monkeypatch):
    """The harness's client retries a request that found no server, timed out or got a 5xx
    (client.MAX_RETRIES), and the SDK waits about 0.5 s, then 1 s, before each retry. The
    retries still happen here, without those waits: a test of what the user is told after
    them checks nothing of the SDK's backoff, and waited over a second for it."""
    from harness.sdk import anthropic
    # An attribute of the package, which loads it first (harness/sdk.py loads the SDK on first
    # use): `import anthropic._base_client` before that makes a second copy the client ignores.
    monkeypatch.setattr(anthropic._base_client, "INITIAL_RETRY_DELAY", 0, raising=False)


# ---------------------------------------------------------------- the boards

@pytest.fixture(scope="session")
def pg_url():
    """A PostgreSQL server for the session: TEST_DATABASE_URL (one server the workers share),
    or a throwaway cluster (tests/pg_server.py), which each pytest-xdist worker starts for
    itself, in a second or so. Without either, or without psycopg, a test that needs it skips
    with one line (with CI=true it fails)."""
    why = pg_server.missing()
    if why:
        pg_server.skip_or_fail(why)
    url, stop = pg_server.server()
    yield url
    stop()


@pytest.fixture
def pg_board(pg_url):
    """A PostgreSQL board of the test's own: the server's URL, in a fresh schema."""
    import psycopg
    schema = f"board_{secrets.token_hex(6)}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield helpers.in_schema(pg_url, schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=["files", "postgres"])
def board(request, tmp_path):
    """Where a board is, as --board or TASK_BOARD takes it: a folder, then a postgresql:// URL.
    A test that takes `board` runs on both stores: the rules hold on each."""
    if request.param == "files":
        return str(tmp_path / ".tasks")
    return request.getfixturevalue("pg_board")


@pytest.fixture
def board_dir(tmp_path) -> Path:
    """A folder board, not made yet: what the folder store writes, read as files."""
    return tmp_path / ".tasks"


@pytest.fixture
def s07_board(board, monkeypatch):
    """s07's own TaskManager, s07.TASKS (what its tools and its board after a compaction use),
    on `board`, for agent alice. Its store and agent are set, as --board and --name set them:
    the tools' table holds its bound methods, so the object itself stays."""
    monkeypatch.setattr(s07.TASKS, "store", s07.TaskManager(board).store)
    monkeypatch.setattr(s07.TASKS, "agent", "alice")
    return s07.TASKS


@pytest.fixture
def failing_write(board, monkeypatch):
    """fail(n, exc): the n-th write to the board from now on raises exc, in the middle of an
    import: a server gone, a full disk, or the user's Ctrl-C."""
    store = postgres if helpers.on_postgres(board) else record   # s07's TaskFolder: record.now
    real = store.now                                 # every write stamps updated_at

    def fail(n, exc):
        calls = iter(range(1, 10 ** 6))

        def now():
            if next(calls) == n:
                raise exc
            return real()
        monkeypatch.setattr(store, "now", now)
    return fail


@pytest.fixture
def next_stamp_fails(monkeypatch):
    """fail() makes the next os.pwrite (which stamps a folder board's .lock after a write) fail
    as a full disk does, once; failed() says whether it did."""
    real, state = os.pwrite, {"armed": False, "failed": False}

    def pwrite(fd, data, offset):
        if state["armed"]:
            state.update(armed=False, failed=True)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data, offset)
    monkeypatch.setattr(os, "pwrite", pwrite)
    return lambda: state.update(armed=True), lambda: state["failed"]


@pytest.fixture
def busy(pg_board, monkeypatch):
    """hold(statement): another session runs it in a transaction it leaves open (as a person in
    psql might), until the test ends or release() is called. Returns that session's pid. The
    board's LOCK_TIMEOUT is BUSY_AFTER."""
    psycopg = helpers.psycopg_or_skip()
    monkeypatch.setattr(postgres, "LOCK_TIMEOUT", helpers.BUSY_AFTER)
    sessions = []

    def hold(statement):
        conn = psycopg.connect(pg_board, application_name="psql")
        conn.execute(statement)                     # not committed: its locks stay
        sessions.append(conn)
        return conn.info.backend_pid

    def release():
        for conn in sessions:
            conn.close()
    yield hold, release
    release()


@pytest.fixture
def board_with_password(pg_url):
    """A board reached as a role whose password holds ? and #, where a URL parser cuts."""
    password = "Tr0ub4?dor#St4ple"
    with helpers.role_with_schema(pg_url, password) as (role, schema):
        server = urlsplit(pg_url)
        yield (f"postgresql://{role}:{password}@{server.hostname}:{server.port}{server.path}"
               f"?options=-csearch_path%3D{schema}"), password


@pytest.fixture
def agent(pg_url):
    """A role of its own, with a password, that owns a schema of its own: a board no other test
    shares. url(...) spells its address; the password is long and random, so that finding it
    anywhere means it leaked."""
    password = f"pw{secrets.token_hex(12)}"
    with helpers.role_with_schema(pg_url, password) as (role, schema):
        server = urlsplit(pg_url)
        where = f"{server.hostname}:{server.port}{server.path}?options=-csearch_path%3D{schema}"

        def url(scheme="postgresql", with_password=True):
            user = f"{role}:{password}" if with_password else role
            return f"{scheme}://{user}@{where}"
        yield SimpleNamespace(role=role, password=password, schema=schema, url=url,
                              host=server.hostname, port=server.port,
                              database=server.path.lstrip("/"),
                              admin=f"{pg_url}?options=-csearch_path%3D{schema}")


@pytest.fixture
def nothing_hidden_yet(monkeypatch):
    """A process that has learnt no secret yet: what one test hides stays out of the others."""
    monkeypatch.setattr(config, "_LEARNT_SECRETS", set())


# ---------------------------------------------------------------- files

@pytest.fixture
def big_log(in_tmp):
    """200 MB of text, 2,000,000 lines; removed at once after (pytest keeps tmp folders)."""
    line = b"x" * 99 + b"\n"
    with open("big.log", "wb") as f:
        for _ in range(200):
            f.write(line * 10_000)
    yield "big.log"
    os.unlink("big.log")


@pytest.fixture
def results(in_tmp):
    """Where big results are saved whole (spill.RESULTS), under the test's own folder."""
    return spill.RESULTS


@pytest.fixture
def victim(in_tmp) -> Path:
    """A file outside the workspace that a planted link points to; the test runs in work/."""
    path = in_tmp.parent / "victim.txt"
    path.write_text(helpers.VICTIM)
    return path


@pytest.fixture
def history(monkeypatch):
    """The REPL's history as on a terminal, emptied before and after (None without readline)."""
    try:
        import readline
    except ImportError:
        readline = None
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(isatty=lambda: True))  # a terminal
    if readline is not None:
        readline.clear_history()
    yield readline
    if readline is not None:
        readline.clear_history()


@pytest.fixture(scope="module")
def chromium():
    """The system's Chromium (headless), found as tools/session_screenshot.py finds it, or a
    skip saying how to install it (CI=true: a failure)."""
    binary = session_screenshot.find_chromium()
    if binary:
        return binary
    if os.environ.get("CI") == "true":
        pytest.fail("Chromium is missing on CI: .ci/run must install it "
                    "(apt-get install -y chromium)")
    pytest.skip("Chromium is not installed: no chromium, chromium-browser or google-chrome "
                "on PATH (apt-get install -y chromium)")


# ---------------------------------------------------------------- a test that hangs fails

# Many tests start a process, open a file that may be a FIFO, or wait on a lock or a server: a
# bug there hangs, and a hung suite says nothing until CI's 90-minute limit kills it, naming no
# test. So each phase of a test (setup, call, teardown) gets HANG_LIMIT seconds, or what its
# `hang_limit(seconds)` marker says; past it, a SIGALRM raises TestHangs in the test. A
# blocking call (a read, a wait, a sleep) is interrupted by the signal, and Python runs the
# handler before it would retry (PEP 475), so the test fails there, naming itself, with the
# stack of where it waited. The limit is only a bound against hanging, not a speed claim: one
# test takes about 40 s alone (it is marked), the others under 10 s, and a loaded machine may
# take several times that. A hang the signal cannot break (a C loop that never returns to Python,
# or code that swallows the exception) meets the last resort LAST_RESORT seconds later:
# faulthandler dumps every thread's stack to the real stderr and ends the process: the run,
# or under pytest-xdist its worker, which xdist reports as crashed in that test.
HANG_LIMIT = 120
LAST_RESORT = 60


class TestHangs(BaseException):
    """Raised in a test that ran past its limit. A BaseException, as KeyboardInterrupt is: the
    harness turns an Exception of a tool into a result for the model and goes on, and a hang
    must end the test instead."""

    __test__ = False            # not a test class, whatever its name


STDERR = pytest.StashKey[int]()


def pytest_configure(config):
    # The real stderr, for the last resort: while a test runs, pytest captures fd 2 (and a
    # process that faulthandler ends loses what was captured).
    config.stash[STDERR] = os.dup(2)
    # Before any test arms the watchdog: what threads a fork must live with (helpers.forking).
    helpers.note_foreign_threads()
    # In a pytest-xdist worker, execnet's thread runs beside every test, and Python 3.12 warns
    # at each fork (its lock would stay held in the child, which never uses it). The suite's
    # own threads, forking() waits out; with -n 0 the warning still shows, as it should.
    if hasattr(config, "workerinput"):
        config.addinivalue_line("filterwarnings", "ignore:This process .* is multi-threaded, "
                                "use of fork:DeprecationWarning")


def _limit(item) -> float:
    marker = item.get_closest_marker("hang_limit")
    return marker.args[0] if marker else HANG_LIMIT


def _bounded(item, phase):
    """Run one phase of a test (the hook's yield) within its limit."""
    limit = _limit(item)

    def hangs(signum, frame):
        faulthandler.dump_traceback(file=2, all_threads=True)   # into the test's report
        raise TestHangs(f"{item.nodeid}: its {phase} was still running after {limit} s: it "
                        "hangs (the stack of every thread is in its captured stderr)")
    previous = signal.signal(signal.SIGALRM, hangs)
    signal.setitimer(signal.ITIMER_REAL, limit)
    helpers.arm_watchdog(limit + LAST_RESORT, item.config.stash[STDERR])
    try:
        return (yield)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        helpers.disarm_watchdog()
        signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    # A missing server or package skips dozens of tests for one reason. pytest's summary
    # (-rs) counts skips by place and reason, and a fixture's skip is placed at each test:
    # placed at tests/, they make one line per reason, with the count, not 95 alike.
    if report.skipped and isinstance(report.longrepr, tuple):
        report.longrepr = ("tests", None, report.longrepr[2])
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _bounded(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _bounded(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    return (yield from _bounded(item, "teardown"))
