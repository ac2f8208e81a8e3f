"""s07's board: the task record, the stores that keep it, and what the board shows.

    record.py     the Task, its checks, and the TaskStore every board implements
    folder.py     a folder of task files, safe for several processes on one machine
    postgres.py   one board for agents on many machines
    claims.py     who may start or change a task another agent holds
    graph.py      the cycle check and the execution order
    text.py       the board as text, bounded after a compaction
    live.py       what other agents changed, before each REPL prompt
    commands.py   /task and /tasks; checklist.py: /task import

open_store() picks the store from the location (psycopg is imported only by a postgresql:// board).
Every way to name a board goes through it (--board, TASK_BOARD, s07's TaskManager, the demo).
Without postgres_url(), an address that is not spelt exactly postgresql:// (SQLAlchemy's
postgresql+psycopg://, PostgreSQL://, mysql://) became a folder named after it, password and
all, and that name reached the model in every board it was shown.
"""

import os
import re

from harness.board.folder import TaskFiles
from harness.board.postgres import PostgresTasks, shown
from harness.board.record import TaskStore
from harness.errors import SetupError

# A URL's scheme (RFC 3986: a letter, then letters, digits, + - .) and its //. A folder whose
# name holds :// is still a path when written as one: ./odd://name, /abs/odd://name.
SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
# PostgreSQL in any case, with SQLAlchemy's +driver (postgresql+psycopg, postgres+asyncpg).
POSTGRES = re.compile(r"(?i)postgres(?:ql)?(?:\+\w+)?")
# postgresql: without its // (libpq cannot read it, and as a folder it is the URL, password too).
NO_SLASHES = re.compile(r"(?i)\s*(postgres(?:ql)?(?:\+\w+)?):(?!//)")
# The start of a libpq keyword=value string (host=db password=...): PostgreSQL, but no URL.
KEYWORDS = re.compile(r"\s*(host|hostaddr|port|dbname|user|password|passfile|service)\s*=")
EXAMPLE = "postgresql://user@host/database"


def open_store(location: object) -> TaskStore:
    """A folder (".tasks", a Path) or a PostgreSQL URL; the driver is imported only when used.
    Any other address is refused (SetupError), in one line that shows no password."""
    if isinstance(location, os.PathLike):
        return TaskFiles(location)
    url = postgres_url(str(location))
    if url:
        return PostgresTasks(url)
    return TaskFiles(location)


def postgres_url(text: str) -> str | None:
    """The address as a URL libpq reads (its scheme postgresql://), or None for a folder."""
    found = SCHEME.match(text.strip())
    if found and POSTGRES.fullmatch(found[1]):
        return "postgresql://" + text.strip()[found.end():]
    if found:
        raise SetupError(f"the board {shown(text.strip())} is neither a folder nor a PostgreSQL "
                         f"URL ({found[1]}:// is not a board): give a folder (.tasks) or "
                         f"{EXAMPLE}; write ./NAME for a folder whose name holds ://")
    # Neither of these is shown: what follows the scheme, or the string, may be the password.
    misspelt = NO_SLASHES.match(text)
    if misspelt:
        raise SetupError(f"the board address begins {misspelt[1]}: without //: write {EXAMPLE} "
                         "(or ./NAME for a folder of that name)")
    if KEYWORDS.match(text):
        raise SetupError("the board address is a libpq keyword=value string: write it as a URL, "
                         f"{EXAMPLE} (or ./NAME for a folder of that name)")
    return None
