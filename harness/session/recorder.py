"""A record of one run, in memory: what the session page, /context and /cost show.

Relied on by all three lessons through the Run (run.recorder, harness/run.py): model_call.py
records each model call with its request, tool_calls.py each tool call, s06 its threshold,
compaction.py its clearings and compactions, api_context.py the API's summaries and
compactions (its clearings are only said), s07 its board. cli, page.py and views.py only
read the record. Without each piece:
- totals and input_tokens: cli, the page and /cost would each add up usage their own way;
  here tokens.usage_counts reads each reply's (a missing field, or a count sent as "12" by an
  odd endpoint, breaks neither).
- call(): the page has no bars and /cost nothing to add up.
- the requests: the page cannot show what the model saw. A block is kept once, cut to its head
  and tail, within SENT_CHARS a run, and a request keeps only the messages that differ from
  the previous one: else a long REPL session's memory grows with the square of its length.
- tool(): the page cannot say which tool calls made the context grow.
- cleared() / compacted(): the chart shows the context shrink with no reason given.
- watch_board(): no picture of s07's task graph (only the last BOARDS_KEPT
  compactions keep theirs, and no snapshot keeps descriptions: a board can hold thousands
  of tasks).
- _never_raises: a bug in this bookkeeping would stop the lesson it only watches.
"""

import contextlib
import functools
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from harness import excerpt, tokens
from harness.session import blocks

ARGS_CHARS = 300            # a tool call's arguments kept for the page (a write_file can be huge)
LINE_CHARS = 300            # each line of a tool result's preview kept for the page
SUMMARY_CHARS = 20_000      # a compaction's summary kept whole up to this; it is shown on the page
MAX_TOOL_CALLS = 5_000      # memory stays bounded in a long REPL; the page counts the rest
CACHE_LIFETIME = 300        # seconds the API keeps a cached prefix after its last use (5 minutes)
HEAD_CHARS, TAIL_CHARS = 1_200, 400   # a sent block is kept as its head and tail: the end of a
                                      # result (an error, a total) matters as much as its start
SENT_CHARS = 3_000_000      # characters of sent blocks kept over a run; past it, only their sizes
MAX_REQUESTS = 5_000        # requests kept; a longer session keeps the usage of later calls only
UNREADABLE_SHOWN = 5        # broken task files named on the page (/tasks names them all)
MORE_NOTE = "/tasks names them all"   # ends the line that counts the broken files not named
BOARDS_KEPT = 4             # compactions whose board snapshot is kept (the latest ones)
SUMMARY_BY_API = "summary by the API"   # a summary --api-context compact's server wrote


@dataclass(frozen=True)
class SentBlock:
    """One block of a request as the page shows it; kept once, however many requests send it."""
    kind: str                   # text, tool_use, tool_result, thinking, system, tools, or the type
    label: str                  # tool_use: the tool; tool_result: the call it answers; tools: names
    text: str                   # what the model reads, cut to its head and tail
    chars: int                  # its whole length
    tokens: int                 # estimated, as /context estimates it
    cleared: bool = False       # a layer-1 placeholder
    error: bool = False         # a tool result marked is_error
    board: str = ""             # s07's <task-board> block, out of `text`, cut the same way
    board_chars: int = 0
    kept: bool = True           # False: SENT_CHARS was spent; only the sizes are known


@dataclass(frozen=True)
class Request:
    """What one call sent: the previous request's first `same` messages (not stored again),
    then `messages`, each (role, keys of its blocks in SessionRecord.blocks)."""
    same: int
    messages: tuple
    count: int                  # messages in the whole request
    system: Optional[bytes]     # the key of the system prompt; None when not given
    tools: Optional[bytes]      # the key of the tool definitions; None when not given
    tokens: int                 # tokens.request's estimate, as /context and layer 2 give it


@dataclass
class ModelCall:
    """One model call's usage, as the API reported it, and what it sent."""
    number: int                 # 1, 2, ... in the order of the run
    label: str                  # "tokens" for the loop's calls, "summary call" for a summary
    uncached: int               # input_tokens: input neither read from nor written to the cache
    cache_read: int             # cache_read_input_tokens: 0.1 x the price
    cache_written: int          # cache_creation_input_tokens: 1.25 x the price
    output: int                 # output_tokens
    threshold: Optional[int]    # COMPACT_THRESHOLD at this call (None: the lesson has none)
    at: float                   # time.time() when it was recorded
    request: Optional[Request] = None   # None: not given, or not kept (MAX_REQUESTS)
    abandoned: bool = False     # its reply stopped coming (Ctrl-C...): billed, not kept

    @property
    def input(self) -> int:
        return self.uncached + self.cache_read + self.cache_written

    @property
    def is_summary(self) -> bool:
        return self.label.startswith("summary")     # "summary call", or "summary call tokens"


