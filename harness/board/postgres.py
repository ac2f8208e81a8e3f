"""The PostgreSQL board: s07's tasks as rows of one table, shared by agents on many machines.

Relied on by s07 when --board or TASK_BOARD is a postgresql:// URL (open_store imports this
module only then, so psycopg is needed only then), and by live.py and checklist.py. It keeps
the promises of s07's TaskFolder (TaskStore, below), so TaskManager's logic is the same.
Without each piece:
- one transaction per locked(): an error between a completion's write and _clear_dependency's
  left a task done and its dependents waiting; a failed /task import left items behind.
- the row lock on task_board's one row (SELECT ... FOR UPDATE), the board's only lock: two
  agents completing blockers at once each rewrote the same dependent, and one clear was lost.
  The server drops it at commit, at rollback and when a connection dies; a hand edit in psql
  needs it too (its trigger updates that row).
- read committed on every connection: a database set to serializable refused most changes of
  agents working at once ("could not serialize access"). _connection's IDLE_CHECK: after a
  restart or an idle timeout, the next call failed though the server was back.
- lock_timeout and statement_timeout: a psql session left holding a lock made every agent
  wait forever, in silence; now after LOCK_TIMEOUT s the call fails in one line naming that
  session, and nothing was changed.
- INSERT ... ON CONFLICT DO NOTHING (reserve()): two creators got the same id.
- the constraints: a hand-written INSERT put a row on the board that every tool tripped over.
- rows that still cannot be used (a constraint dropped by hand) become "!" lines, never
  repaired, and the rest works.
- the high-water mark (task_board.high_water, kept by a trigger on DELETE and TRUNCATE):
  deleting the last row in psql gave its id to the next task, and what waited for the
  deleted one waited for the new one.
- the schema made under a session advisory lock: two agents starting at once on an empty
  database both ran CREATE, and one failed.
- config.hide_from_commands(the password libpq used): the model's `env` showed it.
- _loose_password_file: libpq ignores a ~/.pgpass that others can read, and the user heard
  only "no password supplied"; now one line names the file and chmod 600.
- one-line errors without the password (shown(), secrets_in()): a server down, a wrong
  password or a missing psycopg was a traceback; a password holding ? # or / was shown.
- client_encoding UTF8 on every connection: on a SQL_ASCII database psycopg gave bytes for
  text, and every task was unreadable once written; on LATIN1 an emoji failed in Python's
  codec, in a line naming no board. Now the server converts, or refuses in one line.
- _cannot_create: a role that may not create in its schema (PostgreSQL 15's public, for a
  new role) or a search_path naming no schema that exists was a traceback; now one line
  gives the GRANT or CREATE SCHEMA to run.

The cache. scan() keeps the board with its generation (a counter in task_board that a trigger
moves once per transaction that changes rows, TRUNCATE too) and a fingerprint (the row count
and the sum of the rows' xmin). A change through the triggers, by any program, moves the
generation; one with the triggers off (DISABLE TRIGGER, session_replication_role = replica)
changes the fingerprint, which every rechecking scan (a listing, task_get, the cycle check)
compares in one aggregate query. load() reads the row now, so an update never writes back
what a TRUNCATE or a trigger-less delete removed. Not seen: a trigger-less change, by a scan
without recheck (the session page's graph) until the next rechecking one; a change that keeps
the count and the xmin sum (it takes chosen transaction ids); and with the triggers off, the
live board hears nothing and the high-water mark is not kept (the max-scan still is).

What the database gives that the folder builds by hand: atomic groups of writes (the folder
replaces one file at a time), constraints on every write (the folder checks every read),
durability (commits are fsync'ed; the folder does not fsync), and one server for many machines
(a network file system's locks are unreliable).
"""

import os
import stat
import threading
import time
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Collection, Iterator, Optional, Protocol
from urllib.parse import parse_qs, urlsplit

