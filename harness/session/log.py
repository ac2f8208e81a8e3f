"""The session log: every message of the conversation appended to disk as it happens.

Relied on by all three lessons and the cli: each loop calls record(messages) once a round and
after appending a reply (cli.run_cli after each turn too); the harness calls tool_result(block)
the moment one tool call's result exists; the loop passes each reply through unique_ids()
before appending it; after a failed turn the cli makes the live history valid again with
repair_live(); run_cli opens the log (open_session) and serves --continue (resume_latest).

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
  work again. Now only the call that was running has no result; load answers it INTERRUPTED
  ("it may have acted") rather than leaving it out, so the model checks before doing it
  again. Once the batch's whole message of results is recorded, load uses that instead.
- the "compacted" record: a resumed session would start again from a context that was
  already too long; now it starts from the summary, as the live session did.
- repair: the API refuses a whole request (400), on every later turn, for one tool_use
  without its result, a result without its call, a tool_use id used twice, or a tool input
  that is not a JSON object. load and repair_live rebuild the history so that the API takes
  it and every call that ran keeps its result, so the model does not run it again.
- unique_ids: an endpoint that numbers its tool_use ids from 1 in each process reuses them
  after --continue; the API refuses the request, and layer 1 takes the new result for an old
  one it already cleared ("[Previous: used bash]").
- sync: a loop that forgets one append() loses a message for good; sync(history) works
  out what changed (new messages, a compaction, a turn rolled back) from the list itself.
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

from harness import config, writer
from harness.errors import SetupError, reason
from harness.terminal import show_note

FOLDER = config.TRANSCRIPTS     # relative: a session belongs to the folder you run in
PATTERN = "session_*.jsonl"     # what latest() looks for; transcript_*.jsonl (s06) is not a session
INTERRUPTED = "interrupted; it may have acted"   # the result of a call running at the stop
MAX_DEPTH = 100   # levels of nesting a record may have; a real message has about ten. Deeper is
                  # garbage, and JSON nested ~1,000 deep makes json raise RecursionError


# ---------------------------------------------------------------- writing

class SessionLog:
    """An open session file; a write that fails stops the log with a note, never the agent."""

    def __init__(self, path: Path, fd: int):
        self.path, self._fd = path, fd
        self._recorded: list = []    # the history as the log holds it, in order (for sync)
        self._history: list | None = None   # the loop's own list, as record() last saw it
        self.ran: dict = {}          # tool_use_id -> result, from result() since the last message
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

    def sync(self, history: list[dict]) -> None:
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

    def result(self, block: dict) -> None:
        """One tool call's result, on disk before the next call runs.

        The loop has appended the reply holding the call since its last record(), so that
        list is synced first: the call reaches the disk before its result.
        """
        if self._history is not None:
            self.sync(self._history)
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
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        self._write(line)

    def _write(self, line: str) -> None:
        if self.failed or self._fd is None:
            return
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
    interrupted_calls: int    # calls running when the session stopped: answered INTERRUPTED


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
    """The history saved in path, rebuilt valid for the Messages API."""
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
    rebuilt = _Rebuild(history, ran)
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


def resume_latest(folder: Path = FOLDER) -> tuple[SessionLog | None, list[dict]]:
    """--continue: the history of the latest session, and a new log that carries it on.

    SetupError if there is nothing to continue. A new log that cannot be created costs a note:
    the conversation goes on without one, as a fresh run does.
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
    try:
        log = SessionLog.continued(path, found.messages, folder)
        where = f"now logged to {log.path}"
    except OSError as exc:
        log = None
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


# ---------------------------------------------------------------- the log the loop writes to

_active: SessionLog | None = None   # set by the cli; tests and benchmarks calling a loop have none


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
        show_note(f"[no session log: cannot create it in {folder}/ ({reason(exc)}); "
                  "--continue will not find this session]")
    return []


def record(history: list[dict]) -> None:
    """Bring the active log up to date with history (see SessionLog.sync); no log, no-op."""
    if _active is not None:
        _active.sync(history)


