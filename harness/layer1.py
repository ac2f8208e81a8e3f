"""Layer 1 of s06: which old tool results and inputs a batch clears, and what the model sees.

Relied on by s06's micro_compact and clear_new_batch (and so s07's loop). The rule itself, a
batch must pay for the cache it rewrites, is written in s06; the pieces it weighs are here.
A clearing acts on the run it is given (harness/run.py): each saved copy is pinned in
run.saved, and the session page learns of the batch through run.recorder.

    history (kept whole)                 what the model is sent (the view)
    [a: bash "pytest"]                   [a: bash "pytest"]
    [u: result, 30,000 characters]  ->   [u: "[Previous: used bash; the whole result is in
                                              .transcripts/results/bash_3f9a1c2b7d4e.txt]"]
    [a: write_file app.py <24,000 ch>]   [a: write_file app.py "[cleared from the context:
                                              24,000 characters; read_file shows the file]"]
    ... the newest KEEP_RECENT results, and the whole newest turn, stay as they are

Clearing a block rewrites the request from that block to its end: the cache is read up to
there (0.1x), and everything after it is written again (1.25x), once. From then on the
cleared block is not sent at all: no later call pays to read it, and it no longer pushes the
context toward a compaction:

    |---- cached, read 0.1x ----|[cleared ... kept ... kept ... newest]|
                                 ^ the batch's first block: tokens_after() counts from here

Without each piece:
- no_longer_needed: clearing the newest results, or the last whole read of a file the model
  is about to edit, makes it read the file again (an edit, or a read of some lines, shows
  only a part; a read cut short or a write that failed shows nothing new).
- Cleared (once cleared, always, with the placeholder made once): a placeholder whose text
  changed from one call to the next would rewrite the cache from there on every call; past
  1,000 cleared results, making each again took seconds per call.
- the saved copy (spill.save_for_placeholder): once cleared, a long result would be gone
  for the model, which would run the command again, or guess.
- inputs: a session that writes a few big files carries every byte it ever wrote in every
  request, long after the files are on disk (the API's own clear_tool_uses edit has a
  clear_tool_inputs option for the same reason).
- the second cache breakpoint just before the batch (view): the API looks for a cached
  prefix at most 20 blocks back from a breakpoint; a batch further back would miss the cache
  altogether, and the whole request, tools and system included, would be written again.
Simpler than a production agent: tokens are estimated as characters / 4 (tokens.estimate,
the one s06, /context and the session page use).
"""

import os

from harness import spill, terminal, tokens
from harness.files import READ_ON          # how read_file ends a read it cut short
from harness.session.blocks import INPUT_PLACEHOLDER    # how /context and the page tell them

INPUT_FIELDS = {"write_file": ("content",), "edit_file": ("old_text", "new_text")}
SHOW_WHOLE_FILE = {"read_file", "write_file"}   # an edit shows only a part of a file


class Batch:
    """What one clearing would clear: {tool_use id: tokens it frees}, results and inputs."""

    def __init__(self) -> None:
        self.results = {}
        self.inputs = {}

    @property
    def tokens(self) -> int:
        return sum(self.results.values()) + sum(self.inputs.values())

    @property
    def ids(self) -> set:
        return set(self.results) | set(self.inputs)