from harness import config
from harness.errors import SetupError, connect_problem, first_line
from harness.board import password_in, secrets_in, shown, text
from harness.board.record import DESCRIPTION_MAX, MAX_ID, SUBJECT_MAX, STATUSES, now, task_problem

CONNECT_TIMEOUT = 5           # seconds: a server that does not answer is reported, not waited for
LOCK_TIMEOUT = 5.0            # seconds an agent waits for a lock another session holds
STATEMENT_TIMEOUT = 60.0      # seconds one statement may run: a backstop no board's work comes near
IDLE_CHECK = 5.0              # seconds unused after which a connection is asked if it is still up
SCHEMA_LOCK = 0x7461736B << 32  # "task": the advisory lock key held while the tables are made
SCHEMA_VERSION = "s07 task board, schema 2"   # the comment on task_board: which schema it has
INSTALL = "python -m pip install -r requirements-postgres.txt"
_STATUS_LIST = ", ".join(f"'{s}'" for s in STATUSES)
_IDS_OK = "array_position({0}, NULL) IS NULL AND 1 <= ALL ({0}) AND {1} > ALL ({0})".format

# Created if missing, or brought up to date, all in one transaction. task_board holds one row:
# the generation (our cache is current while it is unchanged) and the high-water mark.
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS tasks (
    id          bigint PRIMARY KEY CHECK (id >= 1 AND id < {MAX_ID}),
    subject     text NOT NULL CHECK (btrim(subject) <> '' AND length(subject) <= {SUBJECT_MAX}),
    description text NOT NULL CHECK (length(description) <= {DESCRIPTION_MAX}),
    status      text NOT NULL CHECK (status IN ({_STATUS_LIST})),
    blocked_by  bigint[] NOT NULL CHECK ({_IDS_OK('blocked_by', MAX_ID)}
                                         AND id <> ALL (blocked_by)),
    owner       text CHECK (owner <> ''),
    unblocked   bigint[] CHECK ({_IDS_OK('unblocked', MAX_ID)}),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS task_board (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    generation  bigint NOT NULL DEFAULT 0
);
ALTER TABLE task_board ADD COLUMN IF NOT EXISTS high_water bigint NOT NULL DEFAULT 0;
INSERT INTO task_board DEFAULT VALUES ON CONFLICT DO NOTHING;
UPDATE task_board SET high_water = greatest(high_water, (SELECT max(id) FROM tasks));

-- Each changed row: one step of the generation per transaction (a flag local to the
-- transaction says it was taken: a step per row would make a 20,000-task import slow down
-- as it goes), and a notification, which listeners hear only after the commit.
CREATE OR REPLACE FUNCTION task_board_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('task_board.changed_' || TG_RELID, true) IS DISTINCT FROM 'yes' THEN
        UPDATE task_board SET generation = generation + 1;
        PERFORM set_config('task_board.changed_' || TG_RELID, 'yes', true);
    END IF;
    PERFORM pg_notify('task_board_' || TG_RELID, json_build_object(
        'op', TG_OP, 'id', coalesce(NEW.id, OLD.id),
        'agent', nullif(current_setting('task_board.agent', true), ''),
        'status', NEW.status, 'owner', NEW.owner, 'blocked_by', NEW.blocked_by[1:50],
        'was_status', OLD.status, 'was_owner', OLD.owner,
        'was_blocked_by', OLD.blocked_by[1:50])::text);
    RETURN NULL;
END $$;

-- Ids leave the table only by DELETE and TRUNCATE: remember the largest, never to give it again.
-- A TRUNCATE also moves the generation (the row trigger does not fire for it) and is told.
CREATE OR REPLACE FUNCTION task_board_forgets() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE task_board SET high_water = greatest(high_water, (SELECT max(id) FROM gone));
    ELSE
        UPDATE task_board SET generation = generation + 1,
                              high_water = greatest(high_water, (SELECT max(id) FROM tasks));
        PERFORM pg_notify('task_board_' || TG_RELID, json_build_object('op', 'TRUNCATE')::text);
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS task_board_changed ON tasks;
CREATE TRIGGER task_board_changed AFTER INSERT OR UPDATE OR DELETE ON tasks
    FOR EACH ROW EXECUTE FUNCTION task_board_changed();
DROP TRIGGER IF EXISTS task_board_deleted ON tasks;
CREATE TRIGGER task_board_deleted AFTER DELETE ON tasks REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION task_board_forgets();
DROP TRIGGER IF EXISTS task_board_truncated ON tasks;
CREATE TRIGGER task_board_truncated BEFORE TRUNCATE ON tasks
    FOR EACH STATEMENT EXECUTE FUNCTION task_board_forgets();
COMMENT ON TABLE task_board IS '{SCHEMA_VERSION}';
"""
COLUMNS = "id, subject, description, status, blocked_by, owner, unblocked, created_at, updated_at"
XMIN = "xmin::text::bigint"   # the transaction that last wrote the row: the fingerprint's part
SELECT = ("SELECT id, subject, description, status, blocked_by, owner, unblocked, "
          + ", ".join(f"""to_char({c} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')"""
                      for c in ("created_at", "updated_at")) + f", {XMIN} FROM tasks")
