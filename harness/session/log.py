"""The session log: every message appended to disk as it happens; --continue reads it back.

Relied on by all three lessons and the cli, through the Run (harness/run.py): cli opens it
(open_session); each loop calls run.log.record(messages) once a round, and tool_calls.kept()
calls run.log.tool_result(block) as each result exists. The rule that every tool_use gets one
tool_result is harness/pairing.py's, and the repair of a history that breaks it is
session/repair.py's.

    .transcripts/session_20260101-120000_1.jsonl     one JSON object a line:
      {"role": "user", "content": "fix the tests"}                    a message
      {"role": "assistant", "content": [...tool_use...]}
      {"tool_result": {"type": "tool_result", ...}}                    one call's result
      {"role": "user", "content": [...tool_result...]}                 the whole batch's results
      {"compacted": true, "message": {"role": "user", ...}}           the history became this
      {"rewind_to": 3}                                                 the history was cut to 3
      {"session": {"lesson": "s07_task_system", "agent": "alice",    whose, and on which
                   "board": ".tasks"}}                               board: the first line
      {"continued_from": "session_..._1.jsonl", "session": {...}}    a --continue's first line

Without each piece:
- one os.write of a whole line, O_APPEND: a kill -9 can tear only the last line (load skips it).
- a new 0600 file (harness/writer.py): the log holds every tool output; 0644 let anyone read it.
- the reply recorded before its calls run, each result as it finishes: a stop mid-batch would
  lose every result, and --continue redo the work. The call that was running is answered
  STOPPED by repair.py ("it may have acted"), so the model checks before doing it again.
- the "compacted" record: a resumed session would start again from a context already too long.
- load through repair.py: a torn or hand-edited log gives a history the API refuses.
- record: a loop that forgets one append() loses a message for good.
- ran: after a failed turn the cli cannot tell which calls of the last reply ran.
- SessionLog() with no file: a run without a log keeps the same bookkeeping, writes nothing.
- made_folder: a REPL quit before any model call left an empty .transcripts/ behind.
- _made_anew: a command's `rm -rf .transcripts` (or git clean -fdx) sent the rest of the
  session into the removed file, and --continue found no session.
- LOG_MAX: a 6 GB (or sparse) log was read whole, and took all the memory there was.
- continued's copy written whole, then named: a --continue killed midway (or a full disk) left
  3,878 of 200,000 lines, and every later --continue resumed from that cut copy, unsaid.
- reading into one list in place: a copy per line made reading quadratic.
- _parse and MAX_DEPTH: a line nested at or near json's limit ended --continue in a
  RecursionError traceback; now it is a torn line. _finite: a NaN or 1e999 in a line failed
  every request of the resumed session, blamed on the endpoint; each is read as null.
- resume_latest's note where no new log can be made: --continue refused a session it could read.
- the first line (about) and _whose: alice's --continue resumed bob's newer session in their
  shared folder, and only said "continuing ...jsonl: 2 messages". _other_board: one continued
  in a new shell without TASK_BOARD went on, unsaid, on ./.tasks, where its tasks are not.

No fsync per line: a kill -9 loses nothing the kernel has; only a power cut could lose the last
lines, and on some disks a fsync per message costs more than the model call it records.
"""

import contextlib
import fnmatch
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from harness import clean, config, files, pairing, writer
from harness.session import repair
from harness.errors import SetupError, reason
from harness.excerpt import one_line
from harness.terminal import plural, show_note

FOLDER = config.TRANSCRIPTS     # relative: a session belongs to the folder you run in
PATTERN = "session_*.jsonl"     # what latest() looks for; transcript_*.jsonl (s06) is not a session
MAX_DEPTH = 100   # nesting a record may have: a real message has about ten; deeper is garbage
NAME_SHOWN = 60   # characters of a lesson's or agent's name in a note (a hand edit's can be huge)
# Bytes of a session log --continue reads, 10,000 results of 50,000 characters: it is read
# whole and parsed, which takes a few times this in memory.
LOG_MAX = 500_000_000


# ---------------------------------------------------------------- writing