class Cleared:
    """What layer 1 has cleared so far. Once cleared, always, with the same text: between
    batches, every request repeats the last one byte for byte (read from the cache).

    Each entry remembers the very block it cleared, not just its id: an endpoint that numbers
    its ids afresh (after a compaction or /clear) must not have a new result shown as an old
    one's placeholder."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Nothing cleared: a new history (after a compaction) holds none of these blocks."""
        self.results = {}          # tool_use id -> the placeholder text shown instead
        self.inputs = set()        # ids of calls whose write/edit texts are placeholders
        self.blocks = {}           # tool_use id -> the blocks cleared under that id
        self.batch_start = None    # the first id of the latest batch: a breakpoint goes before it

    def add(self, run, batch: Batch, messages: list) -> None:
        """Clear the batch: each result's placeholder made now, its saved copy pinned in
        run.saved."""
        calls = _calls_by_id(messages)
        for block in _results(messages):
            tid = block["tool_use_id"]
            if tid in batch.results:
                self.results[tid] = _placeholder(block, calls.get(tid, {}), run.saved)
                self.blocks.setdefault(tid, []).append(block)
        for tid in batch.inputs:
            self.blocks.setdefault(tid, []).append(calls[tid])
        self.inputs |= set(batch.inputs)
        self.batch_start = first_id(messages, batch.ids)

    def holds(self, block: dict) -> bool:
        """Was this very block (a result or a call) cleared?"""
        tid = block.get("tool_use_id") or block.get("id")
        return any(b is block for b in self.blocks.get(tid, ()))


def no_longer_needed(messages: list, keep_recent: int, keep_chars: int,
                     cleared: Cleared) -> Batch:
    """The results and inputs the model can do without, not yet cleared: older than the newest
    keep_recent, longer than keep_chars, not in the newest turn (the model has not seen its
    results yet), and for a read_file, made stale by a later whole read or write of the file."""
    batch = Batch()
    newest_turn = _newest_turn(messages)
    calls = _calls_by_id(messages)
    results = _results(messages)
    later_whole, old = set(), len(results) - keep_recent
    for n in range(len(results) - 1, -1, -1):
        block = results[n]
        tid = block["tool_use_id"]
        call = calls.get(tid, {})
        stale = call.get("name") != "read_file" or path_of(call) in later_whole
        long = len(str(block.get("content"))) > keep_chars
        if n < old and long and stale and tid not in newest_turn and not cleared.holds(block):
            batch.results[tid] = tokens.estimate(block.get("content"))
        later_whole |= files_shown_whole(call, block)
    ordered = list(calls.values())
    for call in ordered[:max(len(ordered) - keep_recent, 0)]:
        texts = _texts(call)
        tid = call.get("id")
        if cleared.holds(call) or tid in newest_turn or not texts:
            continue
        if sum(len(t) for t in texts.values()) > keep_chars:
            batch.inputs[tid] = tokens.estimate(texts) - tokens.estimate(_input_placeholders(texts))
    return batch


def tokens_after(messages: list, batch: Batch) -> int:
    """The tokens from the batch's first message to the end: what clearing it rewrites."""
    if not batch.ids:
        return 0
    return tokens.estimate(messages[first_message_with(messages, batch.ids):])


def view(messages: list, cleared: Cleared) -> list:
    """The history as the model will see it (a copy): every cleared result as its placeholder,
    every cleared input text as its own, and a cache breakpoint just before the latest batch."""
    shown = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and _holds_cleared(content, cleared):
            blocks = []
            for block in content:
                blocks.append(_as_seen(block, cleared))
            message = {**message, "content": blocks}
        shown.append(message)
    return _with_cache_point(shown, cleared.batch_start)


def announce(run, batch: Batch) -> None:
    """Layer 1 cleared a batch: a note for the user, a mark for the session page."""
    count = len(batch.ids)
    what = "an old tool result is now a placeholder"
    if count > 1:
        what = f"{count} old tool results (or inputs) are now placeholders"
    terminal.show_note(f"  [micro_compact: {what} (about {batch.tokens:,} tokens cleared); "
                       "the history keeps every result]")
    run.recorder.cleared(count, batch.tokens)


# ---------------------------------------------------------------- reading the history

def _calls_by_id(messages: list) -> dict:
    calls = {}
    for message in messages:
        if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                calls[block.get("id")] = block
    return calls


def _results(messages: list) -> list:
    results = []
    for message in messages:
        if message.get("role") != "user" or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                results.append(block)
    return results


