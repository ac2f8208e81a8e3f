"""The session log: every message of the conversation appended to disk as it happens.

Relied on by all three lessons and the cli, through the Run (harness/run.py): cli opens the
log where a run starts (open_session, which also serves --continue) and keeps it on the Run;
each loop calls run.log.record(messages) once a round, after appending a reply (cli after
each turn too); tool_calls.kept() calls run.log.tool_result(block) the moment one tool
call's result exists. This module only saves and reads back: the rule that every tool_use
gets one tool_result, and the repair of a history that breaks it, are harness/pairing.py's.

    .transcripts/session_20260101-120000_1.jsonl     one JSON object a line:
      {"role": "user", "content": "fix the tests"}                    a message
      {"role": "assistant", "content": [...tool_use...]}
      {"tool_result": {"type": "tool_result", ...}}                    one call's result
      {"role": "user", "content": [...tool_result...]}                 the whole batch's results
      {"compacted": true, "message": {"role": "user", ...}}           the history became this
      {"rewind_to": 3}                                                 the history was cut to 3
      {"continued_from": "session_20260101-115900_1.jsonl"}           for a reader; load skips it

Without each piece:
- one os.write of a whole line on an O_APPEND descriptor: a kill -9 in the middle of a
  write could leave half a line in the middle of the file, or (with a rewrite of the
  whole file) no file at all. Now it can only tear the last line, and load skips it.
- a new file made by harness/writer.py, 0600: the log holds the whole conversation and every
  tool output, and was readable by every user of the machine (0644).
- the reply recorded before its calls run, and a tool_result line for each call as it
  finishes: Ctrl-C, a closed terminal or kill -9 in the middle of a batch would lose every
  call that ran in it (their results were only in memory), and --continue would do that
  work again. Now only the call that was running has no result; load answers it (pairing's
  STOPPED, "it may have acted") rather than leaving it out, so the model checks before doing
  it again. Once the batch's whole message of results is recorded, load uses that instead.
- the "compacted" record: a resumed session would start again from a context that was
  already too long; now it starts from the summary, as the live session did.
- load through pairing.repair: a torn or hand-edited log, or one that stopped in the middle
  of a batch, gives a history the API refuses on every later turn.
- record: a loop that forgets one append() loses a message for good; record(history) works
  out what changed (new messages, a compaction, a turn rolled back) from the list itself.
- ran: after a failed turn the cli cannot tell which calls of the last reply ran (their
  results were written one by one, not yet as a message), and the model does them again.
- SessionLog() with no file: a run without a log (a test, a benchmark, a folder where none
  can be made) keeps the same bookkeeping and writes nothing.
- reading into one list in place: a list copied for each line made reading quadratic (an
  80,000-line session took 19 s or more; now about a second).
- _parse and MAX_DEPTH: a garbage line (JSON 100,000 brackets deep) ended --continue in a
  RecursionError traceback, and so did one nested just under json's limit (read, then
  written again to the new log a few calls deeper). Both now count as torn lines.
- resume_latest's note where no new log can be created (a read-only .transcripts): --continue
  refused to resume a conversation it could read; now it goes on without a log, as a fresh
  run does.

No fsync per line: a kill -9 (or a crash) of the process loses nothing the kernel has;
only a power cut could lose the last lines, and a fsync per message would cost more than
the model call it records on some disks.
"""

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from harness import config, pairing, writer
from harness.errors import SetupError, reason
from harness.terminal import show_note

FOLDER = config.TRANSCRIPTS     # relative: a session belongs to the folder you run in
PATTERN = "session_*.jsonl"     # what latest() looks for; transcript_*.jsonl (s06) is not a session
MAX_DEPTH = 100   # levels of nesting a record may have; a real message has about ten. Deeper is
                  # garbage, and JSON nested ~1,000 deep makes json raise RecursionError


# ---------------------------------------------------------------- writing