def tool_result(block: dict) -> None:
    """One call's result (a tool_result block), written at once; no log, no-op.

    Call it the moment the result exists, before the next call of the batch runs: then a
    stop of any kind loses only the call that was running.
    """
    if _active is not None:
        _active.result(block)


def close_session() -> None:
    global _active
    if _active is not None:
        _active.close()
        _active = None


# ---------------------------------------------------------------- repairs

def repair(history: list[dict], ran: list[dict] | None = None) -> tuple[list[dict], int]:
    """(a history the API accepts, tool calls left out).

    A tool_use is kept if the next message answers it. If it is the last message (the batch
    was running when the session stopped), its calls are answered from ran (the results
    written one by one), the first call without a result gets INTERRUPTED (it may have
    acted), and the calls after it are left out: the calls of a batch run one at a time, so
    those never ran. A tool_result is kept only if it answers the message just before it,
    once; results come first in their message; the first message is the user's; no empty
    text; a tool_use id used twice gets a new one (its result too); a tool input saved as
    JSON text is decoded, and a call whose input is not a JSON object is left out with its
    result. Messages that need no change are returned as the same objects, so record()
    afterwards writes only what changed.
    """
    rebuilt = _Rebuild(history, ran or [])
    return rebuilt.messages, rebuilt.dropped


def repair_live(history: list[dict]) -> tuple[list[dict], int]:
    """repair() for the running session's history after a failed turn (cli).

    The calls of a last, unanswered reply are answered with the results tool_result() was
    given; the one that was running gets INTERRUPTED, the ones after it are left out. The
    last prompt and a plain-string first message are kept as they are.
    """
    ran = list(_active.ran.values()) if _active is not None else []
    return repair(history, ran)


def unique_ids(history: list[dict], message: dict) -> dict:
    """message (a new reply), with each tool_use id that history or the message already used
    renamed; message itself if none is. Call it before appending the reply, and answer each
    call under the id in the returned message: its tool_use blocks keep their order."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    earlier = _ids_in(history)
    names = _NewIds(earlier | _ids_in([message]))
    renamed, blocks = False, []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            if isinstance(block.get("id"), str) and block["id"] in earlier:
                block = {**block, "id": names.fresh(block["id"])}
                renamed = True
            earlier.add(block.get("id"))
        blocks.append(block)
    return {**message, "content": blocks} if renamed else message


class _Rebuild:
    """repair's work: .messages (valid for the API), .dropped and .interrupted (calls)."""

    def __init__(self, history: list, ran: list):
        self.messages: list[dict] = []
        self.dropped = self.interrupted = 0
        self._used: set = set()               # the ids of the calls kept: each may appear once
        self._names = _NewIds(_ids_in(history) | _ids_in([{"content": ran}]))
        owed = None       # the results the last kept reply's calls get, for the next message
        for n, message in enumerate(history):
            if not isinstance(message, dict):
                continue
            following = history[n + 1] if n + 1 < len(history) else None
            if message.get("role") == "assistant":
                owed = self._reply(message, following, ran, running=following is None)
            elif message.get("role") == "user":
                self._user(message, owed or [])
                owed = None

    def _reply(self, message: dict, following, ran: list, running: bool) -> list | None:
        """Keep the reply with the calls that can be answered; return the results the next
        message owes them. running: the reply is the last message, so its batch was running."""
        blocks = _blocks(message.get("content"))
        if not self.messages:              # the first message must be the user's
            self.dropped += sum(b["type"] == "tool_use" for b in blocks)
            return None
        answers = ran if running else _results_in(following)
        kept, results = self._calls(blocks, answers, running)
        if not kept:
            return None
        content = message.get("content")
        if isinstance(content, str) or _same(kept, content):   # nothing changed: the same object
            self.messages.append(message)
        else:
            self.messages.append({**message, "content": kept})
        if isinstance(following, dict) and following.get("role") == "user":
            return results
        if results:                        # no user message follows: one for the results
            self.messages.append({"role": "user", "content": results})
        return None

    def _calls(self, blocks: list, answers: list, running: bool) -> tuple[list, list]:
        """(the blocks kept, the results of their calls in order)."""
        by_id: dict = {}                   # id -> its results in order (an id twice: two)
        for block in answers:
            if isinstance(block.get("tool_use_id"), str) and _sendable_result(block):
                by_id.setdefault(block["tool_use_id"], []).append(block)
        kept, results = [], []
        marked = False                     # INTERRUPTED goes to one call: the one running
        for block in blocks:
            if block["type"] == "tool_result":   # only a user message may hold one
                continue
            if block["type"] != "tool_use":
                kept.append(block)
                continue
            call = _sendable(block)
            queue = by_id.get(call["id"], []) if call is not None else []
            answer = queue.pop(0) if queue else None
            if call is not None and answer is None and running and not marked:
                answer = {"type": "tool_result", "tool_use_id": call["id"],
                          "content": INTERRUPTED, "is_error": True}
                marked = True
                self.interrupted += 1
            if call is None or answer is None:
                self.dropped += 1
                continue
            if call["id"] in self._used:   # an id used before: the call and its result renamed
                new = self._names.fresh(call["id"])
                call, answer = {**call, "id": new}, {**answer, "tool_use_id": new}
            self._used.add(call["id"])
            kept.append(call)
            results.append(answer)
        return kept, results

    def _user(self, message: dict, owed: list) -> None:
        """Keep a user message: the results owed to the reply before it first, then the rest."""
        blocks = _blocks(message.get("content"))
        content = owed + [b for b in blocks if b["type"] not in ("tool_result", "tool_use")]
        if not content:
            return
        text = message.get("content")
        if isinstance(text, str) or _same(content, text):   # a prompt stays the string it was
            self.messages.append(message)
        else:
            self.messages.append({**message, "content": content})


