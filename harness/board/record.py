"""The task record and the store interface: the one place that says what a task is.

Relied on by s07 (TaskManager and its tools) and by every board store (board_files.py,
board_postgres.py). Without each piece:
- Task: code that writes a field nobody documented (s07 once wrote `unblocked` so) and a
  README example that drifts from the files on disk.
- STATUSES / FINISHED: a lesson and a store that disagree on what "done" means.
- parse_task_id / check_text / task_problem: a model's "#3", a 300-digit id, a lone surrogate
  or a hand-broken file reach the store and fail there with a traceback, or corrupt it.
- TaskStore: a second store (PostgreSQL) would have to guess what TaskManager relies on.
"""

import os
import re
import unicodedata
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Protocol, TypedDict

from harness.errors import SetupError

STATUSES = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]", "deleted": "[-]"}  # and marks
FINISHED = {"completed", "deleted"}   # statuses that no longer block anyone
MAX_ID = 10 ** 15          # ids at or past this are refused: the file name would grow too long
SUBJECT_MAX = 300          # characters: a title, not a document (a 440 kB subject grew a compaction)
DESCRIPTION_MAX = 4_000    # characters: details go in a file the task can name


class _TaskFields(TypedDict):
    id: int                    # the number in the file name; never reused
    subject: str               # a short imperative title, one line when shown
    description: str           # details; may be empty
    status: str                # one of STATUSES
    blockedBy: list            # ids of the tasks that must finish first
    owner: Optional[str]       # the agent (or person) working on it; None when free
    created_at: str            # ISO 8601, UTC, seconds
    updated_at: str            # set by the store on every write


class Task(_TaskFields, total=False):
    """One task, exactly as a store keeps it (a task file is this object as JSON)."""
    unblocked: list            # set when it finishes: the ids that stopped waiting for it, so that
                               # reopening it can say who does not wait again


def new_task(task_id: int, subject: str, description: str, blocked_by: list) -> Task:
    stamp = now()
    return Task(id=task_id, subject=subject, description=description, status="pending",
                blockedBy=blocked_by, owner=None, created_at=stamp, updated_at=stamp)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def parse_task_id(value: object) -> int:
    """Ids come from a model: accept 3, "3" and "#3"; refuse anything else clearly."""
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"\s*#?\d+\s*", value, re.ASCII):
        number = int(value.strip().lstrip("#"))
    if number is None or number < 1 or number >= MAX_ID:
        raise ValueError(f"a task id is a positive number like 3, '3' or '#3'; got {str(value)[:40]!r}")
    return number


def ids(value: object) -> list:
    return [parse_task_id(v) for v in (value if isinstance(value, list) else [value])]


def check_text(value: object, field: str, empty: bool = False) -> str:
    """A subject or description: a string, not blank, not too long, and storable as UTF-8."""
    if not isinstance(value, str) or not (empty or value.strip()):
        raise ValueError(f"{field} must be a {'' if empty else 'non-empty '}string")
    limit = SUBJECT_MAX if field == "subject" else DESCRIPTION_MAX
    if len(value) > limit:
        raise ValueError(f"{field} is {len(value):,} characters; keep it under {limit:,} "
                         "(put long details in a file and name the file)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a model's JSON: it cannot be written as UTF-8
        raise ValueError(f"{field} contains characters that are not valid text (a lone surrogate)") from None
    return value.strip() if field == "subject" else value


def check_update(status, add, remove, owner) -> None:
    """The arguments of a task update, before any task is read: ValueError says what is wrong."""
    if status is None and add is None and remove is None and owner is None:
        raise ValueError("nothing to update: give status, addBlockedBy, removeBlockedBy or owner")
    if status is not None and status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {', '.join(STATUSES)}")
    if owner is not None and not isinstance(owner, str):
        raise ValueError("owner must be a string ('' clears it)")


def is_id(value: object) -> bool:
    """Booleans and floats are not ids."""
    return type(value) is int and 0 < value < MAX_ID


def task_problem(task: object, expected_id: int) -> Optional[str]:
    """What is wrong with a task read from a store, or None."""
    if not isinstance(task, dict):
        return "the file must hold a JSON object"
    if not is_id(task.get("id")) or task["id"] != expected_id:
        return f"field 'id' is {task.get('id')!r}, expected {expected_id} (the number in the file name)"
    if not isinstance(task.get("subject"), str):
        return "field 'subject' must be a string"
    if task.get("status") not in STATUSES:
        return f"field 'status' is {task.get('status')!r}, expected one of {', '.join(STATUSES)}"
    for field in ("blockedBy", "unblocked"):
        value = task.get(field, [])
        if not isinstance(value, list) or not all(is_id(b) for b in value):
            return f"field {field!r} must be a list of task ids"
    if task.get("owner") is not None and not isinstance(task["owner"], str):
        return "field 'owner' must be a string or null"
    return None


def one_line(text: object) -> str:
    """A subject on one line: a newline in it must not forge a line of the board."""
    return " ".join(str(text).split())


class TaskStore(Protocol):
    """What TaskManager relies on from a board. Every store (files, PostgreSQL) promises this.

    - locked(): while it is held, no other process (on any machine sharing the board) changes
      the board. TaskManager takes it around every read-modify-write; it is not re-entrant.
      On PostgreSQL it is also one transaction: an exception inside undoes every write.
      The file board writes each file atomically, but not a group of files at once.
    - write(task) replaces a task whole; a reader never sees half of it. Only under locked().
    - claim(task) creates a task only if its id is free; False if another process took it.
    - load(id) reads it now, or raises ValueError (missing, or corrupt: the message says which).
    - try_load(id) is load() or None. status_of(id) is its status or None.
    - scan(validate) -> (every readable task by id, in id order; the problems found as lines).
      A record that cannot be used is a problem line, never an exception and never repaired.
    - largest_id() is the largest id the board holds, corrupt records included (ids are never
      reused); names outside the valid range are ignored, and scan() flags them.
    - board is which board was last locked (it changes when a relative folder follows the cwd);
      name is how to show it to a user (never with a password).
    """

    board: object
    name: str

    def locked(self) -> AbstractContextManager: ...
    def write(self, task: Task) -> None: ...
    def claim(self, task: Task) -> bool: ...
    def load(self, task_id: int) -> Task: ...
    def try_load(self, task_id: int) -> Optional[Task]: ...
    def status_of(self, task_id: int) -> Optional[str]: ...
    def scan(self, validate: bool = False) -> tuple: ...
    def largest_id(self) -> int: ...


def default_agent_name() -> str:
    """Differs between two processes, stays the same across restarts in one terminal."""
    try:
        where = Path(os.ttyname(0)).name       # e.g. pts3
    except OSError:
        where = str(os.getpid())               # not a terminal: one name per process
    user = unicodedata.normalize("NFKC", os.environ.get("USER") or "agent")
    user = re.sub(r"[^\w.@-]", "_", user)[:30] or "agent"   # a USER with escapes or spaces
    return f"{user}-{where}"


def agent_name(raw: str):
    """--name or AGENT_NAME, NFKC-normalised (a full-width ａｌｉｃｅ is alice), or None if empty."""
    name = unicodedata.normalize("NFKC", raw).strip()
    if name and not re.fullmatch(r"[\w.@-]{1,40}", name):
        raise SetupError(f"an agent name is 1-40 letters, digits or . _ @ -; got {name!r}")
    return name or None