@dataclass
class ToolCall:
    after_call: int             # the number of the model call that asked for it
    name: str
    args: str                   # JSON, cut to ARGS_CHARS
    output: str                 # its preview (excerpt.preview), each line cut to LINE_CHARS
    is_error: bool


@dataclass
class Cleared:
    before_call: int            # layer 1 cleared this batch while building this call's request
    count: int                  # tool results that became placeholders
    tokens: int                 # about how many tokens that freed


@dataclass
class Compaction:
    number: int                 # 1, 2, ... in the order of the run
    after_call: int             # the summary call that produced it
    before: int                 # tokens the next request would have sent before it
    after: int                  # tokens after: an estimate (no call has sent the summary yet)
    summary: str
    transcript: str             # where the full history was saved
    board: Optional[list] = None  # _board_tasks() read at this compaction (s07), else None
    counted: Optional[int] = None  # the part of `before` the API counted; None: all estimated
    board_dropped: bool = False    # its board was read, then let go (BOARDS_KEPT)
    after_counted: bool = False    # `after` is the API's count (its own compaction)


@dataclass
class SessionRecord:
    lesson: str = ""
    started: float = field(default_factory=time.time)
    calls: list = field(default_factory=list)         # list[ModelCall]
    tools: list = field(default_factory=list)         # list[ToolCall]
    clearings: list = field(default_factory=list)     # list[Cleared]
    compactions: list = field(default_factory=list)   # list[Compaction]
    final_board: Optional[list] = None                # _board_tasks() at the end (s07)
    tools_left_out: int = 0
    problems: list = field(default_factory=list)      # what failed or is not drawn: on the page
    current_threshold: Optional[int] = None
    board_source: Optional[Callable[[], tuple]] = None  # s07: the store's scan(), at a snapshot
    blocks: dict = field(default_factory=dict)        # key -> SentBlock: every block sent, once
    sent_chars: int = 0                               # characters of blocks kept (SENT_CHARS)
    requests_kept: int = 0
    requests_left_out: int = 0                        # calls past MAX_REQUESTS
    @property
    def totals(self) -> dict:
        """The session's sums since the run began, from its calls (none is ever dropped)."""
        return {"calls": len(self.calls),
                "fresh": sum(c.uncached for c in self.calls),
                "read": sum(c.cache_read for c in self.calls),
                "written": sum(c.cache_written for c in self.calls),
                "out": sum(c.output for c in self.calls)}

    @property
    def input_tokens(self) -> int:
        """All input the session sent: uncached, read from the cache and written to it."""
        return self.totals["fresh"] + self.totals["read"] + self.totals["written"]

    @property
    def cache_share(self) -> str:
        """The share of that input read from the cache, "47%": what the cache saved."""
        if not self.input_tokens:
            return "0%"
        return f"{self.totals['read'] / self.input_tokens:.0%}"


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


