"""Where the harness's secrets may go: the board's address, bash's environment, the command line.

- A board address is a folder, a PostgreSQL URL (any case, SQLAlchemy's +driver too) or one
  clear line: never a folder named after a URL, password and all, that the model then reads.
- No command the agent runs inherits a secret of the harness: the API key and token, TASK_BOARD,
  or any variable that holds the board's password (checked through s07's main(): the model's
  `env` must not carry the password to the API, nor s07 write it, libpq's own lines included).
- The board's password can be given without the command line (TASK_BOARD, a password file, a
  service file), and `--board` with a password says so in one line.

The PostgreSQL tests need a server (tests/pg_server.py); without one they skip with one line,
and with CI=true they fail.
"""

import argparse
import base64
import importlib.util
import json
import os
import secrets
import tempfile
from pathlib import Path
from urllib.parse import quote

import pytest

from helpers import sql, tool_results
import s03_todo
from harness import cli, client, config, errors
from harness.board.postgres import PostgresTasks
from harness.errors import SetupError
from harness.stand_in.script import reply, text, tool
import s07_task_system as s07
from s07_task_system import TaskManager
from helpers import messages, refusing_port, words


def subjects(agent):
    """The subjects of the tasks on the agent's board, read by the server's superuser."""
    return [row[0] for row in sql(agent.admin, "SELECT subject FROM tasks ORDER BY id")]


# ---------------------------------------------------------------- the board's address

@pytest.mark.parametrize("scheme", ["postgresql+psycopg", "PostgreSQL", "POSTGRES",
                                    "postgres+psycopg2", "postgresql+asyncpg"])
def test_a_postgresql_url_in_any_case_or_with_a_sqlalchemy_driver_opens_the_database(
        agent, scheme, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tasks = TaskManager(agent.url(scheme))
    assert isinstance(tasks.store, PostgresTasks)
    assert tasks.create("Design") == "Created task #1: Design"
    assert subjects(agent) == ["Design"]
    assert list(tmp_path.iterdir()) == []                     # no folder named after the URL
    assert tasks.store.name.startswith(f"postgresql://{agent.role}:***@")


@pytest.mark.parametrize("address, shown", [
    ("mysql://me:Tr0ub4dor@db.example/board", "mysql://me:***@db.example/board"),
    ("https://me:Tr0ub4dor@db.example/board", "https://me:***@db.example/board"),
    ("sqlite:///tasks.db", "sqlite:///tasks.db"),
    ("odd://name", "odd://name"),
])
def test_an_address_with_another_scheme_is_refused_in_one_line_and_makes_no_folder(
        address, shown, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SetupError) as caught:
        TaskManager(address)
    line = str(caught.value)
    assert line.startswith(f"the board {shown} is neither a folder nor a PostgreSQL URL")
    assert "./NAME" in line and "\n" not in line and "Tr0ub4dor" not in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("address, says", [
    ("postgresql:/me:Tr0ub4dor@db.example/board", "begins postgresql: without //"),
    ("Postgres:me:Tr0ub4dor@db.example/board", "begins Postgres: without //"),
    ("host=db.example user=me password=Tr0ub4dor dbname=board", "a libpq keyword=value string"),
    ("  dbname=board password='Tr0 ub4dor'", "a libpq keyword=value string"),
])
def test_a_postgresql_address_misspelt_is_refused_without_showing_it(address, says, tmp_path,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SetupError) as caught:
        TaskManager(address)
    line = str(caught.value)
    assert says in line and "postgresql://" in line and "\n" not in line
    assert "Tr0" not in line and "ub4dor" not in line
    assert list(tmp_path.iterdir()) == []


def test_a_postgresql_url_a_parser_cannot_read_is_one_line_without_its_password(run_lesson,
                                                                              workdir):
    """On either install: with psycopg, libpq's reason; with the README's requirements.txt
    alone, how to install psycopg. Both name the board with its password as ***."""
    board = "postgresql://me:Tr0ub4dor@[::1/board"          # the ] of the IPv6 address is missing
    proc, api = run_lesson("s07_task_system", "plan it", env={"TASK_BOARD": board}, in_process=True)
    assert proc.returncode == 1 and api.requests == [] and "Traceback" not in proc.stderr
    assert len(messages(proc.stderr)) == 1 and "Tr0ub4dor" not in proc.stderr
    shown = "postgresql://me:***@[::1/board"
    if importlib.util.find_spec("psycopg") is not None:       # the lesson runs this Python
        assert proc.stderr.startswith(f"error: cannot open the board {shown}: ")
    else:
        assert words(proc.stderr) == (f"error: the board {shown} needs psycopg (No module "
                                      "named 'psycopg'): python -m pip install -r "
                                      "requirements-postgres.txt")


def test_a_folder_whose_name_holds_a_colon_and_slashes_is_written_as_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for address in ("./odd://name", str(tmp_path / "abs://name"), "sub/dir://x", ".tasks"):
        tasks = TaskManager(address)
        assert isinstance(tasks.store, s07.TaskFolder)
        tasks.create("Design")
    # A path's // is one /: ./odd://name is the folder name inside the folder odd:
    made = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("task_1.json"))
    assert made == [".tasks/task_1.json", "abs:/name/task_1.json", "odd:/name/task_1.json",
                    "sub/dir:/x/task_1.json"]


