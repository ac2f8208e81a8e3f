"""Layer 1 of s06: which old tool results and inputs a batch clears, and when it pays.


Relied on by s06's micro_compact (and so s07's loop): it asks batch_worth_clearing()
before it turns a new batch of old results (and inputs) into placeholders.

Clearing a block rewrites the request from that block to its end: the cache is read up to
there (0.1x), and everything after it is written again (1.25x). What it frees is then read
(0.1x) on every later call, and no longer pushes the context toward a compaction.

    |---- cached, read 0.1x ----|[cleared ... kept ... kept ... newest]|
                                 ^ first cleared block: `rewritten` tokens from here on

So a fixed minimum alone (s06's CLEAR_AT_LEAST) is wrong both ways: with
big outputs it clears on almost every call, each time rewriting the results kept after
the batch (more than it frees); with small ones it waits long after clearing has paid for itself.
The rule here weighs the two: free at least s06's CLEAR_AT_LEAST tokens (less with a small
COMPACT_THRESHOLD), and at least REWRITE_SHARE times the tokens the batch makes the API
write again. And with_cache_point() keeps the part before the batch read from the cache.

REWRITE_SHARE and s06's CLEAR_AT_LEAST and KEEP_RECENT were chosen with
`python bench/bench_tokens.py --sweep`, which plays every session shape for other values:
together they are within a point of the lowest worst shape. A larger REWRITE_SHARE makes
layer 1 wait until layer 2 compacts instead (a summary loses more than a cleared result,
which is saved whole). See the README's "How layer 1's numbers were chosen".

Tool INPUTS too:
Relied on by s06's micro_compact (and so s07's loop), next to the clearing of old results.

    [a: write_file {"path": "app.py", "content": <24,000 characters>}]   <- 6,000 tokens, every call
                                 |  older than the newest KEEP_RECENT calls
                                 v
    [a: write_file {"path": "app.py", "content": "[cleared from the context: 24,000 characters;
                                                   read_file shows the file as it is now]"}]

Without it, a session that writes a few big files carries every byte it ever wrote in every
request, long after the files are on disk. The API's server-side `clear_tool_uses` edit has
a `clear_tool_inputs` option for the same reason.

The rules are layer 1's rules for results: only calls older than the newest KEEP_RECENT,
only texts longer than KEEP_CHARS, and what they free counts toward the same batch, because
rewriting an assistant message throws the cache away from there on, just as a result does.
The placeholder input keeps the call valid for the API (the same keys, all strings) and the
history keeps the real input, so the transcript is complete.

It also says which calls showed a whole file (files_shown_whole), for s06's rule on when an
old read_file result is stale. Without it, a read of ten lines, a read cut short at the cap,
or a write that failed would hide the last whole read of a file the model still needs.
"""

import json
import os

from harness.files import READ_ON           # how read_file ends a read it cut short



THRESHOLD_SHARE = 0.4    # but never more than this share of COMPACT_THRESHOLD, which it must beat
REWRITE_SHARE = 1.5      # and 1.5x what it makes the API write again (bench_tokens.py --sweep)


def batch_worth_clearing(view: list[dict], fresh_ids: set, freed: int, at_least: int,
                         compact_threshold: int | None = None) -> bool:
    """True if clearing fresh_ids (freeing `freed` tokens) pays for the rewrite it causes.

    view is what the model would be sent, or the history: s06 passes the history, so the
    rewrite it counts includes the whole text of blocks already cleared (an overestimate,
    kept because it is what the constants were chosen with).

    at_least is s06's CLEAR_AT_LEAST; compact_threshold (layer 2's) caps it, so that a small
    COMPACT_THRESHOLD still sees layer 1 clear before layer 2 summarises everything.
    """
    if compact_threshold:
        at_least = min(at_least, int(THRESHOLD_SHARE * compact_threshold))
    if not fresh_ids or freed < at_least:
        return False
    first = first_message_with(view, fresh_ids)
    rewritten = tokens(view[first:]) - freed   # what follows the first placeholder, written again
    return freed >= REWRITE_SHARE * rewritten


def with_cache_point(view: list[dict], batch_start: str | None) -> list[dict]:
    """The view with a cache breakpoint just before the block where the latest batch starts.

    The API looks for a cached prefix at most 20 blocks before a breakpoint. A batch that
    starts further back than that from the end would miss the cache altogether, and the
    whole request, tools and system included, would be written again at 1.25x. This second
    breakpoint (the loop's top-level one is the first; the API allows 4) sits where the
    request stops matching the last one, so everything before it is still read at 0.1x.
    """
    n = first_message_with(view, {batch_start}) if batch_start else len(view)
    if not 0 < n < len(view):
        return view
    before = view[n - 1]
    content = before["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
    return view[:n - 1] + [{**before, "content": blocks}] + view[n:]


def unanswered(messages: list[dict]) -> set:
    """Ids of the newest turn's calls and of their results: the model wrote those calls and has
    not seen those results yet (several calls come back in one message), so layer 1 clears
    neither, whatever KEEP_RECENT says."""
    ids = set()
    for message in messages[-2:]:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict):
                ids.add(block.get("id") if block.get("type") == "tool_use" else block.get("tool_use_id"))
    return ids - {None}