class Recorder:
    """The methods the lessons call; the data lives in self.data. One a run: a second run in
    one process (a second main(), a test) makes its own."""

    def __init__(self, lesson: str = "") -> None:
        self.data = SessionRecord(lesson=lesson)
        self._previous = []     # the last kept request's messages, whole: what the next shares
        self.label = "tokens"   # what the next model call is, in its usage line and on the page

    @contextlib.contextmanager
    def labelled(self, label: str):
        """The model calls made inside are named `label` ("summary call", s06's layer 2)."""
        self.label = label
        try:
            yield
        finally:
            self.label = "tokens"

    @_never_raises
    def call(self, usage: object, label: str = "tokens", sent: Optional[list] = None,
             system: object = None, tools: Optional[list] = None,
             abandoned: bool = False) -> None:
        """One model call: its usage, and the request it sent (the messages after layer 1, the
        system prompt and the tool definitions), when the caller gives them."""
        counts = tokens.usage_counts(usage)     # uncached, read, written, out
        call = ModelCall(len(self.data.calls) + 1, str(label), *counts,
                         self.data.current_threshold, time.time(), abandoned=abandoned)
        self.data.calls.append(call)
        if sent is not None:
            self._keep_request(call, sent, system, tools)

    @_never_raises
    def _keep_request(self, call: ModelCall, sent: list, system: object, tools: object) -> None:
        if self.data.requests_kept >= MAX_REQUESTS:
            self.data.requests_left_out += 1
            return
        self.data.requests_kept += 1
        messages = []
        for message in sent:
            role = message.get("role", "") if isinstance(message, dict) else ""
            keys = tuple(self._keep_block(block) for block in blocks.content_blocks(message))
            messages.append((str(role), keys))
        same = 0
        while (same < min(len(messages), len(self._previous))
               and messages[same] == self._previous[same]):
            same += 1
        self._previous = messages
        system_key = None if system is None else self._keep_block(system, "system")
        tools_key = None if tools is None else self._keep_block(tools, "tools")
        size = tokens.request(system, tools, sent)     # as /context and layer 2 count it
        call.request = Request(same, tuple(messages[same:]), len(messages), system_key, tools_key,
                               size)

    def _keep_block(self, block: object, kind: Optional[str] = None) -> bytes:
        """The key of block in data.blocks, adding it the first time it is sent."""
        raw = blocks.as_json(blocks.plain(block) if kind is None else block)
        name = (kind or "block") + "\0" + raw
        key = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        if key not in self.data.blocks:
            self.data.blocks[key] = self._sent_block(blocks.plain(block), raw, kind)
        return key

    def _sent_block(self, block: object, raw: str, kind: Optional[str]) -> SentBlock:
        kind, label, shown, error = _readable(block, raw, kind)
        rest, board = blocks.split_board(shown) if kind == "text" else (shown, "")
        # the whole block as the request sends it, as /context counts it
        size = tokens.estimate(block)
        kept_text = excerpt.head_and_tail(rest, HEAD_CHARS, TAIL_CHARS)
        kept_board = excerpt.head_and_tail(board, HEAD_CHARS, TAIL_CHARS)
        kept = self.data.sent_chars + len(kept_text) + len(kept_board) <= SENT_CHARS
        if kept:
            self.data.sent_chars += len(kept_text) + len(kept_board)
        else:
            kept_text, kept_board = "", ""
        return SentBlock(kind, label, kept_text, len(rest), size, blocks.is_cleared(block), error,
                         kept_board, len(board), kept)

    @_never_raises
    def tool(self, name: str, args: object, output: object, is_error: bool) -> None:
        if len(self.data.tools) >= MAX_TOOL_CALLS:
            self.data.tools_left_out += 1
            return
        shown = json.dumps(args, ensure_ascii=False, default=str)
        self.data.tools.append(ToolCall(len(self.data.calls), str(name),
                                        excerpt.cut(shown, ARGS_CHARS),
                                        _preview(output), bool(is_error)))

    @_never_raises
    def cleared(self, count: int, tokens: int) -> None:
        """Layer 1 made a batch of placeholders; the request being built is the next call."""
        self.data.clearings.append(Cleared(len(self.data.calls) + 1, int(count), int(tokens)))

    @_never_raises
    def compacted(self, before: int, after: int, summary: str, transcript_path: object,
                  counted: Optional[int] = None, after_counted: bool = False) -> None:
        """A compaction succeeded; its summary call is the last call recorded. before: what the
        next request would have sent, of which the API counted `counted` (None: all estimated);
        after: what it sends now, estimated, or the API's count with after_counted."""
        board = self._read_board() if self.data.board_source else None
        self.data.compactions.append(Compaction(
            len(self.data.compactions) + 1, len(self.data.calls), int(before), int(after),
            excerpt.cut(str(summary), SUMMARY_CHARS), str(transcript_path), board,
            None if counted is None else int(counted), after_counted=after_counted))
        for older in self.data.compactions[:-BOARDS_KEPT]:
            if older.board is not None:
                older.board, older.board_dropped = None, True

    @_never_raises
    def watch_board(self, source: Callable[[], tuple]) -> None:
        """s07: source() returns the board as the store's scan() does, (id -> task, a line per
        unreadable task file), read at each compaction and at the end."""
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
            tasks, unreadable = self.data.board_source()
        except Exception as exc:  # noqa: BLE001 - an unreadable board is noted, the run goes on
            self.data.problems.append(f"the board could not be read: {type(exc).__name__}: {exc}")
            return None
        # A task file that could not be read is said, once, not silently left out of the picture.
        said = [f"not drawn on the board: {line}" for line in unreadable[:UNREADABLE_SHOWN]]
        more = len(unreadable) - UNREADABLE_SHOWN
        if more > 0:
            said.append(f"not drawn on the board: {more:,} more task files that could not be "
                        f"read ({MORE_NOTE})")
        # The count of those not named is the latest snapshot's only.
        self.data.problems = [p for p in self.data.problems if not p.endswith(MORE_NOTE + ")")]
        for line in said:
            if line not in self.data.problems:
                self.data.problems.append(line)
        return _board_tasks(tasks)

    # ---------------------------------------------------------------- what /context asks

    def cached_tokens(self, now: Optional[float] = None) -> Optional[int]:
        """What the cache holds of the context now: the prefix the last loop call read or wrote;
        None with no call yet, after a summary call or a compaction, or past CACHE_LIFETIME."""
        last = self._last_loop_call()
        if last is None or (now or time.time()) - last.at > CACHE_LIFETIME:
            return None
        return last.cache_read + last.cache_written

    def context_tokens(self) -> Optional[int]:
        """The API's count of the context after the last loop call (its input plus its reply)."""
        last = self._last_loop_call()
        return None if last is None else (last.input + last.output) or None  # 0: no usage sent

    def context_covers(self) -> Optional[int]:
        """How many messages context_tokens() counts: the last loop call's, and its reply;
        None without a loop call (as context_tokens()) or when its request was not given."""
        last = self._last_loop_call()
        return None if last is None or last.request is None else last.request.count + 1

    def completed_calls(self) -> list:
        """The calls whose reply came whole: an abandoned one's reply was not kept."""
        return [call for call in self.data.calls if not call.abandoned]

    def _last_loop_call(self) -> Optional[ModelCall]:
        data, calls = self.data, self.completed_calls()
        if not calls or calls[-1].is_summary:
            return None    # after a summary call the history was replaced (or compaction failed)
        if data.compactions and data.compactions[-1].after_call >= calls[-1].number:
            return None
        return calls[-1]


