"""The PostgreSQL board: s07's tasks as rows of one table, shared by agents on many machines.

Relied on by s07 when --board or TASK_BOARD is a postgresql:// URL (task_record.open_store imports
this module only then, so psycopg is needed only then), and by live_board.py. It keeps the TaskStore
promises of the folder (board_files.py), so TaskManager's logic is the same. Without each piece:
- one transaction per operation (locked()): an error between a completion's write and
  _clear_dependency's writes leaves a task done and its dependents still waiting; here the
  server undoes the whole operation.
- the advisory lock inside it (pg_advisory_xact_lock): two agents completing blockers at once
  each rewrite the same dependent, and one clear is lost. The server drops the lock at commit,
  at rollback and when a connection dies, so a killed agent never leaves the board locked.
- INSERT ... ON CONFLICT DO NOTHING for a new id: two creators get the same id and one overwrites.
- the constraints (CHECK on status, the id range, the blockers, text lengths): a hand-written
  INSERT would put a row on the board that every tool then trips over.
- flagging rows that still cannot be used (after a constraint was dropped by hand): like a
  corrupt file, such a row becomes a "!" line, is never repaired, and the rest works.
- the generation counter (a trigger counts every change, even one made in psql): without it
  every completion on a board of 10,000 tasks fetches all 10,000 rows to find the dependents.
- the trigger's NOTIFY: the live board (live_board.py) hears of changes instead of polling.
- the schema made under a lock, if missing: two agents starting at once on an empty database
  would both CREATE, and one would fail.
- one-line errors: a server that is down, a wrong password, a missing database or a missing
  psycopg would be a traceback, with the password in it.
What the database gives that the folder built by hand: atomic groups of writes (the folder has
atomic files, one at a time), constraints checked on every write (the folder validates on every
read), durability (each commit is fsync'ed to the write-ahead log; the folder does not fsync),
and one server that agents on many machines reach (a folder shared over a network file system
has unreliable locks).
"""

import threading
from contextlib import contextmanager
from typing import Iterator, Optional
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from harness.errors import SetupError, connect_problem, first_line
from harness.board.record import DESCRIPTION_MAX, MAX_ID, SUBJECT_MAX, STATUSES, Task, now, task_problem

CONNECT_TIMEOUT = 5           # seconds: a server that does not answer is reported, not waited for
LOCK_TAG = 0x7461736B         # "task": the high half of our advisory lock keys, apart from other apps'
SCHEMA_LOCK = LOCK_TAG << 32  # the key held while the tables are created
INSTALL = "python -m pip install -r requirements-postgres.txt"
_STATUS_LIST = ", ".join(f"'{s}'" for s in STATUSES)
_IDS_OK = "array_position({0}, NULL) IS NULL AND 1 <= ALL ({0}) AND {1} > ALL ({0})".format

# Created if missing, all in one transaction. task_board holds one row: the generation, which
# the trigger adds one to for every row any session changes (our cache is current while it is
# unchanged), and the trigger tells listeners what changed (they hear it only after the commit).
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS tasks (
    id          bigint PRIMARY KEY CHECK (id >= 1 AND id < {MAX_ID}),
    subject     text NOT NULL CHECK (btrim(subject) <> '' AND length(subject) <= {SUBJECT_MAX}),
    description text NOT NULL CHECK (length(description) <= {DESCRIPTION_MAX}),
    status      text NOT NULL CHECK (status IN ({_STATUS_LIST})),
    blocked_by  bigint[] NOT NULL CHECK ({_IDS_OK('blocked_by', MAX_ID)} AND id <> ALL (blocked_by)),
    owner       text CHECK (owner <> ''),
    unblocked   bigint[] CHECK ({_IDS_OK('unblocked', MAX_ID)}),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS task_board (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    generation  bigint NOT NULL DEFAULT 0
);
INSERT INTO task_board DEFAULT VALUES ON CONFLICT DO NOTHING;
CREATE OR REPLACE FUNCTION task_board_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE task_board SET generation = generation + 1;
    PERFORM pg_notify('task_board_' || TG_RELID, json_build_object(
        'op', TG_OP, 'id', coalesce(NEW.id, OLD.id),
        'agent', nullif(current_setting('task_board.agent', true), ''),
        'status', NEW.status, 'owner', NEW.owner, 'blocked_by', NEW.blocked_by[1:50],
        'was_status', OLD.status, 'was_owner', OLD.owner, 'was_blocked_by', OLD.blocked_by[1:50])::text);
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS task_board_changed ON tasks;
CREATE TRIGGER task_board_changed AFTER INSERT OR UPDATE OR DELETE ON tasks
    FOR EACH ROW EXECUTE FUNCTION task_board_changed();
"""
COLUMNS = "id, subject, description, status, blocked_by, owner, unblocked, created_at, updated_at"
SELECT = ("SELECT id, subject, description, status, blocked_by, owner, unblocked, "
          + ", ".join(f"""to_char({c} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')"""
                      for c in ("created_at", "updated_at")) + " FROM tasks")