INSERT = (f"INSERT INTO tasks ({COLUMNS}) VALUES (%s, %s, %s, %s, %s::bigint[], %s, %s::bigint[], "
          "%s::timestamptz, %s::timestamptz) ON CONFLICT (id) ")
REPLACE = (INSERT + "DO UPDATE SET "
           + ", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS.split(", ")[1:])
           + f" RETURNING {XMIN}")
RESERVE = INSERT + f"DO NOTHING RETURNING {XMIN}"
# The board's lock: its one row, held to the end of the transaction. set_config names us to the
# trigger, for the other agents' live boards.
HOLD = ("SELECT generation, set_config('task_board.agent', %s, true) FROM task_board "
        "FOR UPDATE")
# A row deleted by hand comes back at a generation no cache holds (the clock, in microseconds,
# is above any count of changes).
REMAKE = ("INSERT INTO task_board (generation) VALUES "
          "((extract(epoch FROM clock_timestamp()) * 1000000)::bigint) ON CONFLICT DO NOTHING")
SUMS = f"count(*), coalesce(sum({XMIN}), 0)::bigint FROM tasks"   # the row count, the xmin sum
FINGERPRINT = f"SELECT {SUMS}"
# Outside the lock: the generation, and with it (recheck) the fingerprint, in one round trip.
GENERATION = "SELECT (SELECT generation FROM task_board)"
CHANGED = f"SELECT (SELECT generation FROM task_board), {SUMS}"
# What s07's max-scan needs, in one round trip: every id (an unusable row's too) and the mark.
NUMBERS = ("SELECT (SELECT coalesce(array_agg(id), '{}') FROM tasks WHERE id < %(max)s), "
           "coalesce((SELECT high_water FROM task_board "
           "WHERE high_water BETWEEN 0 AND %(max)s - 1), 0)")
# Where the tables would be made: the role, the schema search_path selects (NULL when none
# exists or may be used), and search_path itself, as the URL or the server set it.
WHERE_TO_CREATE = ("SELECT quote_ident(current_user), quote_ident(current_schema()), "
                   "current_setting('search_path')")
# Who holds a lock on the board's tables (for the one line a busy board gives).
HOLDERS = ("SELECT a.pid, a.usename, a.application_name, a.state FROM pg_stat_activity a "
           "WHERE a.pid <> pg_backend_pid() AND a.pid IN (SELECT l.pid FROM pg_locks l "
           "WHERE l.granted AND l.relation = ANY (%s)) ORDER BY a.xact_start LIMIT 3")


def _unreadable(url: str) -> bool:
    """A user or password holding / or @: libpq ends the user part at the first of them, so it
    reads a piece of the password as a host or a port, and its error would show that piece."""
    user_part = url.partition("://")[2].rpartition("@")[0]
    return ":" in user_part and ("/" in user_part or "@" in user_part)