class SessionLog:
    """An open session file; a write that fails stops the log with a note, never the agent.

    SessionLog() has no file: it keeps track of the history and writes nothing."""

    def __init__(self, path: Path | None = None, fd: int | None = None):
        self.path, self._fd = path, fd
        self._recorded: list = []    # the history as the log holds it, in order (for record)
        self._history: list | None = None   # the loop's own list, as record() last saw it
        self.ran: dict = {}          # tool_use_id -> result, from tool_result() since the
                                     # last message
        self.failed: str | None = None  # the reason writing stopped, once it has

    @classmethod
    def start(cls, folder: Path = FOLDER) -> "SessionLog":
        """A new session_<time>_<n>.jsonl in folder, 0600; never opens an existing file (nor
        a link: writer.open_numbered)."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path, fd = writer.open_numbered(folder, f"session_{stamp}", ".jsonl", writer.PRIVATE)
        return cls(path, fd)

    @classmethod
    def continued(cls, earlier: Path, history: list[dict], folder: Path = FOLDER) -> "SessionLog":
        """A new session that starts with history (load(earlier), repaired): --continue.

        The earlier file is left as it was; the new one holds the whole history again, so
        each session file can be read on its own.
        """
        log = cls.start(folder)
        log._write_record({"continued_from": earlier.name})   # for a reader; load skips it
        for message in history:
            log.append(message)
        return log

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

        Messages are compared by identity: the loop appends new dicts and a compaction
        replaces the list's contents, and neither edits a message already in it.
        """
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
        """One tool call's result, on disk before the next call runs.

        Call it the moment the result exists, before the next call of the batch runs: then a
        stop of any kind loses only the call that was running. The loop has appended the
        reply holding the call since its last record(), so that list is recorded first: the
        call reaches the disk before its result.
        """
        if self._history is not None:
            self.record(self._history)
        self.ran[block.get("tool_use_id")] = block
        self._write_record({"tool_result": block})

    def close(self) -> None:
        """Close the file; one that holds nothing (a REPL that never asked the model) is
        removed, so that --continue finds the last session that did something."""
        if self._fd is not None:
            empty = os.fstat(self._fd).st_size == 0
            os.close(self._fd)
            self._fd = None
            if empty:
                self.path.unlink(missing_ok=True)

    def _write_record(self, record: dict) -> None:
        if self.failed or self._fd is None:     # stopped, or no file: nothing to write
            return
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        self._write(line)

    def _write(self, line: str) -> None:
        data = line.encode("utf-8", errors="surrogatepass")
        try:
            while data:          # a regular file takes it all at once; a short write is retried
                data = data[os.write(self._fd, data):]
        except OSError as exc:
            self.failed = reason(exc)
            show_note(f"[the session log {self.path} stopped: {self.failed}; the session goes on, "
                      "but --continue will resume from before this point]")


# ---------------------------------------------------------------- reading

@dataclass
class Resumed:
    messages: list[dict]      # valid for the Messages API
    torn_lines: int           # lines that were not a record (a write cut by a kill, garbage)
    dropped_calls: int        # tool calls left out: never ran, or no result to give them
    interrupted_calls: int    # calls running when the session stopped: answered STOPPED


def latest(folder: Path = FOLDER) -> Path | None:
    """The session in folder written to most recently, or None."""
    if not folder.is_dir():
        return None
    # An empty file is a session that recorded nothing (or was killed before it did); a link
    # is none of ours (the writer never makes one), and what it points to is never read.
    sessions = [p for p in folder.glob(PATTERN)
                if not p.is_symlink() and p.is_file() and p.stat().st_size > 0]
    if not sessions:
        return None
    return max(sessions, key=lambda p: (_modified(p), _order(p)))


