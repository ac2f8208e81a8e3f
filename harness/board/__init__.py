"""s07's board: where it is, and the modules that keep it and show it.

    record.py     a task's checks (its fields: s07's new_task)
    folder.py     what s07's TaskFolder needs to be safe and fast, mixed in around it
    postgres.py   one board for agents on many machines (loaded only for a postgresql:// board),
                  and TaskStore, what a store promises (s07's TaskFolder is the first)
    graph.py      the cycle check and the execution order
    claims.py     whose a task is, when several agents share the board
    text.py       the board as text, bounded after a compaction
    live.py       what other agents changed, before each REPL prompt
    commands.py   /task and /tasks; checklist.py: /task import
    message.py    the board in the conversation, found and read again (--continue, the page)
    (live.py, commands.py and checklist.py load with the command line, in s07's main(), and
    message.py when used: importing s07 loads none of them)

Without each piece:
- choose(): every agent is on ./.tasks under one name (it reads --board or TASK_BOARD, --name
  or AGENT_NAME); without its warning, a password in --board shows in `ps` to every user of
  the machine, unsaid.
- open_store(): the one way from a location to a store (--board, TASK_BOARD, s07's
  TaskManager, the demo).
- postgres_url(): an address not spelt postgresql:// (postgresql+psycopg://, PostgreSQL://,
  mysql://) became a folder named after it, password and all, shown to the model; a blank
  one (--board "   ") became a folder named with spaces.
- shown() and secrets_in(): a board's password reached an error line.
"""

import os
import re
from urllib.parse import unquote

from harness import terminal
from harness.board import record
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
# Around the board s07 adds after a compaction: /context and the session page find it by them.
BOARD_START, BOARD_END = "<task-board>", "</task-board>"
PASSWORD_WARNING = ("warning: a password in --board shows in `ps` to every user of this "
                    "machine: give it in TASK_BOARD, ~/.pgpass or a service file "
                    "(docs/many-machines.md)")


def choose(run, tasks, default, args) -> str:
    """--board or TASK_BOARD (else default): which board; --name or AGENT_NAME: who we are.
    Set anew on every run (s07's start). Returns the word for the REPL's banner."""
    if args.board and password_in(args.board):
        terminal.show_note(PASSWORD_WARNING)
    # --board "" is an address given, and refused (open_store); an empty TASK_BOARD is unset.
    location = args.board if args.board is not None else os.environ.get("TASK_BOARD") or default
    # The demo plays on its own board (demos.py): a board of yours is not even opened.
    if getattr(args, "demo", False):
        location = default
    tasks.use(location)
    name = record.agent_name(args.name or os.environ.get("AGENT_NAME") or "")
    tasks.agent = name or record.default_agent_name()
    run.agent = name          # a name given: whose the session is (--continue says so)
    run.board = shown(str(location))     # which board it worked on (--continue says so too)
    # The session page draws the board: read at each compaction and at the end of the run.
    run.recorder.watch_board(lambda: tasks.store.scan())
    return f"agent {tasks.agent}"


def open_store(location: object, folder_store):
    """A folder (".tasks", a Path), kept by folder_store (s07's TaskFolder) made safe and
    fast (folder.py), or a PostgreSQL URL (postgres.py, and psycopg, loaded only then); any
    other address is a SetupError, in one line that shows no password."""
    url = None if isinstance(location, os.PathLike) else postgres_url(str(location))
    if url:
        from harness.board import postgres
        return postgres.PostgresTasks(url)
    # ~ in .env or a quoted --board: no shell expanded it, and a folder named ~ is never meant;
    # nor is one named with spaces around it (" .tasks ").
    if not isinstance(location, os.PathLike):
        location = os.path.expanduser(location.strip())
    # The lesson's store, with what board/folder.py adds around it (loaded here: s03 and s06,
    # which read only this module's markers, never need it).
    from harness.board import folder
    return folder.remembering(folder_store)(location)


def postgres_url(text: str) -> str | None:
    """The address as a URL libpq reads (its scheme postgresql://), or None for a folder."""
    if not text.strip():      # else "   " is a folder named three spaces, made unsaid
        raise SetupError(f"the board address is empty: give a folder (.tasks) or {EXAMPLE}")
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


def shown(url: str) -> str:
    """The URL with its password as ***, to show and to log: postgresql://user:***@host/db.

    Read as libpq reads it, not as urlsplit does: a password may hold ? # / or @ unencoded,
    where urlsplit would cut it and show the rest. All up to the last @ is the user and the
    password; a password= in the query is hidden too. In doubt, it hides too much.
    """
    scheme, sep, rest = url.partition("://")
    user_part, at, host_part = rest.rpartition("@")
    user, colon, _ = user_part.partition(":")
    if at and colon:
        rest = f"{user}:***@{host_part}"
    rest = re.sub(r"(?i)([?&][^=&]*password[^=&]*=)[^&]*", r"\1***", rest)
    return scheme + sep + rest


def secrets_in(url: str) -> tuple:
    """The password as written in the URL and decoded, and a password= value: never shown."""
    user_part = url.partition("://")[2].rpartition("@")[0]
    found = [user_part.partition(":")[2]]
    found += re.findall(r"(?i)[?&][^=&]*password[^=&]*=([^&]*)", url)
    found += [unquote(s) for s in found]
    return tuple(s for s in found if s)


def password_in(url: str) -> bool:
    """Whether the URL holds a password (user:password@, or a password= in its query)."""
    return bool(secrets_in(url))