class SessionLog:
    """An open session file; a write that fails stops the log with a note, never the agent.
    SessionLog() has no file: it keeps track of the history and writes nothing."""

    def __init__(self, path: Path | None = None, fd: int | None = None):
        self.path, self._fd = path, fd
        self._recorded: list = []    # the history as the log holds it (for record)
        self._history: list | None = None   # the loop's own list, as record() last saw it
        self.ran: dict = {}          # tool_use_id -> result, since the last message
        self.failed: str | None = None  # why writing stopped, once it has
        self.made_folder = False     # start() made the folder: close() removes it if still empty
        self.copied = 0              # bytes continued() copied: a log grown past them did something
        self.about = None            # start()'s first line, written with the first record
        self.whose = None            # the same, kept: a log made anew opens with it too

    @classmethod
    def start(cls, folder: Path = FOLDER, about: dict | None = None) -> "SessionLog":
        """A new session_<time>_<n>.jsonl in folder, 0600, never an existing file or a link.
        about: who it is for ({"lesson", "agent"}), its first line once it records anything
        (until then it stays empty, and --continue passes it over): --continue names it."""
        made = not os.path.lexists(folder)
        path, fd = writer.open_numbered(folder, _stem(), ".jsonl", writer.PRIVATE)
        # A copy --continue was writing when it was killed: the whole conversation, for ever.
        writer.sweep(folder)
        log = cls(path, fd)
        log.made_folder = made
        log.about = log.whose = about
        return log

    @classmethod
    def continued(cls, earlier: Path, history: list[dict], folder: Path = FOLDER,
                  about: dict | None = None) -> "SessionLog":
        """--continue: a new session holding all of history, so each file reads on its own;
        the earlier file is left as it was. The copy is written whole, then named: a kill or a
        full disk midway leaves no cut copy for the next --continue to resume from."""
        records = [{"continued_from": earlier.name, "session": about or {}}, *history]
        data = b"".join(_line(record) for record in records)
        made = not os.path.lexists(folder)
        path = writer.numbered(folder, _stem(), ".jsonl", data, writer.PRIVATE)
        writer.sweep(folder)                     # as start() does
        log = cls(path, writer.open_appending(path))
        log.made_folder = made
        log.copied = len(data)
        log._recorded = list(history)
        log.whose = about
        return log

    @property
    def holds_messages(self) -> bool:
        """Whether --continue would resume a message of this session: more than its first
        prompt, which is recorded before its first call, and undone if that call fails."""
        return len(self._recorded) > 1

    def append(self, message: dict) -> None:
        """One message, one line, one write."""
        self._write_record(message)
        self._recorded.append(message)

    def compacted(self, summary_message: dict) -> None:
        """The history was replaced by [summary_message]: a resume starts from it."""
        self._write_record({"compacted": True, "message": summary_message})
        self._recorded = [summary_message]

    def rewound(self, length: int) -> None:
        """The history was cut back to its first `length` messages (a failed turn undone)."""
        self._write_record({"rewind_to": length})
        del self._recorded[length:]

    def record(self, history: list[dict]) -> None:
        """Record whatever changed since the last call: new messages, a compaction, a rollback.
        Messages compare by identity: the loops append new dicts and never edit one in place."""
        self._history = history
        same = 0
        while (same < min(len(history), len(self._recorded))
               and history[same] is self._recorded[same]):
            same += 1
        if same == len(history) == len(self._recorded):
            return
        self.ran = {}     # the history moved on: the results it holds now are what counts
        if same == 0 and self._recorded and history:
            self.compacted(history[0])
            same = 1
        elif same < len(self._recorded):
            self.rewound(same)
        for message in history[same:]:
            self.append(message)

    def tool_result(self, block: dict) -> None:
        """One call's result, on disk before the next call runs: a stop loses only the running
        call. The loop's list (holding the reply since the last record()) is recorded first,
        so the call reaches the disk before its result."""
        if self._history is not None:
            self.record(self._history)
        self.ran[block.get("tool_use_id")] = block
        self._write_record({"tool_result": block})

    def close(self) -> None:
        """Close the file; one that holds nothing new (empty, or only --continue's copy) is
        removed, so --continue finds one that did something, and so is the folder start() made
        for it, if nothing else is in it."""
        if self._fd is not None:
            unchanged = os.fstat(self._fd).st_size == self.copied
            os.close(self._fd)
            self._fd = None
            if unchanged:
                self.path.unlink(missing_ok=True)
            if unchanged and self.made_folder:
                with contextlib.suppress(OSError):      # not empty: a page, results, a history
                    self.path.parent.rmdir()

    def _write_record(self, record: dict) -> None:
        if self.failed or self._fd is None:     # stopped, or no file: nothing to write
            return
        try:
            if os.fstat(self._fd).st_nlink == 0 and not self._made_anew(record):
                return
            data = _line(record)
            if self.about:                      # the first record: whose session, then it
                data = _line({"session": self.about}) + data
                self.about = None
            while data:          # a regular file takes it all at once; a short write is retried
                data = data[os.write(self._fd, data):]
        except OSError as exc:
            self.failed = reason(exc)
            show_note(f"[the session log {self.path} stopped: {self.failed}; the session goes on, "
                      "but --continue will resume from before this point]")

    def _made_anew(self, record: dict) -> bool:
        """The file was removed (a command's rm -rf .transcripts, git clean -fdx): a new one,
        holding what the removed one held, so that --continue still finds the session. False,
        said, if none can be made: the log stops."""
        removed = self.path
        records = [{"session": self.whose or {}}, *self._recorded]
        for block in self.ran.values():         # this turn's results so far, but record's own
            if block is not record.get("tool_result"):
                records.append({"tool_result": block})
        data = b"".join(_line(one) for one in records)
        try:
            path = writer.numbered(removed.parent, _stem(), ".jsonl", data, writer.PRIVATE)
            fd = writer.open_appending(path)
        except OSError as exc:
            self.failed = reason(exc)
            show_note(f"[the session log {removed} was removed, and no new one could be made "
                      f"({self.failed}): --continue will not find this session]")
            return False
        os.close(self._fd)                      # only now: a failure above keeps it
        self.path, self._fd = path, fd
        self.copied = 0                         # a session, not --continue's copy: kept
        self.about = None                       # its first line is written
        show_note(f"[the session log {removed} was removed; the session goes on in {path}]")
        return True