def _preview(output: object) -> str:
    """A result as the terminal previews it (whole up to excerpt.WHOLE_LINES lines, else its
    first lines and how many more), each line cut to LINE_CHARS: the page shows the same."""
    lines = [excerpt.cut(line, LINE_CHARS) for line in excerpt.preview(output)]
    return "\n".join(lines)


def _readable(block: object, raw: str, kind: Optional[str]) -> tuple:
    """(kind, label, the text the page shows, is_error) of a block, a system prompt or tools."""
    if kind == "tools":
        names = [t.get("name", "?") for t in block if isinstance(t, dict)] if isinstance(
            block, list) else []
        return "tools", excerpt.cut(", ".join(map(str, names)), ARGS_CHARS), raw, False
    if kind == "system":
        return "system", "", block if isinstance(block, str) else raw, False
    if not isinstance(block, dict):
        return "text", "", str(block), False
    kind = str(block.get("type", "?"))
    if kind == "text":
        return kind, "", str(block.get("text", "")), False
    if kind == "thinking":
        return kind, "", str(block.get("thinking", "")), False
    if kind == "tool_use":
        return kind, str(block.get("name", "")), blocks.as_json(block.get("input")), False
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            content = "\n".join(str(b.get("text", "")) if isinstance(b, dict) and "text" in b
                                else blocks.as_json(b) for b in content)
        return (kind, str(block.get("tool_use_id", "")), "" if content is None else str(content),
                bool(block.get("is_error")))
    return kind, "", raw, False


def _board_tasks(tasks: dict) -> list:
    """Copies of the tasks' fields the picture shows, in id order, so later changes do not alter
    the snapshot. The description is left out: a board of thousands, kept at BOARDS_KEPT
    compactions, would hold them all. Both stores give only tasks record.task_problem accepts
    (ids are ints; blockedBy, and unblocked when there, lists of ids)."""
    board = [{"id": task["id"], "subject": task["subject"], "status": task["status"],
              "owner": task.get("owner"), "blockedBy": list(task["blockedBy"]),
              "unblocked": list(task.get("unblocked", []))} for task in tasks.values()]
    return sorted(board, key=lambda t: t["id"])