def _loose_password_file(url: str) -> Optional[Path]:
    """The password file libpq would read for this URL, if others can read it (libpq would
    ignore it); None when a password may come from elsewhere (the URL, PGPASSWORD, a service
    file: then libpq decides)."""
    try:
        query = parse_qs(urlsplit(url).query)
    except ValueError:           # a URL urlsplit cannot read (http://[::1): libpq says why
        return None
    given = ("password" in query or "service" in query or password_in(url)
             or os.environ.get("PGPASSWORD") or os.environ.get("PGSERVICE"))
    if given:
        return None
    named = query.get("passfile", [""])[-1] or os.environ.get("PGPASSFILE")
    path = Path(named or os.path.expanduser("~/.pgpass"))   # no home: "~/.pgpass", not found
    try:
        mode = path.stat().st_mode
    except OSError:              # no such file (libpq goes on without one), or not ours to read
        return None
    if stat.S_ISREG(mode) and mode & 0o077:
        return path
    return None


def _psycopg(name: str):
    try:
        import psycopg
        return psycopg
    except ImportError as exc:  # not installed, or installed without a libpq to use
        raise SetupError(f"the board {name} needs psycopg ({first_line(exc)}): {INSTALL}") from None


class TaskStore(Protocol):
    """What TaskManager relies on from a board; s07's TaskFolder keeps it, and so does this one.

    - locked(): while it is held, no other process (on any machine) changes the board.
      TaskManager takes it around every read-modify-write; it is not re-entrant. An exception
      inside (Ctrl-C too) removes every task reserve() made in it; PostgreSQL also undoes
      every write(), the folder cannot (it replaces one file at a time, atomically).
    - write(task) replaces a task whole; a reader never sees half of it. Only under locked().
    - reserve(task) creates a task only if its id is free: False if another process took that
      id first (then work out the next id again). Only under locked().
    - load(id) reads it now, or ValueError (missing, or corrupt: the message says which);
      try_load(id) is load() or None.
    - scan(recheck) -> (every readable task by id, in id order; a line per record that cannot
      be used: never an exception, never repaired). recheck=True also sees a change made
      behind the store's back (a hand edit). Without it, under locked(), it answers from
      memory when it can: no other agent wrote since the last scan.
    - ids(): the id of every record below MAX_ID, corrupt ones too: a read-only view, in no
      order, that s07's max-scan takes the largest of before every create. Cheap when
      nothing changed.
    - high_water(): the largest id this board ever gave, or 0, so that a task removed by hand
      does not give its id to a new one. The folder's is read only under locked(). A missing
      or hand-edited mark is ignored where it would send ids backwards or past MAX_ID.
    - name: the board as shown (a URL's password as ***); agent: who writes, when known
      (PostgreSQL tells other agents' live boards).
    """

    name: str
    agent: Optional[str]

    def locked(self) -> AbstractContextManager: ...
    def write(self, task: dict) -> None: ...
    def reserve(self, task: dict) -> bool: ...
    def load(self, task_id: int) -> dict: ...
    def try_load(self, task_id: int) -> Optional[dict]: ...
    def scan(self, recheck: bool = False) -> tuple: ...
    def ids(self) -> Collection[int]: ...
    def high_water(self) -> int: ...