def _stem() -> str:
    """A new session's name, less its number and suffix: session_20260101-120000."""
    return f"session_{time.strftime('%Y%m%d-%H%M%S')}"


def _line(record: dict) -> bytes:
    """A record as the log holds it: one line of JSON (a lone surrogate kept as it came)."""
    line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
    return line.encode("utf-8", errors="surrogatepass")


# ---------------------------------------------------------------- reading

@dataclass
class Resumed:
    messages: list[dict]      # valid for the Messages API
    torn_lines: int           # lines that were not a record (a write cut by a kill, garbage)
    dropped_calls: int        # tool calls left out: never ran, or no result to give them
    interrupted_calls: int    # calls running when the session stopped: answered STOPPED
    about: dict | None = None # whose it was: its first line's "session" (None: not said)
    refused_blocks: int = 0   # blocks of a hand edit the API would refuse, left out


def latest(folder: Path = FOLDER) -> Path | None:
    """The session in folder written to most recently, or None. OSError if the folder cannot
    be read, or is a link: the writer never makes one, and what it points to is never read."""
    try:
        with writer.folder(folder, make=False) as where, os.scandir(where) as entries:
            found = [(_written(entry), _order(Path(entry.name)), entry.name)
                     for entry in entries if fnmatch.fnmatch(entry.name, PATTERN)]
    except FileNotFoundError:
        return None
    # An empty file is a session that recorded nothing (or was killed before it did).
    sessions = [one for one in found if one[0] is not None]
    if not sessions:
        return None
    return folder / max(sessions)[2]


def _written(entry: os.DirEntry) -> int | None:
    """When a session file was last written; None for an empty one, a link (none of ours),
    or one removed since the folder was listed."""
    try:
        if not entry.is_file(follow_symlinks=False):
            return None
        written = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    if written.st_size == 0:
        return None
    return written.st_mtime_ns


def _order(path: Path) -> tuple[str, int]:
    """(time stamp, n) of session_<stamp>_<n>.jsonl: _10 comes after _9."""
    stamp, _, n = path.stem.removeprefix("session_").rpartition("_")
    # ASCII digits only: "①".isdigit() is true, and int() refuses it.
    if n.isascii() and n.isdigit():
        return stamp, int(n)
    return stamp, 0


def load(path: Path) -> list[dict]:
    """The history saved in path, rebuilt valid for the Messages API (repair.py)."""
    return read_session(path).messages