def test_a_path_object_is_always_a_folder(tmp_path):
    assert isinstance(TaskManager(tmp_path / "postgresql:" / "x").store, s07.TaskFolder)


def test_a_refused_board_in_task_board_stops_s07_before_any_request_or_folder(run_lesson, workdir):
    board = "mysql://me:Tr0ub4dor@db.example/board"
    proc, api = run_lesson("s07_task_system", "plan it", env={"TASK_BOARD": board},
                           script=[reply(text("never asked"))], in_process=True)
    assert proc.returncode == 1 and api.requests == [] and "Traceback" not in proc.stderr
    assert len(messages(proc.stderr)) == 1 and "Tr0ub4dor" not in proc.stderr
    assert "error: the board mysql://me:***@db.example/board is neither" in proc.stderr
    assert list(workdir.iterdir()) == []


def test_a_refused_board_in_the_flag_stops_s07_with_one_line(run_lesson, workdir):
    proc, api = run_lesson("s07_task_system", "--board", "ftp://db.example/board", "plan it",
                           in_process=True)
    assert proc.returncode == 1 and api.requests == []
    assert messages(proc.stderr) == [("error: the board ftp://db.example/board is neither a folder "
                                   "nor a PostgreSQL URL (ftp:// is not a board): give a folder "
                                   "(.tasks) or postgresql://user@host/database; write ./NAME "
                                   "for a folder whose name holds ://")]
    assert list(workdir.iterdir()) == []


# ---------------------------------------------------------------- bash's environment

def test_child_env_drops_the_harness_settings_and_any_variable_holding_a_secret(
        monkeypatch, nothing_hidden_yet):
    key = "sk-ant-" + secrets.token_hex(20)
    token = "tok-" + secrets.token_hex(8)
    password = "pw" + secrets.token_hex(8)
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)                   # as .env loading sets them
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", token)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # where, not what: passed on
    monkeypatch.setenv("PROJECT_SETTING", "passes-through")        # the user's own setting
    monkeypatch.setenv("MY_OLD_KEY", key)                          # the key, by another name
    monkeypatch.setenv("TASK_BOARD", "/some/folder")               # the harness's own setting
    monkeypatch.setenv("DATABASE_URL", f"postgresql://agents:{password}@db/board")
    monkeypatch.setenv("PGPASSWORD", password)
    monkeypatch.setenv("APP_DSN", f"host=db password={password} dbname=app")
    monkeypatch.setenv("OTHER_URL", "postgresql://app:another-password@db/app")   # the user's
    monkeypatch.setenv("PGPASSFILE", "/home/me/.pgpass")          # where, not what: the user's
    monkeypatch.setenv("PATH", f"/opt/{password[:4]}/bin:" + os.environ["PATH"])
    config.hide_from_commands(password)
    env = config.child_env()
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "MY_OLD_KEY", "TASK_BOARD",
                 "DATABASE_URL", "PGPASSWORD", "APP_DSN"):
        assert name not in env, name
    for name in ("ANTHROPIC_BASE_URL", "PROJECT_SETTING", "OTHER_URL", "PGPASSFILE", "PATH",
                 "HOME"):
        assert env.get(name) == os.environ.get(name), name
    assert not any(password in value or key in value or token in value for value in env.values())
    shown = s03_todo.run_bash("env")                               # what a command sees
    assert key not in shown and token not in shown and password not in shown
    assert "ANTHROPIC_API_KEY" not in shown and "PROJECT_SETTING=passes-through" in shown
    assert os.environ["ANTHROPIC_API_KEY"] == key                  # the agent keeps its own


