"""From a todo list to the board: /task import FILE turns a Markdown checklist into tasks.

Relied on by s07's REPL (/task import). A plan written in s03's style, as a checklist:

    # Plan                       <- headings and blank lines are skipped
    - [x] Design the data model  <- becomes a completed task
    - [ ] Implement the API      <- becomes a pending task, in the order of the file

Without each piece:
- every line checked before any task is made: a typo on line 9 would leave 8 tasks on the board
  and a second import would make them twice; now a file with any bad line imports nothing.
- line numbers in the refusal: "bad checklist" alone sends the user hunting through the file.
- the same checks as task_create (check_text): a 10,000-character line is refused here, by
  line number, not by the store halfway through.
- a size cap and UTF-8: a binary file, or a log pointed at by mistake, is one clear line.
"""

import re
from pathlib import Path

from harness.errors import reason
from harness.board.record import check_text

CHECKLIST_MAX = 200_000   # bytes: a plan, not a log file
ITEM = re.compile(r"[-*+] \[( |x|X)\] (.*)")   # - [ ] text, - [x] text (also * and + bullets)


def parse_checklist(text: str) -> list:
    """[(done, subject)] in file order, or ValueError naming every bad line by its number."""
    items, bad = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = ITEM.fullmatch(line.rstrip())
        if match is None:
            why = "an indented item (nested lists are not imported)" if ITEM.fullmatch(line.strip()) \
                else "not a checklist item ('- [ ] text' or '- [x] text')"
            bad.append(f"line {number}: {why}: {line.strip()[:60]!r}")
            continue
        try:
            items.append((match[1] != " ", check_text(match[2], "subject")))
        except ValueError as exc:
            bad.append(f"line {number}: {exc}")
    if bad:
        raise ValueError(f"nothing imported: {len(bad)} bad line{'s' * (len(bad) != 1)}: " + "; ".join(bad))
    if not items:
        raise ValueError("nothing imported: the file has no checklist items ('- [ ] text' or '- [x] text')")
    return items


def read_checklist(path: Path) -> str:
    try:
        data = path.read_bytes() if path.is_file() else None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {reason(exc)}") from None
    if data is None:
        raise ValueError(f"no file {path}" if not path.exists() else f"{path} is not a regular file")
    if len(data) > CHECKLIST_MAX:
        raise ValueError(f"{path} is {len(data):,} bytes; a checklist to import is at most {CHECKLIST_MAX:,}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text; save it as UTF-8") from None


def import_checklist(manager, path) -> str:
    """Each item becomes a task through manager (a TaskManager), in order; checked ones completed.

    Returns the lines to print: one per task, with its id. Every line is checked first; if the
    board refuses halfway (a server gone), the lines say which tasks were made before it did.
    """
    path = Path(path)
    items = parse_checklist(read_checklist(path))
    made = []
    try:
        for done, subject in items:
            tid = int(re.match(r"Created task #(\d+)", manager.create(subject))[1])
            if done:
                manager.update(tid, status="completed")
            made.append(f"  #{tid} {'[x]' if done else '[ ]'} {subject}")
    except ValueError as exc:
        if not made:
            raise
        raise ValueError(f"imported {len(made)} of {len(items)} items, then: {exc}; made: "
                         + ", ".join(m.split()[0] for m in made)) from None
    return "\n".join([f"Imported {len(made)} task{'s' * (len(made) != 1)} from {path}:", *made])