def read_session(path: Path) -> Resumed:
    """load(), and what it had to leave out. Raises OSError if the file cannot be read, and
    ValueError if it is not a regular file."""
    history: list[dict] = []
    ran: list[dict] = []      # tool_result lines after the last message
    torn, about = 0, None
    # Never through a link, and at most LOG_MAX bytes (resume_latest refuses a bigger one).
    for raw in files.read_bytes(path, str(path), LOG_MAX, follow=False).split(b"\n"):
        if not raw.strip():
            continue
        record = _parse(raw)
        if not _apply(history, ran, record):
            torn += 1
        elif isinstance(record.get("session"), dict):
            about = record["session"]
    rebuilt = repair.Rebuild(history, ran)
    # Half an emoji (a lone surrogate) as the live path replaces it: the API refuses it.
    messages = clean.clean_json(rebuilt.messages)
    return Resumed(messages, torn, rebuilt.dropped, rebuilt.interrupted, about, rebuilt.refused)


def _parse(raw: bytes):
    """The JSON value of one line, or None if it is not JSON or nested deeper than MAX_DEPTH."""
    try:
        # NaN, Infinity and 1e999 (Python's json writes the first two; a hand edit may write
        # any) are sent as null: JSON proper has no such number, and every request would fail.
        value = json.loads(raw.decode("utf-8"), parse_constant=lambda name: None,
                           parse_float=_finite)
    except (ValueError, RecursionError):     # UnicodeDecodeError is a ValueError too
        return None
    # Only a line with many brackets can be deep: the others skip the walk below.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        return None
    return value


def _finite(text: str):
    """A number of a log line as a float, or None if it is too big for one (1e999)."""
    value = float(text)
    return value if math.isfinite(value) else None


def _depth(value) -> int:
    """How deeply value's lists and dicts nest; a loop, so garbage cannot exhaust the stack."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((inner, level + 1) for inner in item)
    return deepest


def _apply(history: list, ran: list, record) -> bool:
    """Apply one record to history, in place; False if it is not a record."""
    if not isinstance(record, dict):
        return False
    if "tool_result" in record:
        block = record["tool_result"]
        if not (isinstance(block, dict) and block.get("type") == "tool_result"):
            return False
        ran.append(block)
        return True
    if record.get("compacted") is True and isinstance(record.get("message"), dict):
        history[:] = [record["message"]]
    elif type(record.get("rewind_to")) is int:   # type(): True is an int to Python
        del history[max(record["rewind_to"], 0):]
    elif record.get("role") in ("user", "assistant"):
        history.append(record)
    else:
        return "continued_from" in record or "session" in record
    ran.clear()   # a message after the results holds what the history kept of them
    return True


def resume_latest(folder: Path = FOLDER, resume_from=None,
                  about: dict | None = None) -> tuple[SessionLog, list[dict]]:
    """--continue: the latest session's history, and a new log carrying it on (SessionLog()
    and a note if none can be made). SetupError if there is nothing to continue.
    resume_from(history): the part to go on from (the old log keeps it all); about: this
    run's, as SessionLog.start takes it."""
    try:
        path = latest(folder)
    except OSError as exc:
        raise SetupError(f"cannot continue: {_unreadable(folder, exc)}") from None
    if path is None:
        raise SetupError(f"no saved session in {folder}/ to continue; "
                         "run without --continue to start one")
    try:
        size = path.stat().st_size
        # Read whole, then parsed: a 6 GB (or sparse) log took all the memory there was.
        if size > LOG_MAX:
            raise SetupError(f"the session {path} is {size:,} bytes, more than --continue reads "
                             f"({LOG_MAX:,}): run without --continue to start a new session "
                             "(that one is kept as it is)")
        found = read_session(path)
    except OSError as exc:
        raise SetupError(f"cannot continue the session {path}: {reason(exc)}") from None
    except ValueError as exc:                       # a link or a FIFO put there since
        raise SetupError(f"cannot continue the session: {exc}") from None
    # No message, and no torn line: /clear, or a failed first turn. It goes on as a new
    # conversation; refused, every later --continue would be too.
    if not found.messages and found.torn_lines:
        raise SetupError(f"the session {path} holds no message to continue from: move it out "
                         "of the folder (it is kept as it is) to continue the one before it, "
                         "or run without --continue to start a new session")
    if resume_from is not None:
        found.messages = resume_from(found.messages)
    try:
        log = SessionLog.continued(path, found.messages, folder, about)
        where = f"now logged to {log.path}"
    except OSError as exc:
        log = SessionLog()
        where = (f"no session log: cannot create one in {folder}/ ({reason(exc)}); "
                 "--continue will not find what follows")
    show_note(f"[continuing {path}: {len(found.messages)} messages{_whose(found.about, about)}"
              f"{_left_out(found)}{_other_board(found.about, about)}; {where}]")
    return log, found.messages