def _modified(path: Path) -> int:
    """path's modification time; -1 if it has gone since the folder was listed."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1


def _order(path: Path) -> tuple[str, int]:
    """(time stamp, n) of session_<stamp>_<n>.jsonl: _10 comes after _9."""
    stamp, _, n = path.stem.removeprefix("session_").rpartition("_")
    return stamp, int(n) if n.isdigit() else 0


def load(path: Path) -> list[dict]:
    """The history saved in path, rebuilt valid for the Messages API (pairing.repair)."""
    return read_session(path).messages


def read_session(path: Path) -> Resumed:
    """load(), and what it had to leave out. Raises OSError if the file cannot be read."""
    history: list[dict] = []
    ran: list[dict] = []      # tool_result lines after the last message: the batch that ran
    torn = 0
    for raw in path.read_bytes().split(b"\n"):
        if not raw.strip():
            continue
        record = _parse(raw)
        if not _apply(history, ran, record):
            torn += 1
    rebuilt = pairing.Rebuild(history, ran)
    return Resumed(rebuilt.messages, torn, rebuilt.dropped, rebuilt.interrupted)


def _parse(raw: bytes):
    """The JSON value of one line, or None if it is not JSON or nested deeper than MAX_DEPTH."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):     # UnicodeDecodeError is a ValueError too
        return None
    # Only a line with many brackets can be deep: the others skip the walk below.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        return None
    return value


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
    """Apply one record to history (in place, so reading stays linear); False if it is not one."""
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
        return "continued_from" in record
    ran.clear()   # a message recorded after the results: it holds what the history kept
    return True


def resume_latest(folder: Path = FOLDER, resume_from=None) -> tuple[SessionLog, list[dict]]:
    """--continue: the history of the latest session, and a new log that carries it on.

    SetupError if there is nothing to continue. A new log that cannot be created costs a note:
    the conversation goes on without one (SessionLog()), as a fresh run does. resume_from:
    given the history read back, the part to go on from (the old log keeps it all).
    """
    path = latest(folder)
    if path is None:
        raise SetupError(f"no saved session in {folder}/ to continue; "
                         "run without --continue to start one")
    try:
        found = read_session(path)
    except OSError as exc:
        raise SetupError(f"cannot continue the session {path}: {reason(exc)}") from None
    if not found.messages:
        raise SetupError(f"the session {path} holds no message to continue from")
    if resume_from is not None:
        found.messages = resume_from(found.messages)
    try:
        log = SessionLog.continued(path, found.messages, folder)
        where = f"now logged to {log.path}"
    except OSError as exc:
        log = SessionLog()
        where = (f"no session log: cannot create one in {folder}/ ({reason(exc)}); "
                 "--continue will not find what follows")
    show_note(f"[continuing {path}: {len(found.messages)} messages{_left_out(found)}; {where}]")
    return log, found.messages


def _left_out(found: Resumed) -> str:
    """' (what load had to skip or change)', or '' if nothing."""
    parts = []
    if found.torn_lines:
        parts.append(_count(found.torn_lines, "torn line") + " skipped")
    if found.interrupted_calls:
        parts.append(_count(found.interrupted_calls, "tool call") + " stopped while it ran: its "
                     "result says it may have acted")
    if found.dropped_calls:
        parts.append(_count(found.dropped_calls, "tool call") + " without a result left out")
    return f" ({'; '.join(parts)})" if parts else ""


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def holds_compaction(messages: list) -> bool:
    """Whether a history holds a compaction block (a summary the API wrote)."""
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "compaction":
                return True
    return False


def open_session(continue_latest: bool = False, folder: Path = FOLDER,
                 resume_from=None) -> tuple[SessionLog, list[dict]]:
    """Where a run starts: its log, and the history it starts from ([] or the resumed one).

    A new log that cannot be created costs the session nothing but a note (it gets a
    SessionLog() that writes nothing); --continue with nothing to continue raises SetupError.
    """
    if continue_latest:
        return resume_latest(folder, resume_from)
    try:
        return SessionLog.start(folder), []
    except OSError as exc:
        show_note(f"[no session log: cannot create it in {folder}/ ({reason(exc)}); "
                  "--continue will not find this session]")
    return SessionLog(), []
