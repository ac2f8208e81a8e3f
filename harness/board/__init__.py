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
"""

from harness.board.folder import TaskFiles
from harness.board.postgres import PostgresTasks
from harness.board.record import TaskStore


def open_store(location: object) -> TaskStore:
    """A folder (".tasks", a Path) or a postgresql:// URL; the driver is imported only when used."""
    text = str(location)
    if text.startswith(("postgresql://", "postgres://")):
        return PostgresTasks(text)
    return TaskFiles(location)