class PostgresTasks:
    """The table of tasks: a TaskStore for agents on any machine that reaches the server."""

    def __init__(self, url: str):
        self._url, self.name = url, shown(url)
        self.agent = None                # who writes, when known: live.py names them
        self.backend_pids = set()        # our sessions on the server: live.py skips their news
        self._mutex = threading.RLock()  # one connection: one thread at a time uses it
        # The cache: usable tasks, a line per unusable row, each row's xmin, and as of when.
        self._tasks, self._problems, self._xmins = {}, {}, {}
        self._generation = None          # the generation the cache is the board of; None: stale
        self._fingerprint = None         # (row count, xmin sum) of the board the cache holds
        self._locked_at = None           # under locked(): the generation when we took the lock
        self._in_sync = False            # under locked(): the cache is the board, our writes in it
        self._wrote = False              # under locked(): a row was written in this transaction
        self._ids = None                 # ids() and high_water(), as of a generation (or None)
        loose = _loose_password_file(url)
        if loose:
            raise SetupError(f"the password file {loose} is ignored: others can read it; "
                             f"chmod 600 {loose}, and it gives the board {self.name} its password")
        self._conn = self._open(SetupError)
        try:             # s07 stops in one line on a SetupError; any other error is a traceback
            self._ensure_schema()
            with self._talking("find the tables"):
                self._oids = self._conn.execute("SELECT 'tasks'::regclass::oid::bigint, "
                                                "'task_board'::regclass::oid::bigint").fetchone()
        except (SetupError, ValueError) as exc:
            self._conn.close()   # an agent that cannot use the board keeps no session on it
            raise SetupError(str(exc)) from None
        self.channel = f"task_board_{self._oids[0]}"

    # ------------------------------------------------------------ connecting

    def _open(self, error=ValueError):
        """A new autocommit connection (locked() opens each transaction), or one clear line."""
        psycopg = _psycopg(self.name)
        try:
            # UTF8 whatever the database's encoding: on SQL_ASCII psycopg would give bytes for
            # text (every task unreadable), and on LATIN1 Python's codec refused an emoji in a
            # line naming no board. Now the server converts, or refuses what it cannot hold.
            conn = psycopg.connect(self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT,
                                   client_encoding="UTF8")
        except psycopg.Error as exc:
            if _unreadable(self._url):   # libpq's own message would show a piece of the password
                raise error(f"cannot open the board {self.name}: libpq cannot read its URL; "
                            "write a / or @ in the user name or password as %2F or %40") from None
            raise error(connect_problem(exc, self.name, secrets_in(self._url))) from None
        self.backend_pids.add(conn.info.backend_pid)
        # Wherever libpq found it (the URL, PGPASSWORD, a password file, a service file).
        config.hide_from_commands(conn.info.password)
        # Read committed, whatever the database's default: the row lock on task_board orders
        # the writers; under serializable, agents at once had most changes refused.
        conn.execute("SELECT set_config('lock_timeout', %s, false), "
                     "set_config('statement_timeout', %s, false), "
                     "set_config('default_transaction_isolation', 'read committed', false)",
                     (f"{LOCK_TIMEOUT * 1000:.0f}ms", f"{STATEMENT_TIMEOUT * 1000:.0f}ms"))
        self._used = time.monotonic()
        return conn

    def _connection(self):
        """Our connection; a new one if the server dropped the old: a restart, its
        idle_session_timeout, a proxy that closes idle connections. One unused for IDLE_CHECK
        seconds is asked first (closed shows only once a use has failed)."""
        if not self._conn.closed and time.monotonic() - self._used > IDLE_CHECK:
            with suppress(_psycopg(self.name).OperationalError):
                self._conn.execute("SELECT 1")
        if self._conn.closed:
            self._conn = self._open()
        self._used = time.monotonic()
        return self._conn

    def _ensure_schema(self):
        """Make the tables if missing, or bring an older board up to date; never touch a table
        called tasks that some other program made."""
        # Made, and still whole: a DROP TABLE tasks (to start over) makes it again.
        version = ("SELECT obj_description(to_regclass('task_board'), 'pg_class'), "
                   "to_regclass('tasks') IS NOT NULL")
        with self._talking("read the tasks"):
            if self._conn.execute(version).fetchone() == (SCHEMA_VERSION, True):
                return
        # A session's lock, not a transaction's: after the wait, a new transaction sees the
        # tables another agent just made (one that waited inside a transaction could make
        # them again, and deadlock with an agent using them).
        errors = _psycopg(self.name).errors
        with self._talking("create the tables"):
            self._conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
            try:
                if self._conn.execute(version).fetchone() == (SCHEMA_VERSION, True):
                    return               # another agent made it while we waited
                with self._conn.transaction():
                    theirs = self._conn.execute("SELECT to_regclass('tasks') IS NOT NULL AND "
                                                "to_regclass('task_board') IS NULL").fetchone()[0]
                    if theirs:
                        raise SetupError(f"the database of the board {self.name} already has a "
                                         "table 'tasks' that is not a task board: use another "
                                         "database, or a schema of its own")
                    self._conn.execute(SCHEMA)   # IF NOT EXISTS throughout: safe on an older board
            except errors.InvalidSchemaName as exc:      # search_path selects no schema
                raise SetupError(self._cannot_create(exc)) from None
            except errors.InsufficientPrivilege as exc:  # or "must be owner of table tasks"
                if not first_line(exc).startswith("permission denied for schema"):
                    raise
                raise SetupError(self._cannot_create(exc)) from None
            finally:
                if not self._conn.closed:
                    self._conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))

    def _cannot_create(self, exc) -> str:
        """One line for a schema the tables cannot be made in, with the SQL that lets them be:
        the role may not create there (PostgreSQL 15's schema public, for a new role), or
        search_path names a schema that does not exist (or that the role may not even use)."""
        line = f"could not create the tables of the board {self.name}: {first_line(exc)}"
        nowhere = f"{line}; name a schema of its own in the URL (?options=-csearch_path%3Dname)"
        try:
            user, schema, path = self._conn.execute(WHERE_TO_CREATE).fetchone()
            first = path.split(",")[0].strip()       # as written: quoted where SQL needs it
            schema = schema or (user if first in ('"$user"', "$user") else first)
            if not schema:
                return nowhere
            exists = self._conn.execute("SELECT to_regnamespace(%s) IS NOT NULL",
                                        (schema,)).fetchone()[0]
        except _psycopg(self.name).Error:   # a name in search_path that SQL cannot read
            return nowhere
        if exists:
            grant = f"GRANT USAGE, CREATE ON SCHEMA {schema} TO {user}"
            return f"{line}; let its user create them ({grant})"
        return f"{line}; create the schema (CREATE SCHEMA {schema} AUTHORIZATION {user})"

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def _talking(self, doing: str) -> Iterator[None]:
        """A database error becomes one line saying what we were doing, on which board."""
        psycopg = _psycopg(self.name)
        try:
            yield
        except psycopg.Error as exc:
            self._generation = None      # what we cached may have been rolled back
            self._in_sync = False
            busy = (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled)
            if self._locked_at is not None and isinstance(exc, busy):
                raise                    # locked() says it, after the rollback, with who holds it
            raise ValueError(self._problem(exc, doing)) from None

    def _problem(self, exc, doing: str, tail: str = "nothing was changed") -> str:
        """One line for a database error: a busy board names who holds it."""
        errors = _psycopg(self.name).errors
        if isinstance(exc, errors.LockNotAvailable):
            return (f"could not {doing}: the board {self.name} is busy: "
                    f"{self._holders()} has held a lock on it for over {LOCK_TIMEOUT:g} s; "
                    f"{tail}. Try again in a while, or ask whoever runs that session to end "
                    "its transaction (COMMIT or ROLLBACK)")
        if isinstance(exc, errors.QueryCanceled):
            return (f"could not {doing} on the board {self.name}: the server stopped it after "
                    f"{STATEMENT_TIMEOUT:g} s (statement_timeout); {tail}")
        return f"could not {doing} on the board {self.name}: {first_line(exc)}; {tail}"

    def _holders(self) -> str:
        """The sessions holding a lock on the board's tables, as `session 4242 (postgres, psql,
        idle in transaction)`, or a hint where to look. Best effort: never raises."""
        try:
            with self._mutex:
                rows = self._connection().execute(HOLDERS, (list(self._oids),)).fetchall()
        except Exception:  # noqa: BLE001 - a hint for the error line, never a second error
            rows = []
        if not rows:
            return "another session (look for 'idle in transaction' in pg_stat_activity)"
        named = []
        for pid, user, application, state in rows:
            about = ", ".join(str(part) for part in (user, application, state) if part)
            named.append(f"session {pid} ({about})" if about else f"session {pid}")
        return " or ".join(named)

    # ------------------------------------------------------------ the lock: one transaction

    @contextmanager
    def locked(self):
        """One transaction holding task_board's row FOR UPDATE: while it is held the board
        changes only by our writes (or a session with the triggers off, which the fingerprint
        catches later). An exception inside undoes every write. Not re-entrant."""
        psycopg = _psycopg(self.name)
        with self._mutex:
            conn, committing = self._connection(), False
            try:
                with conn.transaction():
                    self._hold(conn)
                    yield
                    committing = True    # the body is done: what fails now is the COMMIT
            except BaseException as exc:
                self._generation = self._ids = None   # they hold writes that were rolled back
                if not isinstance(exc, psycopg.Error):
                    raise
                if committing:
                    tail = "the change may or may not have been saved: list the board to see"
                    raise ValueError(self._problem(exc, "commit the change", tail)) from None
                raise ValueError(self._problem(exc, "make the change")) from None
            finally:
                in_sync, wrote, self._locked_at = self._in_sync, self._wrote, None
                self._in_sync = self._wrote = False
        if in_sync and wrote:            # the trigger moved the generation once for our commit
            self._generation += 1
        if wrote and self._ids is not None:
            self._ids["generation"] += 1     # likewise: the ids hold our own writes

    def _hold(self, conn) -> None:
        row = conn.execute(HOLD, (self.agent or "",)).fetchone()
        if row is None:                  # its one row was deleted by hand: make it again
            conn.execute(REMAKE)
            row = conn.execute(HOLD, (self.agent or "",)).fetchone()
        self._locked_at, self._wrote = row[0], False
        self._in_sync = self._generation == row[0]
        if self._ids is not None and self._ids["generation"] != row[0]:
            self._ids = None             # another agent changed the board since

    # ------------------------------------------------------------ writing

    def write(self, task: dict) -> None:
        """Replace a task whole (or add it): one statement, so a reader sees old or new."""
        self._put(task, REPLACE)

    def reserve(self, task: dict) -> bool:
        """Add a task only if its id is free (ON CONFLICT DO NOTHING). False if it is taken."""
        return self._put(task, RESERVE)

    def _put(self, task: dict, sql: str) -> bool:
        assert self._locked_at is not None, "tasks are written only under the board's lock"
        task = {**task, "updated_at": now()}
        problem = task_problem(task, task["id"])   # the folder's refusal, in the same words
        if problem:
            raise ValueError(f"task #{task['id']} cannot be saved: {problem}")
        params = (task["id"], task["subject"], task["description"], task["status"],
                  task["blockedBy"], task["owner"], task.get("unblocked"), task["created_at"],
                  task["updated_at"])
        with self._talking(f"save task #{task['id']}"):
            row = self._connection().execute(sql, params).fetchone()
        if row is None:                  # reserve() lost: that id is taken, by a row we did not
            self._ids = None             # count: ask the table again
            return False
        self._wrote = True
        if self._ids is not None:
            self._ids["ids"][task["id"]] = None
        if self._in_sync:                # the cache is the board: keep it so, fingerprint too
            self._remember(task, row[0])
        return True

    def _remember(self, task: dict, xmin: int) -> None:
        tid, (count, total) = task["id"], self._fingerprint
        new = tid not in self._xmins
        if new and self._tasks and tid < next(reversed(self._tasks)):
            self._tasks[tid] = task
            self._tasks = dict(sorted(self._tasks.items()))   # a new id below the largest
        else:
            self._tasks[tid] = task      # a replaced task keeps its place: the order holds
        self._problems.pop(tid, None)
        self._fingerprint = (count + new, total - self._xmins.get(tid, 0) + xmin)
        self._xmins[tid] = xmin

    # ------------------------------------------------------------ reading

    def ids(self):
        """One query, then remembered under the lock, and across locks while the generation
        holds: creating thousands of tasks asks the table once."""
        return self._numbers()["ids"].keys()

    def high_water(self) -> int:
        """The largest id that ever left the table (the trigger keeps it), or 0."""
        return self._numbers()["mark"]

    def _numbers(self) -> dict:
        """{"generation", "ids", "mark"}; remembered only under the lock (see ids())."""
        if self._locked_at is not None and self._ids is not None:
            return self._ids
        with self._mutex, self._talking("find the task ids"):
            ids, mark = self._connection().execute(NUMBERS, {"max": MAX_ID}).fetchone()
        numbers = {"generation": self._locked_at, "ids": dict.fromkeys(ids), "mark": mark}
        if self._locked_at is not None:
            self._ids = numbers
        return numbers

    def load(self, task_id: int) -> dict:
        """Read now, never from the cache (TaskStore.load)."""
        with self._mutex, self._talking(f"read task #{task_id}"):
            row = self._connection().execute(SELECT + " WHERE id = %s", (task_id,)).fetchone()
        if row is None:
            existing = text.existing(self.scan()[0], task_id)
            raise ValueError(f"no task #{task_id}; existing tasks: {existing}")
        task, problem = self._task(row)
        if problem:
            raise ValueError(problem)
        return task

    def try_load(self, task_id: int) -> Optional[dict]:
        try:
            return self.load(task_id)
        except ValueError:
            return None

    def scan(self, recheck: bool = False) -> tuple:
        """The cache while it is the board (under the lock: it was current when the lock was
        taken; outside it: the generation has not moved; recheck also compares the
        fingerprint), else the whole table, once."""
        with self._mutex, self._talking("read the tasks"):
            conn = self._connection()
            if self._locked_at is not None:      # the generation cannot move while we hold it
                generation, fresh = self._locked_at, self._in_sync
                if fresh and recheck:
                    fresh = tuple(conn.execute(FINGERPRINT).fetchone()) == self._fingerprint
            else:                                # None when its row was deleted by hand
                now = conn.execute(CHANGED if recheck else GENERATION).fetchone()
                generation = now[0]
                fresh = generation is not None and generation == self._generation
                if fresh and recheck:
                    fresh = tuple(now[1:]) == self._fingerprint
            if not fresh:
                rows = conn.execute(SELECT + " ORDER BY id").fetchall()   # as new as generation
                self._fill(rows, generation)
            return dict(self._tasks), sorted(self._problems.values())

    def _fill(self, rows: list, generation: Optional[int]) -> None:
        tasks, problems, xmins = {}, {}, {}
        for row in rows:
            task, problem = self._task(row)
            xmins[row[0]] = row[-1]
            if problem:
                problems[row[0]] = problem
            else:
                tasks[task["id"]] = task
        self._tasks, self._problems, self._xmins = tasks, problems, xmins
        self._fingerprint = (len(rows), sum(xmins.values()))
        self._generation = generation
        if self._locked_at is not None:
            self._in_sync = True         # read inside our transaction: our writes keep it so

    def _task(self, row: tuple) -> tuple:
        """(the Task, None) or (None, a line saying why this row cannot be used)."""
        tid, subject, description, status, blocked_by, owner, unblocked, created, updated = row[:9]
        task = dict(id=tid, subject=subject, description=description, status=status,
                    blockedBy=blocked_by, owner=owner, created_at=created, updated_at=updated)
        if unblocked is not None:
            task["unblocked"] = unblocked
        problem = task_problem(task, tid)
        if problem is None and (created is None or updated is None):
            problem = "fields 'created_at' and 'updated_at' must be set"
        if problem:
            return None, (f"task #{tid} on the board {self.name} is unreadable (not a valid task: "
                          f"{problem}); it was left as it is")
        return task, None

    # ------------------------------------------------------------ the live board

    def listen(self):
        """A second connection that LISTENs on this board's channel (live.py reads it)."""
        conn = self._open()
        conn.execute(f"LISTEN {self.channel}")   # task_board_<oid>: a plain identifier
        return conn
