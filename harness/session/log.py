"""The session log: every message of the conversation appended to disk as it happens.

Relied on by all three lessons: each loop calls record(messages) once a round (and cli.run_cli
after each turn), and run_cli opens the log and serves --continue. A compaction (s06) replaces
the history; the next record() sees that and writes the "compacted" line.

    .transcripts/session_20260101-120000_1.jsonl     one JSON object a line:
      {"role": "user", "content": "fix the tests"}                    a message
      {"role": "assistant", "content": [...tool_use...]}
      {"role": "user", "content": [...tool_result...]}
      {"compacted": true, "message": {"role": "user", ...}}           the history became this
      {"rewind_to": 3}                                                 the history was cut to 3

Without each piece:
- one os.write of a whole line on an O_APPEND descriptor: a kill -9 in the middle of a
  write could leave half a line in the middle of the file, or (with a rewrite of the
  whole file) no file at all. Now it can only tear the last line, and load skips it.
- the "compacted" record: a resumed session would start again from a context that was
  already too long; now it starts from the summary, as the live session did.
- load's repairs: a session killed between a tool call and its result would be rebuilt
  with a dangling tool_use, and the API refuses the whole request (400). The calls that
  did run, with their results, are kept, so the model does not run them again.
- sync: a loop that forgets one append() loses a message for good; sync(history) works
  out what changed (new messages, a compaction, a turn rolled back) from the list itself.

No fsync per line: a kill -9 (or a crash) of the process loses nothing the kernel has;
only a power cut could lose the last lines, and a fsync per message would cost more than
the model call it records on some disks.
"""

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from harness.errors import SetupError

FOLDER = Path(".transcripts")   # relative: a session belongs to the folder you run in
PATTERN = "session_*.jsonl"     # what latest() looks for; transcript_*.jsonl (s06) is not a session
MAX_NAMES_PER_SECOND = 1000     # sessions started in one second before start() gives up


# ---------------------------------------------------------------- writing

class SessionLog:
    """An open session file; append() never raises, so logging cannot stop the agent."""

    def __init__(self, path: Path, fd: int):
        self.path, self._fd = path, fd
        self._recorded: list = []    # the message objects written, in order (for sync)
        self.failed: str | None = None  # the reason writing stopped, once it has

    @classmethod
    def start(cls, folder: Path = FOLDER) -> "SessionLog":
        """A new session_<time>_<n>.jsonl in folder; never opens an existing file."""
        folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for n in range(1, MAX_NAMES_PER_SECOND + 1):
            path = folder / f"session_{stamp}_{n}.jsonl"
            try:   # O_EXCL: fail rather than share or overwrite another session's file
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
            except FileExistsError:
                continue
            return cls(path, fd)
        raise OSError(f"too many sessions named session_{stamp}_*.jsonl in {folder}")

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
        if self._write_record(message):
            self._recorded.append(message)

    def compacted(self, summary_message: dict) -> None:
        """The history was replaced by [summary_message]: a resume starts from it."""
        if self._write_record({"compacted": True, "message": summary_message}):
            self._recorded = [summary_message]

    def rewound(self, length: int) -> None:
        """The history was cut back to its first `length` messages (a failed turn undone)."""
        if self._write_record({"rewind_to": length}):
            del self._recorded[length:]

    def sync(self, history: list[dict]) -> None:
        """Record whatever changed since the last call: new messages, a compaction, a rollback.

        Messages are compared by identity: the loop appends new dicts and a compaction
        replaces the list's contents, and neither edits a message already in it.
        """
        same = 0
        while (same < min(len(history), len(self._recorded))
               and history[same] is self._recorded[same]):
            same += 1
        if same == 0 and self._recorded and history:
            self.compacted(history[0])
            same = 1
        elif same < len(self._recorded):
            self.rewound(same)
        for message in history[same:]:
            self.append(message)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _write_record(self, record: dict) -> bool:
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        return self._write(line)

    def _write(self, line: str) -> bool:
        if self.failed or self._fd is None:
            return False
        data = line.encode("utf-8", errors="surrogatepass")
        try:
            while data:          # a regular file takes it all at once; a short write is retried
                data = data[os.write(self._fd, data):]
        except OSError as exc:
            from harness.errors import reason
            from harness.terminal import show_note
            self.failed = reason(exc)
            show_note(f"[the session log {self.path} stopped: {self.failed}; the session goes on, "
                      "but --continue will resume from before this point]")
            return False
        return True


# ---------------------------------------------------------------- reading

@dataclass
class Resumed:
    messages: list[dict]      # valid for the Messages API
    torn_lines: int           # lines that were not JSON (a write cut by a kill)
    dropped_calls: int        # tool calls without a result, left out


def latest(folder: Path = FOLDER) -> Path | None:
    """The session in folder written to most recently, or None."""
    if not folder.is_dir():
        return None
    sessions = [p for p in folder.glob(PATTERN) if p.is_file()]
    if not sessions:
        return None
    return max(sessions, key=lambda p: (p.stat().st_mtime_ns, _order(p)))


def _order(path: Path) -> tuple[str, int]:
    """(time stamp, n) of session_<stamp>_<n>.jsonl: _10 comes after _9."""
    stamp, _, n = path.stem.removeprefix("session_").rpartition("_")
    return stamp, int(n) if n.isdigit() else 0


