"""A task's checks: what both boards agree a task may hold.

A task's fields are s07's new_task (and "unblocked", set when it finishes). Relied on by s07
(TaskManager and its tools, TaskFolder), board.choose (the agent's name), postgres.py,
checklist.py, live.py, graph.py and text.py. Without each piece:
- STATUSES / FINISHED: a lesson and a store would disagree on what "done" means.
- parse_task_id / check_text / task_problem: a model's "#3", a 300-digit id, a lone surrogate
  or a hand-broken file reached the store and failed there in a traceback, or corrupted it.
- new_id: a board at the largest id failed every create with "field 'id' is 1000000000000000,
  expected 1000000000000000"; now one line says the board is full.
- the same refusals on both stores (a NUL, a task blocked by itself, an empty owner): else a
  board could not move from the folder to PostgreSQL, and a /task import that works on one
  would fail halfway on the other.
- as_file: a store would write a task that a read then flags, and it would be lost (a hand-
  added field nested deep grew past TASK_FILE_MAX once written with an indent).
- OWNER_MAX: a model's 170,000-character owner made a file too big to read back.
- default_agent_name with the host: `root-pts0` on two machines sharing a PostgreSQL board
  would be one agent, each taking over the other's tasks in progress without a word.
"""

import json
import os
import re
import socket
import unicodedata
from datetime import datetime, timezone
from typing import Optional

from harness.errors import SetupError

STATUSES = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]",   # and their marks
            "deleted": "[-]"}
FINISHED = {"completed", "deleted"}   # statuses that no longer block anyone
MAX_ID = 10 ** 15          # ids at or past this are refused: the file name would grow too long
SUBJECT_MAX = 300          # characters: a title, not a document (a 440 kB one grew a compaction)
DESCRIPTION_MAX = 4_000    # characters: details go in a file the task can name
OWNER_MAX = 100            # characters: a name (an agent's --name is at most 40)
TASK_FILE_MAX = 1_000_000  # bytes: a task is a title and some details; a bigger file is not one


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def as_file(task: dict) -> bytes:
    """A task as its file (or a row's JSON) holds it; ValueError for a task a read would flag,
    or that cannot be written as UTF-8. Checked before any file exists, so nothing is left."""
    problem = task_problem(task, task["id"])
    if problem:
        raise ValueError(f"task #{task['id']} cannot be saved: {problem}")
    # The id first, whatever order a hand edit left: a person sees first which task it is.
    data = json.dumps({"id": task["id"], **task}, indent=2, ensure_ascii=False) + "\n"
    try:
        encoded = data.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the task contains characters that are not valid text (a lone "
                         "surrogate)") from None
    # A file a read would refuse as too big would drop the task, and its dependents' blocker.
    if len(encoded) > TASK_FILE_MAX:
        raise ValueError(f"task #{task['id']} cannot be saved: its file would be "
                         f"{len(encoded):,} bytes, over {TASK_FILE_MAX:,}; shorten what a hand "
                         "edit added to it")
    return encoded


def parse_task_id(value: object) -> int:
    """Ids come from a model: accept 3, "3" and "#3" (and 3.0, an integer in JSON Schema);
    refuse anything else clearly."""
    number = None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    # Up to 18 digits: int() refuses over 4,300, and MAX_ID has 16.
    elif isinstance(value, str) and re.fullmatch(r"\s*#?\d{1,18}\s*", value, re.ASCII):
        number = int(value.strip().lstrip("#"))
    if number is None or number < 1 or number >= MAX_ID:
        raise ValueError("a task id is a positive number like 3, '3' or '#3'; got "
                         f"{str(value)[:40]!r}")
    return number


def new_id(number: int) -> int:
    """A new task's id (s07's max-scan), or ValueError when it is past the largest a task may
    have: a board with a task (or a high-water mark) at 999,999,999,999,999 is full."""
    if number < MAX_ID:
        return number
    raise ValueError(f"this board's ids have reached their largest ({MAX_ID - 1:,}): no task "
                     "can be added to it; start a new board (--board with another folder or "
                     "database)")


def ids(value: object) -> list:
    """Each id once, in the order given: a model or a person may name one twice (2, "#2")."""
    given = value if isinstance(value, list) else [value]
    return list(dict.fromkeys(parse_task_id(v) for v in given))


def check_text(value: object, field: str, empty: bool = False) -> str:
    """A subject or description: a string, not blank, not too long, and storable by both stores."""
    problem = text_problem(value, field, empty)
    if problem:
        raise ValueError(problem)
    return value.strip() if field == "subject" else value