def _newest_turn(messages: list) -> set:
    """Ids of the newest turn's calls and results: the model wrote those calls and has not
    seen those results yet (several come back in one message)."""
    ids = set()
    for message in messages[-2:]:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict):
                ids.add(block.get("id") or block.get("tool_use_id"))
    return ids - {None}


def files_shown_whole(call: dict, result: dict) -> set:
    """{the path} if this call showed the whole file as it now is (a read_file of all its
    lines, a write_file), and worked; else an empty set."""
    given = call.get("input") if isinstance(call.get("input"), dict) else {}
    part = call.get("name") == "read_file" and (     # some lines, or cut short at the cap
        given.get("offset") not in (None, 1) or given.get("limit") is not None
        or READ_ON in str(result.get("content", "")))
    shown = call.get("name") in SHOW_WHOLE_FILE and not part and not result.get("is_error")
    return {path_of(call)} - {None} if shown else set()


def path_of(call: dict):
    """The path a file tool call names, normalised ("./a.txt" is "a.txt"), or None."""
    given = call.get("input") if isinstance(call.get("input"), dict) else {}
    path = given.get("path")
    return os.path.normpath(path) if isinstance(path, str) and path else None


def first_id(messages: list, ids: set):
    """Of these ids, the one that comes first in messages (where a batch of them starts)."""
    for message in messages:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict):
                found = block.get("id") or block.get("tool_use_id")
                if found in ids:
                    return found
    return None


def first_message_with(messages: list, ids: set) -> int:
    """The index of the first message holding a tool_use or tool_result with one of these ids."""
    for n, message in enumerate(messages):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and (block.get("id") in ids
                                            or block.get("tool_use_id") in ids):
                return n
    return len(messages)


# ---------------------------------------------------------------- placeholders

def _placeholder(block: dict, call: dict, saved: spill.SavedTexts) -> str:
    """A cleared result's text, made once. A read_file says which file a later read or write
    shows; anything else names the file its whole text was saved to, when it was worth one."""
    name = call.get("name", "a tool")
    if name == "read_file":
        return f"[Previous: read {path_of(call)}; a later read or write of it follows]"
    path = spill.save_for_placeholder(block.get("content"), name, saved)
    if path:
        return f"[Previous: used {name}; the whole result is in {path}]"
    return f"[Previous: used {name}]"


def _holds_cleared(content: list, cleared: Cleared) -> bool:
    for block in content:
        if isinstance(block, dict) and cleared.holds(block):
            return True
    return False


def _as_seen(block, cleared: Cleared):
    if not isinstance(block, dict) or not cleared.holds(block):
        return block
    if block.get("type") == "tool_result":
        return {**block, "content": cleared.results[block["tool_use_id"]]}
    if block.get("type") == "tool_use":
        texts = _texts(block)
        return {**block, "input": {**block["input"], **_input_placeholders(texts)}}
    return block


def _texts(call: dict) -> dict:
    """The clearable text fields of a tool call: {} for any other tool, or a non-string."""
    names = INPUT_FIELDS.get(call.get("name"), ())
    given = call.get("input") if isinstance(call.get("input"), dict) else {}
    return {k: given[k] for k in names if isinstance(given.get(k), str)}


def _input_placeholders(texts: dict) -> dict:
    # Worded so that it cannot pass for file contents, which a model might copy, and true
    # whether or not the call worked (its result says so).
    return {k: f"{INPUT_PLACEHOLDER}{len(v):,} characters; read_file shows the file as it "
               "is now]" for k, v in texts.items()}


def _with_cache_point(view: list, batch_start) -> list:
    """The view with a cache breakpoint on the block just before the latest batch (the loop's
    top-level breakpoint is the first; the API allows 4)."""
    n = first_message_with(view, {batch_start}) if batch_start else len(view)
    if not 0 < n < len(view):
        return view
    before = view[n - 1]
    content = before["content"]
    if isinstance(content, str):
        blocks = [{"type": "text", "text": content}]
    else:
        blocks = list(content)
    blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
    return view[:n - 1] + [{**before, "content": blocks}] + view[n:]