def test_a_short_board_password_hides_the_variables_that_hold_it_and_only_those(
        monkeypatch, nothing_hidden_yet):
    config.hide_from_commands("postgres")         # a common password, and a common word
    monkeypatch.setenv("PATH", "/usr/lib/postgresql/15/bin:" + os.environ["PATH"])
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres:postgres@localhost/postgres")
    monkeypatch.setenv("PGPASSWORD", "postgres")
    env = config.child_env()
    assert env["PATH"] == os.environ["PATH"]        # bash still finds its commands
    assert "DATABASE_URL" not in env and "PGPASSWORD" not in env


def s07_in_process(run_lesson, *args, **kwargs):
    """run_lesson("s07_task_system", *args, in_process=True), its stderr as a process's stderr
    holds it: with what was written to file descriptor 2 meanwhile, where libpq writes its own
    warnings (past sys.stderr, which is all the in-process run reads), and a terminal shows
    them."""
    with tempfile.TemporaryFile() as fd_2:
        saved = os.dup(2)
        os.dup2(fd_2.fileno(), 2)
        try:
            proc, api = run_lesson("s07_task_system", *args, in_process=True, **kwargs)
        except BaseException:
            # A hang's stack (conftest's limit writes it to fd 2) must reach pytest's report.
            os.dup2(saved, 2)
            fd_2.seek(0)
            os.write(2, fd_2.read())
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        fd_2.seek(0)
        proc.stderr += fd_2.read().decode("utf-8", "replace")
    return proc, api


def env_seen_by_the_model(agent, args, env, run_lesson):
    """s07, whose model asks bash for `env`, in process: what the API received, and the run."""
    script = [reply(tool("task_create", {"subject": "Design"})),
              reply(tool("bash", {"command": "env"})),
              reply(text("done"))]
    proc, api = s07_in_process(run_lesson, *args, "plan it", script=script,
                               env={"SEEN_BY_BASH": "yes", **env})
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr
    assert subjects(agent) == ["Design"]                    # the board was the database
    shown_env = tool_results(api.requests[2])[0]["content"]
    assert "SEEN_BY_BASH=yes" in shown_env                  # the model did see bash's env
    return json.dumps(api.requests), proc


@pytest.mark.slow
@pytest.mark.parametrize("how", ["TASK_BOARD", ".env", "--board and DATABASE_URL",
                                 "PGPASSWORD"])
def test_the_board_password_never_reaches_the_model_through_bash(agent, how, workdir,
                                                                run_lesson):
    args, env = [], {}
    if how == "TASK_BOARD":
        env["TASK_BOARD"] = agent.url()
    if how == ".env":
        (workdir / ".env").write_text(f"TASK_BOARD={agent.url()}\n", encoding="utf-8")
    if how == "--board and DATABASE_URL":
        args = ["--board", agent.url("postgresql+psycopg")]
        env["DATABASE_URL"] = agent.url("postgresql+psycopg")
    if how == "PGPASSWORD":
        env = {"TASK_BOARD": agent.url(with_password=False), "PGPASSWORD": agent.password}
    requests, proc = env_seen_by_the_model(agent, args, env, run_lesson)
    assert agent.password not in requests
    assert agent.password not in proc.stdout + proc.stderr


# ---------------------------------------------------------------- the password out of `ps`

def run_s07(run_lesson, args, env, script, in_process=True):
    """s07 with `args` and `env`: in process (s07_in_process: its stderr, libpq's writes to fd 2
    included), or as a user runs it."""
    if in_process:
        return s07_in_process(run_lesson, *args, script=script, env=env)[0]
    return run_lesson("s07_task_system", *args, script=script, env=env)[0]


CREATE = [reply(tool("task_create", {"subject": "Design"})), reply(text("planned"))]
WARNING = ("warning: a password in --board shows in `ps` to every user of this machine: give "
           "it in TASK_BOARD, ~/.pgpass or a service file (docs/many-machines.md)")


