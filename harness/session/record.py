"""A record of one run, in memory: what the session page, /context and /cost show.

Relied on by all three lessons through a line each (terminal.show_usage records every model
call, s03's run_tool_calls every tool call, s06 its clearings and compactions, s07 its board),
and by session_page.py and session_views.py, which only read it. Without each piece:
- call(): the page has no bars and /cost nothing to add up.
- tool(): the page cannot say which tool calls made the context grow.
- cleared() / compacted(): the chart shows the context shrink with no reason given.
- board() / watch_board(): the picture of s07's task graph is missing.
- _never_raises: a bug in this bookkeeping would stop the lesson it only watches.
"""

import functools
import json
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

ARGS_CHARS = 300            # a tool call's arguments kept for the page (a write_file can be huge)
OUTPUT_CHARS = 600          # a tool result's preview kept for the page
SUMMARY_CHARS = 20_000      # a compaction's summary kept whole up to this; it is shown on the page
MAX_TOOL_CALLS = 5_000      # a long REPL session keeps memory bounded; the page says how many were left out
CACHE_LIFETIME = 300        # seconds the API keeps a cached prefix after its last use (5 minutes)


@dataclass
class ModelCall:
    """One model call's usage, as the API reported it."""
    number: int                 # 1, 2, ... in the order of the run
    label: str                  # "tokens" for the loop's calls, "summary call tokens" for a summary
    uncached: int               # input_tokens: input neither read from nor written to the cache
    cache_read: int             # cache_read_input_tokens: 0.1 x the price
    cache_written: int          # cache_creation_input_tokens: 1.25 x the price
    output: int                 # output_tokens
    threshold: Optional[int]    # COMPACT_THRESHOLD in force at this call (None: the lesson has none)
    at: float                   # time.time() when it was recorded

    @property
    def input(self) -> int:
        return self.uncached + self.cache_read + self.cache_written

    @property
    def is_summary(self) -> bool:
        return "summary" in self.label


@dataclass
class ToolCall:
    after_call: int             # the number of the model call that asked for it
    name: str
    args: str                   # JSON, cut to ARGS_CHARS
    output: str                 # cut to OUTPUT_CHARS
    is_error: bool


@dataclass
class Cleared:
    before_call: int            # layer 1 cleared this batch while building this call's request
    count: int                  # tool results that became placeholders
    tokens: int                 # about how many tokens that freed


@dataclass
class BoardTask:
    id: int
    subject: str
    status: str
    owner: Optional[str]
    blocked_by: list            # what it waits for now
    unblocked: list             # finished: the tasks that waited for it (s07 keeps this to reopen it)


@dataclass
class Compaction:
    number: int                 # 1, 2, ... in the order of the run
    after_call: int             # the summary call that produced it
    before: int                 # tokens before (the lesson's estimate)
    after: int                  # tokens after
    summary: str
    transcript: str             # where the full history was saved
    board: Optional[list] = None  # list[BoardTask] read at this compaction (s07), else None


@dataclass
class SessionRecord:
    lesson: str = ""
    started: float = field(default_factory=time.time)
    calls: list = field(default_factory=list)         # list[ModelCall]
    tools: list = field(default_factory=list)         # list[ToolCall]
    clearings: list = field(default_factory=list)     # list[Cleared]
    compactions: list = field(default_factory=list)   # list[Compaction]
    final_board: Optional[list] = None                # list[BoardTask] at the end (s07)
    tools_left_out: int = 0
    problems: list = field(default_factory=list)      # bookkeeping that failed, shown on the page
    current_threshold: Optional[int] = None
    board_source: Optional[Callable[[], dict]] = None  # s07: reads the board when a snapshot is due


def _never_raises(method):
    """The record only watches the lesson: whatever goes wrong here is noted, never raised."""
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a lesson must not stop for its own bookkeeping
            if len(self.data.problems) < 20:
                self.data.problems.append(f"{method.__name__}: {type(exc).__name__}: {exc}")
            return None
    return guarded