def _unreadable(folder: Path, exc: OSError) -> str:
    """Why the folder of sessions cannot be read, in words that name it."""
    if exc.filename is None and exc.errno is None:     # writer's own words name it already
        return str(exc)
    return f"cannot read {folder}/: {reason(exc)}"


def _whose(theirs, mine) -> str:
    """', written by <lesson> for agent <name>, not you (...)' when the session (its own first
    line says) was another lesson's, or a named agent's other than you (named or not)."""
    mine = mine or {}
    if not isinstance(theirs, dict) or not isinstance(theirs.get("lesson"), str):
        return ""
    agent = theirs.get("agent") if isinstance(theirs.get("agent"), str) else ""
    agent = agent.strip()                      # a blank name (a hand edit) is no name
    other_agent = bool(agent and mine.get("agent") != agent)
    if theirs["lesson"] == mine.get("lesson") and not other_agent:
        return ""
    said = f", written by {one_line(theirs['lesson'], NAME_SHOWN)}"
    if agent:
        said += f" for agent {one_line(agent, NAME_SHOWN)}"
    if other_agent:
        you = one_line(mine["agent"], NAME_SHOWN) if mine.get("agent") else "a run with no --name"
        said += f", not you ({you}): --continue resumes the newest session in this folder"
    return said


def _other_board(theirs, mine) -> str:
    """'; it ran on the board X, and this run is on Y: ...' when the session's board (its
    first line says) is not this run's: a new shell without TASK_BOARD went on, unsaid, on
    ./.tasks, where its tasks are not."""
    board = theirs.get("board") if isinstance(theirs, dict) else None
    now = (mine or {}).get("board")
    if not isinstance(board, str) or not now or board == now:
        return ""
    board = one_line(board, 2 * NAME_SHOWN)
    return (f"; it ran on the board {board}, and this run is on {one_line(now, 2 * NAME_SHOWN)}"
            f": its tasks are not here (give --board {board})")


def _left_out(found: Resumed) -> str:
    """' (what load had to skip or change)', or '' if nothing."""
    parts = []
    if not found.messages:
        parts.append("it ended with /clear, or its first turn failed, so a new conversation "
                     "starts")
    if found.torn_lines:
        parts.append(plural(found.torn_lines, "torn line") + " skipped")
    if found.interrupted_calls:
        parts.append(plural(found.interrupted_calls, "tool call") + " stopped while it ran: its "
                     "result says it may have acted")
    if found.dropped_calls:
        parts.append(plural(found.dropped_calls, "tool call") + " without a result left out")
    if found.refused_blocks:
        parts.append(plural(found.refused_blocks, "block") + " of a kind the harness never "
                     "writes there left out: the API would refuse them")
    return f" ({'; '.join(parts)})" if parts else ""


def holds_compaction(messages: list) -> bool:
    """Whether a history holds a compaction block (a summary the API wrote)."""
    return any(block.get("type") == "compaction" for _, _, block in pairing.each_block(messages))


def open_session(continue_latest: bool = False, folder: Path = FOLDER, resume_from=None,
                 about: dict | None = None) -> tuple[SessionLog, list[dict]]:
    """Where a run starts: its log (SessionLog() and a note if none can be made), and the
    history it starts from: [] or, with continue_latest, resume_latest's. about: as
    SessionLog.start takes it."""
    if continue_latest:
        return resume_latest(folder, resume_from, about)
    try:
        return SessionLog.start(folder, about), []
    except OSError as exc:
        show_note(f"[no session log: cannot create it in {folder}/ ({reason(exc)}); "
                  "--continue will not find this session]")
    return SessionLog(), []