def test_a_password_in_the_board_flag_is_one_warning_line_and_the_run_goes_on(agent,
                                                                            run_lesson):
    # The stderr of the process, libpq's own writes to it included.
    proc = run_s07(run_lesson, ["--board", agent.url(), "plan it"], {}, CREATE)
    assert proc.returncode == 0 and proc.stdout.strip() == "planned", proc.stderr
    assert words(proc.stderr).count(WARNING) == 1 and agent.password not in proc.stderr
    assert subjects(agent) == ["Design"]


def test_a_board_flag_without_a_password_gives_no_warning(agent, run_lesson,
                                                          nothing_hidden_yet):
    proc = run_s07(run_lesson, ["--board", agent.url(with_password=False), "plan it"],
                   {"PGPASSWORD": agent.password}, CREATE)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr


def write_private(path: Path, content: str, mode: int = 0o600) -> Path:
    path.write_text(content, encoding="utf-8")
    path.chmod(mode)
    return path


def test_a_password_file_gives_the_board_its_password_off_the_command_line(agent, workdir,
                                                                           run_lesson,
                                                                           nothing_hidden_yet):
    passfile = write_private(workdir.parent / "pgpass",
                             f"{agent.host}:{agent.port}:*:{agent.role}:{agent.password}\n")
    board = agent.url(with_password=False)
    proc = run_s07(run_lesson, ["--board", board, "plan it"], {"PGPASSFILE": str(passfile)},
                   CREATE)
    assert proc.returncode == 0 and proc.stdout.strip() == "planned", proc.stderr
    assert "warning" not in proc.stderr and agent.password not in board
    assert subjects(agent) == ["Design"]


def test_a_service_file_gives_the_board_its_whole_address_off_the_command_line(
        agent, workdir, run_lesson, nothing_hidden_yet):
    service = write_private(workdir.parent / "pg_service.conf",
                            f"[board]\nhost={agent.host}\nport={agent.port}\n"
                            f"dbname={agent.database}\nuser={agent.role}\n"
                            f"password={agent.password}\noptions=-csearch_path={agent.schema}\n")
    proc = run_s07(run_lesson, ["--board", "postgresql://?service=board", "plan it"],
                   {"PGSERVICEFILE": str(service)}, CREATE)
    assert proc.returncode == 0 and proc.stdout.strip() == "planned", proc.stderr
    assert "warning" not in proc.stderr
    assert subjects(agent) == ["Design"]


def test_a_password_file_others_can_read_is_named_with_how_to_fix_it(agent, workdir, run_lesson):
    """As a user runs it, a process: libpq, reading such a file, writes a warning of its own
    to fd 2, past Python; the user must get the one line, and no warning besides."""
    passfile = write_private(workdir.parent / "pgpass",
                             f"{agent.host}:{agent.port}:*:{agent.role}:{agent.password}\n",
                             mode=0o644)
    proc = run_s07(run_lesson, ["--board", agent.url(with_password=False), "plan it"],
                   {"PGPASSFILE": str(passfile)}, CREATE, in_process=False)
    assert proc.returncode == 1 and len(messages(proc.stderr)) == 1, proc.stderr
    assert f"the password file {passfile} is ignored" in words(proc.stderr)
    assert f"chmod 600 {passfile}" in words(proc.stderr)


def test_no_password_anywhere_says_where_to_put_one(agent, workdir, run_lesson,
                                                   nothing_hidden_yet):
    proc = run_s07(run_lesson, ["--board", agent.url(with_password=False), "plan it"],
                   {"PGPASSFILE": str(workdir.parent / "none")}, CREATE)
    assert proc.returncode == 1 and len(messages(proc.stderr)) == 1, proc.stderr
    assert "needs a password and none was given" in proc.stderr
    assert "~/.pgpass" in proc.stderr and "TASK_BOARD" in proc.stderr


# ---------------------------------------------------------------- a password in the endpoint's URL

GATEWAY_PASSWORD = "Gw-" + secrets.token_hex(10) + "@/:"   # @ / : must be percent-encoded
GATEWAY_ENCODED = quote(GATEWAY_PASSWORD, safe="")


def with_userinfo(url: str, password: str = GATEWAY_ENCODED) -> str:
    """url (http://127.0.0.1:port) as a gateway with basic auth is written: user:password@."""
    return url.replace("://", f"://alice:{password}@", 1)


