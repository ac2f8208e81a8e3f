"""What a reply's usage says: the stand-in's token count, its prompt cache, and the bill.

Relied on by server.py (each reply's usage, of the prompt edits.py made, and billing()),
rules.py (the window), edits.py (what a clearing frees), the tests that check cache hits, and
bench/bench_tokens.py, whose tables (quoted in docs/cost.md) are these bills.

A token is 4 characters of a block's JSON, at least 1 a block (count_tokens): the API's count
in this play, kept apart from the harness's estimate (harness/tokens.py) though the two divide
alike, so that the estimate is not checked against itself.

The cache (PromptCache), as documented: the prefix is tools, system, then every message block;
breakpoints are blocks with cache_control, and the top-level cache_control marks the last
block. A breakpoint reads the longest cached prefix ending at it or up to 20 blocks before it;
every later breakpoint of at least min_cache_tokens is written; entries live 5 minutes from
their last use; changing tool_choice keeps tools and system cached, not the messages.
Without each piece:
- PromptCache: every request would be billed whole, and no test could see that layer 1 keeps
  the cache, or that the summary call reads the loop's prefix from it.
- reply_usage: a reply would lack the four counts the API sends (uncached input, written to
  the cache, read from it, output), and the token line would be tested on no real shape.
- bill and billed_steps: the bench and /cost's test would each add the counts their own way,
  and a summary the server wrote (with_summary: only in usage.iterations) would cost nothing.
Simpler than the real API: characters/4 for tokens (for the window too, and earlier turns'
thinking counts); one cache for every key; a "1h" ttl lives 5 minutes too.
"""

import contextlib
import hashlib
import itertools
import json
import time

from harness.stand_in import script

MIN_CACHE_TOKENS = 1024   # Sonnet-class models; some models need more
CACHE_TTL = 300           # seconds
LOOKBACK = 20             # blocks before a breakpoint searched for an earlier cached prefix