def _blocks(content) -> list[dict]:
    """The content as a list of blocks, without empty text (which the API refuses)."""
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and isinstance(b.get("type"), str)
            and (b["type"] != "text" or (isinstance(b.get("text"), str) and b["text"].strip()))]


def _results_in(message) -> list[dict]:
    """The tool_result blocks of a user message, in order."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return []
    return [b for b in _blocks(message.get("content")) if b["type"] == "tool_result"]


def _sendable(call: dict) -> dict | None:
    """The tool_use as the API takes it (input decoded from JSON text), or None if it cannot be."""
    if not (isinstance(call.get("id"), str) and call["id"] and isinstance(call.get("name"), str)):
        return None
    given = call.get("input")
    if isinstance(given, dict):
        return call
    try:
        decoded = json.loads(given) if isinstance(given, str) else None
    except (ValueError, RecursionError):
        return None
    return {**call, "input": decoded} if isinstance(decoded, dict) else None


def _sendable_result(block: dict) -> bool:
    """Whether the API takes this tool_result's content: none, a string or a list of blocks."""
    return isinstance(block.get("content", ""), (str, list))


def _same(blocks: list, content) -> bool:
    """Whether blocks are content's own blocks, all of them, in order (nothing was changed)."""
    return (isinstance(content, list) and len(blocks) == len(content)
            and all(a is b for a, b in zip(blocks, content, strict=True)))


def _ids_in(history: list) -> set:
    """Every tool_use id, and every id a tool_result names, in history."""
    ids = set()
    for message in history:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            named = block.get("id") if block.get("type") == "tool_use" else block.get("tool_use_id")
            if isinstance(named, str):
                ids.add(named)
    return ids


class _NewIds:
    """New tool_use ids, old_2, old_3, ..., that no message uses (taken grows with each)."""

    def __init__(self, taken: set):
        self.taken = taken
        self.next: dict = {}   # old -> the number to try next, so that renaming one id
                               # many times (an endpoint with one id for all) stays linear

    def fresh(self, old: str) -> str:
        n = self.next.get(old, 2)
        while f"{old}_{n}" in self.taken:
            n += 1
        self.next[old] = n + 1
        self.taken.add(f"{old}_{n}")
        return f"{old}_{n}"
