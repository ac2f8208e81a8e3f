"""When layer 1 clears: a batch must be worth the part of the cache it throws away.

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
"""

import json

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