@pytest.mark.parametrize("where", ["the environment", ".env"])
def test_a_password_in_the_base_url_never_reaches_the_model_and_still_opens_the_gateway(
        run_main, workdir, where):
    """A gateway with basic auth: ANTHROPIC_BASE_URL=http://alice:PW@host. The client sends the
    password (in the Authorization header, where the gateway wants it); the model's `env` does
    not show it, so it never goes to the API in a request, nor to the terminal or the log.
    In process: bash's environment is made from the lesson's, whichever way it got the URL."""
    def gateway(url):
        if where == ".env":           # the environment would win: the variable stays unset
            (workdir / ".env").write_text(f"ANTHROPIC_BASE_URL={with_userinfo(url)}\n",
                                          encoding="utf-8")
            return None
        return with_userinfo(url)
    script = [reply(tool("bash", {"command": "env"})), reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "show me env", script=script, base_url=gateway,
                                   env={"SEEN_BY_BASH": "yes"})
    assert code == 0 and out.strip() == "done", err
    basic = base64.b64encode(f"alice:{GATEWAY_PASSWORD}".encode()).decode()
    assert api.headers[0].get("authorization") == f"Basic {basic}"     # the gateway got it
    shown_env = tool_results(api.requests[1])[0]["content"]
    assert "SEEN_BY_BASH=yes" in shown_env                             # the model saw env
    kept = [p.read_text(errors="replace") for p in workdir.rglob("*")
            if p.is_file() and p.name != ".env"]
    for seen in (json.dumps(api.requests), out, err, *kept):
        assert GATEWAY_PASSWORD not in seen and GATEWAY_ENCODED not in seen


@pytest.mark.usefixtures("quick_retries")
def test_an_unreachable_endpoint_with_a_password_is_named_with_the_password_hidden(
        run_lesson, nothing_hidden_yet):
    with refusing_port() as port:
        url = with_userinfo(f"http://127.0.0.1:{port}")
        proc, api = run_lesson("s03_todo", "hi", env={"ANTHROPIC_BASE_URL": url},
                               in_process=True)
    assert proc.returncode == 1 and len(messages(proc.stderr)) == 1, proc.stderr
    assert f"cannot reach the API at http://alice:***@127.0.0.1:{port}" in words(proc.stderr)
    assert GATEWAY_ENCODED not in proc.stderr and GATEWAY_PASSWORD not in proc.stderr


@pytest.mark.parametrize("url, shown", [
    ("http://alice:pw@gw.example:8080/api", "http://alice:***@gw.example:8080/api"),
    ("https://alice:p%40ss@gw.example", "https://alice:***@gw.example"),
    ("https://:pw@gw.example", "https://:***@gw.example"),
    ("http://alice:pw@[::1", "http://alice:***@[::1"),          # a URL no parser reads
    ("alice:pw@gw.example:8080", "alice:***@gw.example:8080"),   # no scheme written
    ("http://alice@gw.example", "http://alice@gw.example"),      # a user, no password
    # A password of digits, then an unencoded /, reads like a port and a path: hidden all the
    # same (an @ in a path after a port is rare, and hiding too much is the safe side).
    ("http://alice:2024/Secret@gw.example", "http://alice:***@gw.example"),
    ("http://127.0.0.1:8080/a@b", "http://127.0.0.1:***@b"),
    # A / ? # or @ in a password, not written %2F %3F %23 %40 as it should be: still hidden.
    ("http://u:Sup3r/Secret@proxy.corp:3128", "http://u:***@proxy.corp:3128"),
    ("http://u:a?b#c@d@proxy.corp", "http://u:***@proxy.corp"),
    ("https://api.anthropic.com", "https://api.anthropic.com"),
    # A gateway's token as the user, or in the query: a secret as long as a key is hidden.
    ("https://sk-gw-0123456789abcdef@gw.example/v", "https://***@gw.example/v"),
    ("https://gw.example/v?api_key=sk-gw-0123456789abcdef&v=2",
     "https://gw.example/v?api_key=***&v=2"),
])
def test_shown_url_hides_the_password_and_keeps_the_rest(url, shown):
    assert config.shown_url(url) == shown