def usage_counts(usage):
    """(uncached input, read from cache, written to cache, output); a missing or null field is 0."""
    names = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
             "output_tokens")
    return tuple(int(getattr(usage, n, None) or 0) for n in names)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Recorder:
    """The methods the lessons call, one line each; the data lives in `self.data`."""

    def __init__(self) -> None:
        self.data = SessionRecord()

    def reset(self, lesson: str = "") -> None:
        """At the start of each run: a second main() in one process starts a new record."""
        self.data = SessionRecord(lesson=lesson)

    @_never_raises
    def call(self, usage: object, label: str = "tokens", sent=None, system=None,
             tools=None) -> None:
        uncached, read, written, out = (int(n) for n in usage_counts(usage))  # "12" from an odd endpoint
        self.data.calls.append(ModelCall(len(self.data.calls) + 1, str(label), uncached, read, written,
                                         out, self.data.current_threshold, time.time()))

    @_never_raises
    def tool(self, name: str, args: object, output: object, is_error: bool) -> None:
        if len(self.data.tools) >= MAX_TOOL_CALLS:
            self.data.tools_left_out += 1
            return
        shown = json.dumps(args, ensure_ascii=False, default=str)
        self.data.tools.append(ToolCall(len(self.data.calls), str(name), _cut(shown, ARGS_CHARS),
                                        _cut(str(output), OUTPUT_CHARS), bool(is_error)))

    @_never_raises
    def cleared(self, count: int, tokens: int) -> None:
        """Layer 1 made a batch of placeholders; the request being built is the next call."""
        self.data.clearings.append(Cleared(len(self.data.calls) + 1, int(count), int(tokens)))

    @_never_raises
    def compacted(self, before: int, after: int, summary: str, transcript_path: object) -> None:
        """A compaction succeeded; its summary call is the last call recorded."""
        board = self._read_board() if self.data.board_source else None
        self.data.compactions.append(Compaction(len(self.data.compactions) + 1, len(self.data.calls),
                                                int(before), int(after), _cut(str(summary), SUMMARY_CHARS),
                                                str(transcript_path), board))

    @_never_raises
    def board(self, tasks: dict) -> None:
        """A snapshot of s07's board: at the latest compaction if it has none yet, else the end."""
        snapshot = _board_tasks(tasks)
        latest = self.data.compactions[-1] if self.data.compactions else None
        if latest and latest.board is None and latest.after_call == len(self.data.calls):
            latest.board = snapshot
        else:
            self.data.final_board = snapshot

    @_never_raises
    def watch_board(self, source: Callable[[], dict]) -> None:
        """s07: source() returns the board (id -> task); it is read at each compaction and at the end."""
        self.data.board_source = source

    @_never_raises
    def finish(self) -> None:
        """At the end of a run: the last picture of the board, if a lesson watches one."""
        if self.data.board_source:
            self.data.final_board = self._read_board()

    @_never_raises
    def threshold(self, tokens: Optional[int]) -> None:
        self.data.current_threshold = None if tokens is None else int(tokens)

    def _read_board(self) -> Optional[list]:
        try:
            return _board_tasks(self.data.board_source())
        except Exception as exc:  # noqa: BLE001 - an unreadable board is noted, the run goes on
            self.data.problems.append(f"the board could not be read: {type(exc).__name__}: {exc}")
            return None

    # ---------------------------------------------------------------- what /context asks

    def cached_tokens(self, now: Optional[float] = None) -> Optional[int]:
        """What the cache holds of the context now: the prefix the last loop call read or wrote.

        None when unknown: no call yet, a compaction replaced the history since, or the cache
        has expired (CACHE_LIFETIME after the last call).
        """
        last = self._last_loop_call()
        if last is None or (now or time.time()) - last.at > CACHE_LIFETIME:
            return None
        return last.cache_read + last.cache_written

    def context_tokens(self) -> Optional[int]:
        """The API's count of the context after the last loop call (its input plus its reply)."""
        last = self._last_loop_call()
        return None if last is None else (last.input + last.output) or None  # 0: no usage sent

    def _last_loop_call(self) -> Optional[ModelCall]:
        data = self.data
        if not data.calls or data.calls[-1].is_summary:
            return None    # after a summary call the history was replaced (or the compaction failed)
        if data.compactions and data.compactions[-1].after_call >= data.calls[-1].number:
            return None
        return data.calls[-1]


def _board_tasks(tasks: dict) -> list:
    """Plain copies of the task records, in id order, so later changes do not alter the snapshot."""
    board = []
    for task in tasks.values():
        owner = task.get("owner")
        board.append(BoardTask(int(task["id"]), str(task.get("subject", "")), str(task.get("status", "")),
                               None if owner is None else str(owner), _ids(task.get("blockedBy")),
                               _ids(task.get("unblocked"))))
    return sorted(board, key=lambda t: t.id)


def _ids(values: object) -> list:
    """The task ids in a list from a task file; anything else (a hand edit) is left out."""
    return [int(v) for v in values if not isinstance(v, bool) and str(v).isascii() and str(v).isdigit()] \
        if isinstance(values, list) else []   # "²".isdigit() is True, hence isascii


RECORD = Recorder()   # the one record of this process's current run