INSERT = (f"INSERT INTO tasks ({COLUMNS}) VALUES (%s, %s, %s, %s, %s::bigint[], %s, %s::bigint[], "
          "%s::timestamptz, %s::timestamptz) ON CONFLICT (id) ")
REPLACE = INSERT + "DO UPDATE SET " + ", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS.split(", ")[1:])
CLAIM = INSERT + "DO NOTHING"


def shown(url: str) -> str:
    """The URL without its password (in the user part or as ?password=), to show and to log."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}"
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if "password" not in k]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query), ""))


def _psycopg(name: str):
    try:
        import psycopg
        return psycopg
    except ImportError as exc:  # not installed, or installed without a libpq to use
        raise SetupError(f"the board {name} needs psycopg ({first_line(exc)}): {INSTALL}") from None


class PostgresTasks:
    """The table of tasks: a TaskStore (task_record.py) for agents on any machine that reaches the server."""

    def __init__(self, url: str):
        self._url, self.name = url, shown(url)
        self.dir = None                  # no folder: TaskManager.dir is None on a database board
        self.agent = None                # who writes, when known: the live board names them (live_board.py)
        self.backend_pids = set()        # our sessions' ids on the server: the live board skips their news
        self._mutex = threading.RLock()  # one connection: one thread at a time uses it
        self._tasks, self._problems = {}, {}   # the cache: usable tasks, and a line per unusable row
        self._generation = None          # the generation the cache is the board of; None: stale
        self._locked_at = None           # under locked(): the board's generation now (it moves only by us)
        self._conn = self._open(SetupError)
        self._ensure_schema()
        oid = self._value("SELECT 'tasks'::regclass::oid::bigint")
        self._lock_key, self.channel = (LOCK_TAG << 32) | oid, f"task_board_{oid}"
        self.board = (self.name, oid)    # which board: the same for every process that opens this URL

    # ------------------------------------------------------------ connecting

    def _open(self, error=ValueError):
        """A new autocommit connection (each locked() opens its own transaction), or one clear line."""
        psycopg = _psycopg(self.name)
        try:
            conn = psycopg.connect(self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
        except psycopg.Error as exc:
            raise error(connect_problem(exc, self.name)) from None
        self.backend_pids.add(conn.info.backend_pid)
        return conn

    def _connection(self):
        """Our connection; a new one if the server dropped the old (a restart between two calls)."""
        if self._conn.closed:
            self._conn = self._open()
        return self._conn

    def _ensure_schema(self):
        """Make the tables if missing; never touch a table called tasks that some other program made."""
        if self._value("SELECT to_regclass('task_board') IS NOT NULL"):
            return
        with self._talking("create the tables"), self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            theirs = self._conn.execute("SELECT to_regclass('tasks') IS NOT NULL AND "
                                        "to_regclass('task_board') IS NULL").fetchone()[0]
            if theirs:
                raise SetupError(f"the database of the board {self.name} already has a table 'tasks' that "
                                 "is not a task board: use another database, or a schema of its own")
            self._conn.execute(SCHEMA)   # IF NOT EXISTS throughout: a second process finds it done

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
            raise ValueError(f"could not {doing} on the board {self.name}: {first_line(exc)}") from None

    def _value(self, sql: str, params: tuple = ()):
        with self._mutex, self._talking("read"):
            return self._connection().execute(sql, params).fetchone()[0]

    # ------------------------------------------------------------ the lock: one transaction

    @contextmanager
    def locked(self):
        """One transaction holding the board's advisory lock; an exception inside undoes every write.

        Not re-entrant, by contract (as the folder's lock). Both locks are transaction-scoped:
        the server releases them at COMMIT or ROLLBACK, or when our connection dies.
        - the advisory lock is the board's lock: every agent takes it around a read-modify-write.
        - the row lock on the generation (FOR UPDATE) holds off a hand edit made in psql until we
          commit (its trigger must update that row), so while we hold it the board changes only
          by our own writes, and a cache as new as the generation is the board: reads need no query.
        """
        with self._mutex, self._talking("change the board"):
            conn = self._connection()
            try:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s), set_config('task_board.agent', %s, true)",
                                 (self._lock_key, self.agent or ""))
                    held = conn.execute("SELECT generation FROM task_board FOR UPDATE")
                    self._locked_at = held.fetchone()[0]
                    yield
            except BaseException:
                self._generation = None  # our cache holds writes that were just rolled back
                raise
            finally:
                self._locked_at = None

    # ------------------------------------------------------------ writing

    def write(self, task: Task) -> None:
        """Replace a task whole (or add it): one statement, so a reader sees old or new, never half."""
        self._put(task, REPLACE)

    def dependents(self, task_id):   # TEMP shim
        found = []
        for t in self.scan()[0].values():
            if task_id in t["blockedBy"]:
                fresh = self.try_load(t["id"])
                if fresh and task_id in fresh["blockedBy"]:
                    found.append(fresh)
        return found

    def reserve(self, task):   # TEMP shim
        return self.claim(task)

    def claim(self, task: Task) -> bool:
        """Add a task only if its id is free (ON CONFLICT DO NOTHING). False if another agent has it."""
        return self._put(task, CLAIM)

    def _put(self, task: Task, sql: str) -> bool:
        assert self._locked_at is not None, "tasks are written only under the board's lock"
        task = {**task, "updated_at": now()}
        params = (task["id"], task["subject"], task["description"], task["status"], task["blockedBy"],
                  task["owner"], task.get("unblocked"), task["created_at"], task["updated_at"])
        with self._talking(f"save task #{task['id']}"):
            if self._connection().execute(sql, params).rowcount == 0:
                return False             # the claim lost: that id is taken
        # The trigger added one to the generation (we hold its row: nobody else can). A cache that
        # was the board is the board again with this task in it: no full read is needed.
        current, self._locked_at = self._current(), self._locked_at + 1
        if current:
            new_below = task["id"] not in self._tasks and self._tasks and task["id"] < next(reversed(self._tasks))
            self._tasks[task["id"]] = task       # a replaced task keeps its place: the order holds
            self._problems.pop(task["id"], None)
            if new_below:                        # a new id below the largest: sort once more
                self._tasks = dict(sorted(self._tasks.items()))
            self._generation = self._locked_at
        return True

    def _current(self) -> bool:
        """Under the lock: is our cache the board? (Then nothing can change it but us.)"""
        return self._locked_at is not None and self._generation == self._locked_at

    # ------------------------------------------------------------ reading

    def largest_id(self) -> int:
        """The max-scan: the largest id in the table, unusable rows included (ids are never reused)."""
        return self._value("SELECT coalesce(max(id), 0) FROM tasks WHERE id < %s", (MAX_ID,))

    def load(self, task_id: int) -> Task:
        """One task, read now, or ValueError: missing (and which exist), or not usable (and why)."""
        with self._mutex:
            if self._current():          # under the lock the cache is the board: no query
                task, problem = self._tasks.get(task_id), self._problems.get(task_id)
                found = task is not None or problem is not None
            else:
                with self._talking(f"read task #{task_id}"):
                    row = self._connection().execute(SELECT + " WHERE id = %s", (task_id,)).fetchone()
                found = row is not None
                task, problem = self._task(row) if found else (None, None)
        if not found:
            existing = ", ".join(f"#{i}" for i in self.scan()[0]) or "none yet"
            raise ValueError(f"no task #{task_id}; existing tasks: {existing}")
        if problem:
            raise ValueError(problem)
        return task

    def try_load(self, task_id: int) -> Optional[Task]:
        try:
            return self.load(task_id)
        except ValueError:
            return None

    def status_of(self, task_id: int) -> Optional[str]:
        return (self.try_load(task_id) or {}).get("status")

    def scan(self, validate: bool = False) -> tuple:
        """Every usable task by id in id order, and a line for each row that cannot be used.

        One query when nothing changed since our last look (the generation is the same); else
        the whole table, once. validate is accepted for the interface: the trigger counts hand
        edits too, so the cache is never stale, whichever way a row was changed.
        """
        with self._mutex, self._talking("read the board"):
            conn, generation = self._connection(), self._locked_at
            if generation is None:       # not under the lock: one query says whether anything changed
                generation = conn.execute("SELECT generation FROM task_board").fetchone()[0]
            if generation != self._generation:
                rows = conn.execute(SELECT + " ORDER BY id").fetchall()   # at least as new as generation
                self._fill(rows, generation)
            return dict(self._tasks), sorted(self._problems.values())

    def _fill(self, rows: list, generation: int) -> None:
        tasks, problems = {}, {}
        for row in rows:
            task, problem = self._task(row)
            if problem:
                problems[row[0]] = problem
            else:
                tasks[task["id"]] = task
        self._tasks, self._problems, self._generation = tasks, problems, generation

    def _task(self, row: tuple) -> tuple:
        """(the Task, None) or (None, a line saying why this row cannot be used)."""
        tid, subject, description, status, blocked_by, owner, unblocked, created, updated = row
        task = Task(id=tid, subject=subject, description=description, status=status, blockedBy=blocked_by,
                    owner=owner, created_at=created, updated_at=updated)
        if unblocked is not None:
            task["unblocked"] = unblocked
        problem = task_problem(task, tid)
        if problem is None and not isinstance(description, str):
            problem = "field 'description' must be a string"
        if problem is None and (created is None or updated is None):
            problem = "fields 'created_at' and 'updated_at' must be set"
        if problem:
            return None, (f"task #{tid} on the board {self.name} is unreadable (not a valid task: "
                          f"{problem}); it was left as it is")
        return task, None

    # ------------------------------------------------------------ the live board

    def listen(self):
        """A second connection that LISTENs on this board's channel (live_board.py reads it)."""
        conn = self._open()
        conn.execute(f"LISTEN {self.channel}")   # the channel is task_board_<oid>: a plain identifier
        return conn