def count_tokens(obj):
    """The API's count in this play: 4 characters of JSON a token, at least 1."""
    return max(1, len(json.dumps(obj, ensure_ascii=False)) // 4)


# One request's blocks, counted, by identity: a request is counted several times (the window,
# the clearing, the cache). Only while server.py answers it (counting()): no block changes then
# (edits.py copies a block it clears); a caller outside may, and gets a fresh count.
_COUNTED = None


@contextlib.contextmanager
def counting():
    """Remember each block's count until the request is answered."""
    global _COUNTED
    _COUNTED = {}
    try:
        yield
    finally:
        _COUNTED = None


def block_tokens(block) -> int:
    """count_tokens of a request's block as the model reads it (_plain), once a request."""
    if _COUNTED is None:
        return count_tokens(_plain(block))
    found = _COUNTED.get(id(block))
    if found is not None and found[0] is block:
        return found[1]
    counted = count_tokens(_plain(block))
    _COUNTED[id(block)] = (block, counted)
    return counted


def _plain(block: dict) -> dict:
    """A block as the model reads it: cache_control is an instruction to the API, not content."""
    return {k: v for k, v in block.items() if k != "cache_control"}


def cache_blocks(body):
    """The request's cacheable blocks in the API's order, and where the messages start."""
    blocks = list(body.get("tools") or [])
    system = body.get("system")
    blocks += [script.text(system)] if isinstance(system, str) else list(system or [])
    start = len(blocks)
    for m in body.get("messages") or []:
        content = m.get("content")
        blocks += ([script.text(content)] if isinstance(content, str)
                   else [b for b in content or [] if isinstance(b, dict)])
    return blocks, start


def breakpoints(body):
    """Indices of the blocks with cache_control; the top-level one marks the last block."""
    blocks, _ = cache_blocks(body)
    marks = [i for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("cache_control")]
    if body.get("cache_control") and blocks:
        marks.append(len(blocks) - 1)
    return marks


def prompt_tokens(body: dict) -> int:
    """The request's input, counted as the cache counts it: characters/4 of each block."""
    blocks, _ = cache_blocks(body)
    return sum(block_tokens(b) for b in blocks)


def prefix_hashes(body, blocks, start):
    """hashes[i] identifies blocks[0..i] (cache_control left out). tool_choice enters where the
    messages start: changing it keeps tools and system cached, not the messages."""
    h, hashes = hashlib.sha256(str(body.get("model")).encode()).digest(), []
    for i, block in enumerate(blocks):
        if i == start:
            choice = {"tool_choice": body.get("tool_choice"), "tools": bool(body.get("tools"))}
            h = hashlib.sha256(h + json.dumps(choice, sort_keys=True).encode()).digest()
        h = hashlib.sha256(h + json.dumps(_plain(block), sort_keys=True).encode()).digest()
        hashes.append(h)
    return hashes


class PromptCache:
    def __init__(self, min_tokens=MIN_CACHE_TOKENS, clock=time.monotonic):
        self.min_tokens, self.clock, self.entries = min_tokens, clock, {}  # hash -> expiry

    def usage(self, body):
        """input_tokens (uncached), cache_read_input_tokens, cache_creation_input_tokens."""
        blocks, start = cache_blocks(body)
        hashes = prefix_hashes(body, blocks, start)
        upto = list(itertools.accumulate(block_tokens(b) for b in blocks))
        now = self.clock()
        self.entries = {h: t for h, t in self.entries.items() if t > now}
        marks = sorted(set(breakpoints(body)))
        hit = -1   # the end of the longest cached prefix any breakpoint reaches
        for mark in marks:
            for i in range(mark, max(mark - LOOKBACK, 0) - 1, -1):   # the breakpoint, then 20 back
                if hashes[i] in self.entries:
                    hit = max(hit, i)
                    break
        if hit >= 0:
            self.entries[hashes[hit]] = now + CACHE_TTL
        stored = hit
        for mark in marks:
            if mark > hit and upto[mark] >= self.min_tokens:
                self.entries[hashes[mark]] = now + CACHE_TTL
                stored = max(stored, mark)
        read = upto[hit] if hit >= 0 else 0
        written = upto[stored] - read if stored > hit else 0
        total = upto[-1] if upto else 0
        return {"input_tokens": total - read - written, "cache_creation_input_tokens": written,
                "cache_read_input_tokens": read}


def reply_usage(cache: PromptCache, body: dict, content) -> dict:
    """A reply's usage: the request's input as the cache saw it, and the reply's output."""
    return {**cache.usage(body), "output_tokens": count_tokens(content or [])}


def with_summary(summary: dict, reply: dict | None) -> dict:
    """A reply's usage when the server summarised first (edits.py): the reply's own counts (zero
    when it paused), and usage.iterations listing the summary step, then the reply's."""
    steps = [{"type": "compaction", **summary}]
    if reply is None:
        reply = dict.fromkeys(summary, 0)
    else:
        steps.append({"type": "message", **reply})
    return {**reply, "iterations": steps}


def billed_steps(counted) -> list:
    """The usages a reply bills: each of its iterations when it lists them (the docs: "total
    billable tokens: sum of all entries in usage.iterations"), else the reply's own."""
    if not isinstance(counted, dict):
        return []
    steps = counted.get("iterations")
    if isinstance(steps, list) and steps:
        return [step for step in steps if isinstance(step, dict)]
    return [counted]


def bill(usages: list) -> dict:
    """The session's input as the API would bill it: uncached 1x, written 1.25x, read 0.1x, a
    server's summary included. usages: what each reply told the client (odd where scripted)."""
    steps = [step for counted in usages for step in billed_steps(counted)]

    def total(name):
        return sum(u.get(name) or 0 for u in steps)
    uncached, write, read = (total("input_tokens"), total("cache_creation_input_tokens"),
                             total("cache_read_input_tokens"))
    return {"calls": len(usages), "input_sent": uncached + write + read,
            "uncached": uncached, "cache_write": write, "cache_read": read,
            "output": total("output_tokens"),
            "billed_input": uncached + 1.25 * write + 0.1 * read}