def test_child_env_leaves_out_a_base_url_that_holds_a_password_and_its_copies(
        monkeypatch, nothing_hidden_yet):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", with_userinfo("http://gw.example"))
    monkeypatch.setenv("GATEWAY_PASSWORD", GATEWAY_PASSWORD)         # a copy, decoded
    monkeypatch.setenv("PROJECT_SETTING", "passes-through")
    env = config.child_env()
    assert "ANTHROPIC_BASE_URL" not in env and "GATEWAY_PASSWORD" not in env
    assert env["PROJECT_SETTING"] == "passes-through"
    # A password that begins like a port, as the board's address reads it too.
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://alice:2024/Secret@gw.example")
    assert "ANTHROPIC_BASE_URL" not in config.child_env()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://alice@gw.example")   # no password: kept
    assert config.child_env()["ANTHROPIC_BASE_URL"] == "http://alice@gw.example"
    # A token as long as a key, as the user or a query value: the model's `env` showed it.
    for url in ("http://sk-gw-0123456789abcdef@gw.example",
                "http://gw.example/v1?key=sk-gw-0123456789abcdef"):
        monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
        monkeypatch.setenv("TOKEN_COPY", "sk-gw-0123456789abcdef")
        env = config.child_env()
        assert "ANTHROPIC_BASE_URL" not in env and "TOKEN_COPY" not in env


@pytest.mark.parametrize("url", ["http://alice:s3cret-pw@gw.example:0",
                                 "http://alice:s3cret/pw@127.0.0.1:9",      # the parser's words
                                 "alice:s3cret-pw@gw.example:8080",
                                 "ftp://alice:s3cret-pw@gw.example",
                                 "http://alice:s3cret-pw@[::1"])
def test_a_base_url_refused_before_any_request_hides_its_password(url):
    with pytest.raises(SetupError) as caught:
        client.check_base_url(url)
    assert "s3cret" not in str(caught.value) and "alice:***@" in str(caught.value)


@pytest.mark.parametrize("url", ["http://alice:2024/s3cret@127.0.0.1:9",
                                 "http://127.0.0.1:9/v1?tag=a@b"])
def test_a_base_url_an_http_client_reads_another_way_is_refused_saying_how_to_write_it(run_main,
                                                                                      url):
    """Read as the harness reads it (a password up to the last @), such a URL is hidden; read
    as the HTTP client reads it, it names another host and port: the run dialled 127.0.0.1:9
    and blamed a host it never tried."""
    code, out, err, api = run_main(s03_todo, "hi", base_url=lambda _: url)
    assert code == 1 and api.requests == [] and len(messages(err)) == 1, err
    assert "reads two ways" in words(err) and "%2F" in err and "%40" in err
    assert "s3cret" not in err and "Traceback" not in err


def test_every_line_naming_the_endpoint_hides_its_password():
    where = "http://alice:s3cret-pw@gw.example"
    lines = [errors.dropped(TimeoutError("late"), where, 5),
             errors.dropped(ConnectionResetError("reset"), where, 5),
             errors.malformed(where, "an event whose data is not JSON"),
             errors.error_event(Exception("overloaded"), where)]
    for line in lines:
        assert "s3cret-pw" not in line and "http://alice:***@gw.example" in line, line


@pytest.mark.parametrize("name, password", [("HTTPS_PROXY", "Pr0xy-s3cret"),
                                            ("all_proxy", "Pr0xy-s3cret"),
                                            ("HTTPS_PROXY", "Pr0xy/s3cret")],   # not %2F
                         ids=["HTTPS_PROXY", "all_proxy", "a-slash-unencoded"])
def test_a_proxys_password_never_reaches_the_model(run_main, name, password, nothing_hidden_yet):
    """A proxy with a password (http://bob:PW@proxy): a model's innocent `env` showed it, and
    it went to the API in the next request. The variable is left out of the commands' env."""
    script = [reply(tool("bash", {"command": "env"})), reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "show me env", script=script,
                                   env={name: f"http://bob:{password}@127.0.0.1:9",
                                        "NO_PROXY": "127.0.0.1", "SEEN_BY_BASH": "yes"})
    assert code == 0 and out.strip() == "done", err
    shown_env = tool_results(api.requests[1])[0]["content"]
    assert "SEEN_BY_BASH=yes" in shown_env and "s3cret" not in shown_env


KEY = "sk-ant-api03-" + "k3y" * 10      # a key as long as a real one


