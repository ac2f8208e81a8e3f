"""Where the harness's secrets may go: the board's address, bash's environment, the command line.

- A board address is a folder, a PostgreSQL URL (any case, SQLAlchemy's +driver too) or one
  clear line: never a folder named after a URL, password and all, that the model then reads.
- No command the agent runs inherits a secret of the harness: the API key and token, TASK_BOARD,
  or any variable that holds the board's password (checked through s07 run as a user runs it:
  the model's `env` must not carry the password to the API).
- The board's password can be given without the command line (TASK_BOARD, a password file, a
  service file), and `--board` with a password says so in one line.

The PostgreSQL tests need a server (tests/pg_server.py); without one they skip with one line,
and with CI=true they fail.
"""

import secrets
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

from harness.board import open_store
from harness.board.folder import TaskFiles
from harness.errors import SetupError
from harness.stand_in_api import reply, text
from s07_task_system import TaskManager
import test_board_contract as contract
from test_board_postgres import role_with_schema

pg_url = contract.pg_url      # the fixture: a server for the session
sql = contract.sql


@pytest.fixture
def agent(pg_url):
    """A role of its own, with a password, that owns a schema of its own: a board no other test
    shares. url(...) spells its address; the password is long and random, so that finding it
    anywhere means it leaked."""
    password = f"pw{secrets.token_hex(12)}"
    with role_with_schema(pg_url, password) as (role, schema):
        server = urlsplit(pg_url)
        where = f"{server.hostname}:{server.port}{server.path}?options=-csearch_path%3D{schema}"

        def url(scheme="postgresql", with_password=True):
            user = f"{role}:{password}" if with_password else role
            return f"{scheme}://{user}@{where}"
        yield SimpleNamespace(role=role, password=password, schema=schema, url=url,
                              host=server.hostname, port=server.port,
                              database=server.path.lstrip("/"),
                              admin=f"{pg_url}?options=-csearch_path%3D{schema}")


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


def test_a_folder_whose_name_holds_a_colon_and_slashes_is_written_as_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for address in ("./odd://name", str(tmp_path / "abs://name"), "sub/dir://x", ".tasks"):
        tasks = TaskManager(address)
        assert isinstance(tasks.store, TaskFiles)
        tasks.create("Design")
    # A path's // is one /: ./odd://name is the folder name inside the folder odd:
    made = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("task_1.json"))
    assert made == [".tasks/task_1.json", "abs:/name/task_1.json", "odd:/name/task_1.json",
                    "sub/dir:/x/task_1.json"]


def test_a_path_object_is_always_a_folder(tmp_path):
    assert isinstance(open_store(tmp_path / "postgresql:" / "x"), TaskFiles)


def test_a_refused_board_in_task_board_stops_s07_before_any_request_or_folder(run_lesson, workdir):
    board = "mysql://me:Tr0ub4dor@db.example/board"
    proc, api = run_lesson("s07_task_system", "plan it", env={"TASK_BOARD": board},
                           script=[reply(text("never asked"))])
    assert proc.returncode == 1 and api.requests == [] and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "Tr0ub4dor" not in proc.stderr
    assert "error: the board mysql://me:***@db.example/board is neither" in proc.stderr
    assert list(workdir.iterdir()) == []


def test_a_refused_board_in_the_flag_stops_s07_with_one_line(run_lesson, workdir):
    proc, api = run_lesson("s07_task_system", "--board", "ftp://db.example/board", "plan it")
    assert proc.returncode == 1 and api.requests == []
    assert proc.stderr.strip() == ("error: the board ftp://db.example/board is neither a folder "
                                   "nor a PostgreSQL URL (ftp:// is not a board): give a folder "
                                   "(.tasks) or postgresql://user@host/database; write ./NAME "
                                   "for a folder whose name holds ://")
    assert list(workdir.iterdir()) == []