def text_problem(value: object, field: str, empty: bool = False) -> Optional[str]:
    """What makes a subject, a description or an owner unstorable, or None: PostgreSQL's rules
    (its CHECK constraints, its text type), for both stores."""
    if not isinstance(value, str) or not (empty or value.strip()):
        return f"{field} must be a {'' if empty else 'non-empty '}string"
    limit = {"subject": SUBJECT_MAX, "description": DESCRIPTION_MAX}.get(field)
    if limit is not None and len(value) > limit:
        return (f"{field} is {len(value):,} characters; keep it under {limit:,} "
                "(put long details in a file and name the file)")
    if "\0" in value:      # PostgreSQL's text cannot hold a NUL byte
        return f"{field} contains a NUL character (\\x00), which a board cannot store"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a model's JSON: not writable as UTF-8
        return f"{field} contains characters that are not valid text (a lone surrogate)"
    return None


def check_arguments(status, add, remove, owner) -> None:
    """The arguments of a task update, before any task is read: ValueError says what is wrong."""
    if status is None and add is None and remove is None and owner is None:
        raise ValueError("nothing to update: give status, addBlockedBy, removeBlockedBy or owner")
    if status is not None and status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {', '.join(STATUSES)}")
    if owner is not None and not isinstance(owner, str):
        raise ValueError("owner must be a string ('' clears it)")
    if owner:
        check_text(owner, "owner")
    # The call's owner, not a stored one: a file written before this limit stays readable.
    if owner and len(owner) > OWNER_MAX:
        raise ValueError(f"owner is {len(owner):,} characters; a name is at most {OWNER_MAX}")


def is_id(value: object) -> bool:
    """Booleans and floats are not ids."""
    return type(value) is int and 0 < value < MAX_ID


def task_problem(task: object, expected_id: int) -> Optional[str]:
    """What is wrong with a task read from a store, or None: what PostgreSQL's constraints
    refuse, the folder flags, so a hand-edited file is no more than a row could be."""
    if not isinstance(task, dict):
        return "the file must hold a JSON object"
    if not is_id(task.get("id")):
        return f"field 'id' is {task.get('id')!r}, not a task id (1 to {MAX_ID - 1:,})"
    if task["id"] != expected_id:
        return f"field 'id' is {task['id']}, expected {expected_id} (the number in the file name)"
    if task.get("status") not in STATUSES:
        return f"field 'status' is {task.get('status')!r}, expected one of {', '.join(STATUSES)}"
    texts = (("subject", task.get("subject"), False),
             ("description", task.get("description"), True))
    for field, value, empty in texts:
        problem = text_problem(value, field, empty)
        if problem:     # "subject must be ..." -> "field 'subject' must be ..."
            return f"field {field!r}{problem[len(field):]}"
    # blockedBy is every task's (a row's column), [] when it waits for nothing; unblocked is
    # only a completed task's.
    if "blockedBy" not in task:
        return "field 'blockedBy' is missing: [] if it waits for nothing"
    for field in ("blockedBy", "unblocked"):
        value = task.get(field, [])
        if not isinstance(value, list) or not all(is_id(b) for b in value):
            return f"field {field!r} must be a list of task ids"
    if expected_id in task["blockedBy"]:
        return "field 'blockedBy' holds the task's own id: a task cannot wait for itself"
    owner = task.get("owner")
    if owner is not None and (not isinstance(owner, str) or text_problem(owner, "owner")):
        return "field 'owner' must be null or a non-empty string a board can store"
    return None


def default_agent_name() -> str:
    """user@host-terminal, e.g. root@build2-pts0: differs between two processes (on one machine
    or two sharing a board), stays the same across restarts in one terminal. At most 40
    characters of [\\w.@-], so that agent_name() would accept it."""
    try:
        where = os.ttyname(0).removeprefix("/dev/").replace("/", "")   # /dev/pts/3 -> pts3
    except OSError:
        where = str(os.getpid())               # not a terminal: one name per process
    host = socket.gethostname().split(".")[0]  # build2.example.com -> build2
    parts = []
    for raw, fallback, room in ((os.environ.get("USER"), "agent", 16), (host, "host", 14),
                                (where, "tty", 8)):
        text = unicodedata.normalize("NFKC", raw or fallback)
        parts.append(re.sub(r"[^\w.-]", "_", text)[:room] or fallback)  # escapes, spaces, @
    user, host, where = parts
    return f"{user}@{host}-{where}"


def agent_name(raw: str):
    """--name or AGENT_NAME, NFKC-normalised (a full-width ａｌｉｃｅ is alice); None if
    empty."""
    name = unicodedata.normalize("NFKC", raw).strip()
    if name and not re.fullmatch(r"[\w.@-]{1,40}", name):
        raise SetupError(f"an agent name is 1-40 letters, digits or . _ @ -; got {name!r}")
    return name or None
