"""From a todo list to the board: /task import FILE turns a Markdown checklist into tasks.

Relied on by s07's REPL: /task import calls import_checklist(TASKS, path) and prints what it
returns. A plan in s03's style, as a checklist:

    # Plan                       <- headings and blank lines are skipped
    - [x] Design the data model  <- becomes a completed task
    - [ ] Implement the API      <- becomes a pending task, in the order of the file

Without each piece:
- every line checked before any task is made: a typo on line 9 left 8 tasks on the board, and
  a second import made them twice.
- one locked(), at the store level: one transaction on PostgreSQL; on the folder, what was
  made is removed if anything fails, Ctrl-C included. A failure imports nothing, so a second
  import makes nothing twice. (A kill -9 keeps what the folder made so far: it has no
  journal. PostgreSQL rolls it back.)
- bad lines by number, the first BAD_SHOWN and a count, never their text: "bad checklist"
  alone sent the user hunting; 100,000 bad lines made a 7 MB error; /task import .env showed
  an API key.
- LINE_END: splitlines() also split on \f, \v, \x85 and U+2028, so "line N" was not the
  editor's line N, and an item holding \x85 became a bad line; \n alone made an old Mac's
  file (\r) one item.
- check_text, as task_create: a 10,000-character line or a NUL is refused here, by line
  number, not by the store halfway through.
- at most CHECKLIST_MAX + 1 bytes read: a 3 GB file was read whole before being refused.
- UTF-8 and a regular file: a binary file, a FIFO or a folder is one clear line.
- a progress line every PROGRESS_EVERY items: 24,000 items take seconds; silence looks hung.
"""

import re
from pathlib import Path

from harness.board.record import check_text
from harness.errors import reason
from harness.files import read_bytes
from harness.terminal import show_note

CHECKLIST_MAX = 200_000   # bytes: a plan, not a log file
BAD_SHOWN = 5             # bad lines named in a refusal; the rest are counted
PROGRESS_EVERY = 2_000    # items between two progress lines of a long import
LINE_END = re.compile(r"\r\n|\r|\n")
ITEM = re.compile(r"[-*+] \[( |x|X)\] (.*)")   # - [ ] text, - [x] text (also * and + bullets)


def parse_checklist(text: str) -> list:
    """[(done, subject)] in file order, or ValueError naming the first bad lines by number."""
    items, bad = [], []
    # A line ends where an editor ends it: \r\n, \n or \r (not splitlines(): see this
    # module's docstring).
    for number, line in enumerate(LINE_END.split(text), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = ITEM.fullmatch(line.rstrip())
        if match is None:
            if ITEM.fullmatch(line.strip()):
                why = "an indented item (nested lists are not imported)"
            else:
                why = "not a checklist item ('- [ ] text' or '- [x] text')"
            bad.append(f"line {number}: {why}")    # never its text: it may hold a key
            continue
        try:
            items.append((match[1] != " ", check_text(match[2], "subject")))
        except ValueError as exc:
            bad.append(f"line {number}: {exc}")
    if bad:
        lines = "line" if len(bad) == 1 else "lines"
        shown = "; ".join(bad[:BAD_SHOWN])
        if len(bad) > BAD_SHOWN:
            shown += f"; and {len(bad) - BAD_SHOWN:,} more"
        raise ValueError(f"nothing imported: {len(bad):,} bad {lines}: {shown}")
    if not items:
        raise ValueError("nothing imported: the file has no checklist items ('- [ ] text' or "
                         "'- [x] text')")
    return items


def read_checklist(path: Path) -> str:
    """The file as text, reading at most CHECKLIST_MAX + 1 bytes of it, or ValueError."""
    if not path.exists():
        raise ValueError(f"no file {path}")
    try:   # read_bytes refuses a folder, a FIFO or a device, unread, with a ValueError
        data = read_bytes(path, str(path), CHECKLIST_MAX + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {reason(exc)}") from None
    if len(data) > CHECKLIST_MAX:   # its size from the file system: the rest is never read
        raise ValueError(f"{path} is {path.stat().st_size:,} bytes; a checklist to import is "
                         f"at most {CHECKLIST_MAX:,}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text; save it as UTF-8") from None


def import_checklist(manager, path) -> str:
    """Each item a task on manager's board (s07's TaskManager), in order, checked ones
    completed; all or nothing (one locked()). Returns a heading, then a line per task."""
    path = Path(path)
    items = parse_checklist(read_checklist(path))
    store, made = manager.store, []
    if store.agent is None:
        store.agent = manager.agent      # PostgreSQL names the importer to the other agents
    with store.locked():
        for done, subject in items:
            task = manager.add(subject, "", [], "completed" if done else "pending")
            mark = "[x]" if done else "[ ]"
            made.append(f"  #{task['id']} {mark} {subject}")
            if len(made) % PROGRESS_EVERY == 0 and len(made) < len(items):
                show_note(f"  [import: {len(made):,} of {len(items):,} tasks made; all of them "
                          "are kept, or none]")
    tasks = "task" if len(made) == 1 else "tasks"
    return "\n".join([f"Imported {len(made)} {tasks} from {path}:", *made])