@pytest.mark.parametrize("status", [401, 400, 500])
def test_a_key_the_endpoint_quotes_back_is_hidden_in_the_error_line(run_main, status):
    """A gateway's refusal may quote the key it was given ("Incorrect API key provided:
    sk-ant-..."): the error line shows *** in its place, the rest of the endpoint's words kept."""
    from harness.stand_in.script import error
    said = f"Incorrect API key provided: {KEY}. You can find your key in the console"
    code, out, err, api = run_main(s03_todo, "hi", script=[error(status, said)] * 3, key=KEY)
    assert code == 1 and KEY not in err, err
    assert "Incorrect API key provided: ***. You can find your key" in words(err)


def test_a_key_quoted_where_the_message_is_cut_shows_none_of_itself(run_main):
    """The message was cut to its 300 characters first: a key quoted at character 250 no
    longer matched whole, and its first 35 characters were printed."""
    from harness.stand_in.script import error
    said = "x" * 250 + f" credential={KEY} rejected"
    code, out, err, api = run_main(s03_todo, "hi", script=[error(401, said)], key=KEY)
    assert code == 1 and KEY[:16] not in err and "credential=***" in err, err


def test_an_endpoints_long_error_message_is_cut_to_a_line_that_keeps_its_advice(run_main):
    """A proxy's 400 holding half a megabyte of text was printed whole, as one line."""
    from harness.stand_in.script import error
    code, out, err, api = run_main(s03_todo, "hi", script=[error(400, "x" * 500_000)])
    assert code == 1 and len(err) < 2_000, len(err)
    assert "the API refused the request (400 xxx" in words(err) and "x…)" in err


def test_a_key_in_a_stream_the_sdk_cannot_read_is_hidden_too(run_main):
    """Not every failure's line is built from the endpoint's error message: a broken event
    is quoted as it came, and a gateway may echo the request's key into one."""
    from harness.stand_in.script import raw
    broken = f"event: message_start\ndata: echo x-api-key={KEY}\n\n"
    code, out, err, api = run_main(s03_todo, "hi", key=KEY,
                                   script=[raw(200, broken, "text/event-stream")])
    assert code == 1 and KEY[:16] not in err, err
    assert "data is not JSON: echo x-api-key=***" in words(err), err


@pytest.mark.parametrize("name, value", [("ANTHROPIC_API_KEY", "sk-ant-api03-abc "),
                                         ("ANTHROPIC_API_KEY", "sk-ant-\napi03"),
                                         ("ANTHROPIC_AUTH_TOKEN", "tok\ten"),
                                         ("ANTHROPIC_API_KEY", "sk\u2013ant-api03")],
                         ids=["a-trailing-space", "a-line-break", "a-tab", "an-en-dash"])
def test_a_key_with_a_space_or_line_break_is_named_not_blamed_on_the_network(run_main, name,
                                                                            value):
    """The HTTP library refuses such a header, and the error said "cannot reach the API: check
    ANTHROPIC_BASE_URL and your network"; a key pasted with its line end is common."""
    code, out, err, api = run_main(s03_todo, "hi", script=[reply(text("never"))], key=None,
                                   env={name: value})
    assert code == 1 and api.requests == [], err
    assert messages(err) == [f"error: {name} holds a space, a tab, a line break or a character "
                             "no key has (a key is plain ASCII): remove it where you set it"]
    assert value.strip() not in err


def test_the_advice_to_go_on_shows_a_board_password_as_stars():
    """The stopped run's advice repeats --board; a password in it stays out, in the userinfo
    or in the query (the URL's own masking missed password=). Pasted as it was, the server
    refused "***" as the password: the advice says where the password goes."""
    lesson = cli.Lesson("s07_task_system", "", None)
    for given, shown in (("postgresql://agents:Tr0ub4dor@db.example/board",
                          "postgresql://agents:***@db.example/board"),
                         ("postgresql://agents@db.example/board?password=Tr0ub4dor",
                          "postgresql://agents@db.example/board?password=***")):
        advice = cli._go_on(lesson, argparse.Namespace(board=given, prompt="plan it"))
        assert advice == (f"python s07_task_system.py --board '{shown}' --continue \"go on\" "
                          "(with the board's password where it shows ***)")
    given = "postgresql://agents@db.example/board"              # no password: nothing to say
    advice = cli._go_on(lesson, argparse.Namespace(board=given, prompt="plan it"))
    assert advice == f"python s07_task_system.py --board {given} --continue \"go on\""