def load(path: Path) -> list[dict]:
    """The history saved in path, rebuilt valid for the Messages API."""
    return read_session(path).messages


def read_session(path: Path) -> Resumed:
    """load(), and what it had to leave out. Raises OSError if the file cannot be read."""
    history, torn = [], 0
    for raw in path.read_bytes().split(b"\n"):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except ValueError:       # UnicodeDecodeError is a ValueError too
            torn += 1
            continue
        history = _apply(history, record)
    messages, dropped = repair(history)
    return Resumed(messages, torn, dropped)


def _apply(history: list, record) -> list:
    if not isinstance(record, dict):
        return history
    if record.get("compacted") is True and isinstance(record.get("message"), dict):
        return [record["message"]]
    if "rewind_to" in record and isinstance(record["rewind_to"], int):
        return history[:max(record["rewind_to"], 0)]
    if record.get("role") in ("user", "assistant"):
        return history + [record]
    return history


def resume_latest(folder: Path = FOLDER) -> tuple[SessionLog, list[dict]]:
    """--continue: a new log that carries on the latest session, and its history; or SetupError."""
    path = latest(folder)
    if path is None:
        raise SetupError(f"no saved session in {folder}/ to continue; run without --continue to start one")
    try:
        found = read_session(path)
        if not found.messages:
            raise SetupError(f"the session {path} holds no message to continue from")
        log = SessionLog.continued(path, found.messages, folder)
    except OSError as exc:
        from harness.errors import reason
        raise SetupError(f"cannot continue the session {path}: {reason(exc)}") from None
    from harness.terminal import show_note
    left_out = [f"{found.torn_lines} torn line{'s' * (found.torn_lines != 1)} skipped"] * bool(found.torn_lines)
    left_out += [f"{found.dropped_calls} tool call{'s' * (found.dropped_calls != 1)} "
                 "without a result left out"] * bool(found.dropped_calls)
    show_note(f"[continuing {path}: {len(found.messages)} messages"
              + (f" ({'; '.join(left_out)})" if left_out else "") + f"; now logged to {log.path}]")
    return log, found.messages


# ---------------------------------------------------------------- the log the loop writes to

_active: SessionLog | None = None   # set by the cli; tests and benchmarks that call a loop have none


def open_session(continue_latest: bool = False, folder: Path = FOLDER) -> list[dict]:
    """The history a run starts from ([] or the resumed one); every record() now goes to its log.

    A new log that cannot be created costs the session nothing but a note; --continue with
    nothing to continue raises SetupError.
    """
    global _active
    close_session()
    if continue_latest:
        _active, history = resume_latest(folder)
        return history
    try:
        _active = SessionLog.start(folder)
    except OSError as exc:
        from harness.errors import reason
        from harness.terminal import show_note
        show_note(f"[no session log: cannot create it in {folder}/ ({reason(exc)}); "
                  "--continue will not find this session]")
    return []


def record(history: list[dict]) -> None:
    """Bring the active log up to date with history (see SessionLog.sync); no log, no-op."""
    if _active is not None:
        _active.sync(history)


def close_session() -> None:
    global _active
    if _active is not None:
        _active.close()
        _active = None


# ---------------------------------------------------------------- repairs

def repair(history: list[dict]) -> tuple[list[dict], int]:
    """(a history the API accepts, tool calls dropped).

    A tool_use is kept only if the next message answers it; a tool_result only if it answers
    the message just before it, once; results come first in their message; the first message
    is the user's; no empty text.
    """
    kept, dropped = [], 0
    for n, message in enumerate(history):
        content = _blocks(message.get("content"))
        if message.get("role") == "assistant":
            if not kept:              # the first message must be the user's
                dropped += sum(b.get("type") == "tool_use" for b in content)
                continue
            answered = _result_ids(history[n + 1]) if n + 1 < len(history) else set()
            calls = [b for b in content if b.get("type") == "tool_use"]
            content = [b for b in content if b.get("type") != "tool_use" or b.get("id") in answered]
            dropped += len(calls) - sum(b.get("type") == "tool_use" for b in content)
        else:
            content = _answers(content, kept[-1] if kept else None)
        if content:
            text = message.get("content")   # a prompt stays the plain string it was
            kept.append({**message, "content": text if isinstance(text, str) else content})
    return kept, dropped


def _blocks(content) -> list[dict]:
    """The content as a list of blocks, without empty text (which the API refuses)."""
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and isinstance(b.get("type"), str)
            and (b["type"] != "text" or (isinstance(b.get("text"), str) and b["text"].strip()))]


def _result_ids(message: dict) -> set:
    if message.get("role") != "user":
        return set()
    return {b.get("tool_use_id") for b in _blocks(message.get("content"))
            if b.get("type") == "tool_result"}


def _answers(content: list[dict], previous: dict | None) -> list[dict]:
    """A user message's blocks: results for the previous message's calls first, each once."""
    pending = {b.get("id") for b in (previous or {}).get("content", [])
               if b.get("type") == "tool_use"} if (previous or {}).get("role") == "assistant" else set()
    results, others = [], []
    for block in content:
        if block.get("type") == "tool_result":
            if block.get("tool_use_id") in pending:
                pending.discard(block["tool_use_id"])     # a second result for one id is dropped
                results.append(block)
        else:
            others.append(block)
    return results + others


def tool_result(block: dict) -> None:   # TEMP shim until the session log records it
    pass