def first_id(view: list[dict], ids: set):
    """Of these ids, the one that comes first in view (where a batch of them starts)."""
    return min(ids, key=lambda i: first_message_with(view, {i})) if ids else None


def first_message_with(view: list[dict], ids: set) -> int:
    """The index of the first message holding a tool_use or tool_result with one of these ids."""
    for n, m in enumerate(view):
        content = m.get("content")
        if isinstance(content, list) and any(
                isinstance(b, dict) and (b.get("id") in ids or b.get("tool_use_id") in ids)
                for b in content):
            return n
    return len(view)


def tokens(messages: object) -> int:
    """About how many tokens these messages (or any JSON value) are: what layer 1 weighs."""
    return len(json.dumps(messages, ensure_ascii=False)) // 4   # s06's estimate: characters / 4

INPUT_FIELDS = {"write_file": ("content",), "edit_file": ("old_text", "new_text")}  # worth clearing
SHOW_WHOLE_FILE = {"read_file", "write_file"}   # an edit shows only a part of a file
CLEARED = "[cleared from the context: "          # how a cleared text begins (/context counts it)


def files_shown_whole(call: dict, result: dict) -> set:
    """{the path} if this call showed the whole file as it now is (a read_file of all its lines,
    a write_file), and worked; else an empty set. Only such a call makes an earlier read of it
    stale."""
    given = call.get("input") if isinstance(call.get("input"), dict) else {}
    part = call.get("name") == "read_file" and (     # some lines, or cut short at the cap
        given.get("offset") not in (None, 1) or given.get("limit") is not None
        or READ_ON in str(result.get("content", "")))
    shown = call.get("name") in SHOW_WHOLE_FILE and not part and not result.get("is_error")
    return {path_of(call)} - {None} if shown else set()


def path_of(call: dict):
    """The path a file tool call names, normalised ("./a.txt" is "a.txt"), or None."""
    path = (call.get("input") or {}).get("path")
    return os.path.normpath(path) if isinstance(path, str) and path else None


def inputs_worth_clearing(messages: list[dict], keep_recent: int, keep_chars: int,
                          exclude: set = frozenset()) -> dict[str, int]:
    """{tool_use id: tokens clearing it frees} for the inputs in messages older than the newest
    keep_recent calls and longer than keep_chars (s06's KEEP_RECENT and KEEP_CHARS), less the
    calls in exclude (those already cleared, and the newest turn's)."""
    calls = [b for m in messages if m.get("role") == "assistant" and isinstance(m.get("content"), list)
             for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
    worth = {}
    for block in calls[:max(len(calls) - keep_recent, 0)]:
        if block.get("id") in exclude:
            continue
        fields = _texts(block)
        if sum(len(t) for t in fields.values()) > keep_chars:
            worth[block["id"]] = tokens(fields) - tokens(_placeholders(fields))
    return worth


def clear_inputs(view_messages: list[dict], cleared_ids: set) -> list[dict]:
    """The view with the inputs of those tool calls replaced by placeholders (a copy)."""
    if not cleared_ids:
        return view_messages
    view = []
    for m in view_messages:
        if m.get("role") == "assistant" and isinstance(m.get("content"), list) and any(
                isinstance(b, dict) and b.get("id") in cleared_ids for b in m["content"]):
            m = {**m, "content": [_cleared_call(b) if isinstance(b, dict) and b.get("id") in cleared_ids
                                  else b for b in m["content"]]}
        view.append(m)
    return view


def _cleared_call(block: dict) -> dict:
    fields = _texts(block)
    if not fields:
        return block
    return {**block, "input": {**block["input"], **_placeholders(fields)}}


def _texts(block: dict) -> dict[str, str]:
    """The clearable text fields of a tool call: {} for any other tool, or a non-string field."""
    names = INPUT_FIELDS.get(block.get("name"), ())
    given = block.get("input") if isinstance(block.get("input"), dict) else {}
    return {k: given[k] for k in names if isinstance(given.get(k), str)}


def _placeholders(fields: dict[str, str]) -> dict[str, str]:
    # Worded so that it cannot pass for file contents, which a model might copy, and true whether
    # or not the call worked (its result, which says so, is cleared only if long).
    return {k: f"{CLEARED}{len(v):,} characters; read_file shows the file as it is now]"
            for k, v in fields.items()}

