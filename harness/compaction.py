"""What s06's layers need and a learner need not read: the bookkeeping around layers 1 and 2.

s06 holds the layers themselves: which results layer 1 clears and what replaces them, the
batch rule, layer 2's threshold and summary request. This module does the rest, for s06 (and
so s07): which input fields of a call are its texts, when a call shows a file whole, saving a
cleared result (from 2,000 characters: spill.py), and where a batch's rewrite starts. Without
each piece:
- input_texts / path_of / shows_whole_file: layer 1 cannot tell a write or edit's big texts,
  nor that a later read_file (of all its lines) or write_file shows a file whole again; a
  read cut short at the cap, or a read of some lines, or a write that failed, shows nothing
  new, and clearing the earlier read makes the model read the file again.
- save_whole (spill.save_for_placeholder): once cleared, a long result would be gone for the
  model, which would run the command again, or guess.
- tokens_from / first_of: the batch rule weighs what a batch frees against what clearing it
  makes the API write to the cache again, from its first block on.
- breakpoint_before: the API looks for a cached prefix at most 20 blocks back from a
  breakpoint; a batch further back would miss the cache altogether, and the whole request,
  tools and system included, would be written again.
- announce_cleared: the user does not see what layer 1 did; the session page has no mark.
- save_transcript: two compactions in one second overwrite each other's transcript, and a
  full disk leaves a truncated transcript (or an empty file) that looks like a complete one.
  Written through harness/writer.py: a link planted at its old temporary name received the
  whole conversation, and the transcript was readable by every local user.
- failed: an API error during the summary call, or a full disk, ends the turn with a
  traceback.
- announce: the user does not see what layer 2 did, nor that a summary over
  COMPACT_THRESHOLD will not be compacted again until the context grows; the session page
  (through the run's recorder) has no mark where it acted. It names the transcript as the
  user finds it (run.screen.where): `demo/.transcripts/…` during --demo.
- window_guard and fit_to_window (s06's start): with a window smaller than the threshold
  (a local model's), or with --api-context, layer 2 would act only once a request no longer
  fits: then the summary request does not fit either, and the session can never go on. A
  window the system prompt and tools (nearly) filled (CONTEXT_WINDOW=300 for 3000) summarised every
  prompt away before the model saw it: one that leaves less than MIN_ROOM is refused.
- fit_for_summary: the summary request of a conversation already past the window is
  refused, and the session can never go on; it starts at a prompt (inside one long turn,
  that turn's prompt and its newest calls), never at a result without its call.
- compact_now: /compact with nothing to compact, or without a model, fails at the API.
Simpler than a production agent: tokens are estimated as characters / 4 (tokens.estimate, the
one s06, /context and the session page use).
"""

import json
import os
import time
from pathlib import Path

from harness import config, spill, terminal, tokens, writer
from harness.errors import EndpointError, SetupError, reason
from harness.files import READ_ON          # how read_file ends a read it cut short

# The texts of a write or edit call layer 1 may clear.
INPUT_FIELDS = {"write_file": ("content",), "edit_file": ("old_text", "new_text")}
SHOW_WHOLE_FILE = {"read_file", "write_file"}   # an edit shows only a part of a file
# How the new first message opens after a compaction (the demo knows one by it).
SUMMARY_OPENING = "[This conversation was compacted to save context."
# Tokens a window must leave layer 2 beyond the system prompt and tools: less holds no prompt
# and its summary, and every prompt would be summarised before the model saw it.
MIN_ROOM = 1_000
# s06's (and s07's) flag that lets the API manage the context on the server instead of layers
# 1 and 2 (docs/cost.md). Defined here, where both lessons' parsers find it at start without
# loading harness/api_context.py, which does the work and loads only when the flag is given.
API_CONTEXT_FLAG = (("--api-context",), {
    "choices": ("clear", "compact"), "metavar": "{clear,compact}",
    "help": "let the API manage the context on the server instead of the harness's layers 1 "
            "and 2: clear old tool results (context editing), or compact (a summary the API "
            "writes); see docs/cost.md"})


# ---------------------------------------------------------------- layer 1's bookkeeping

def input_texts(call: dict) -> dict:
    """The clearable texts of a tool call: {} for any other tool, or a text not a string."""
    names = INPUT_FIELDS.get(call.get("name"), ())
    given = call.get("input") if isinstance(call.get("input"), dict) else {}
    return {k: given[k] for k in names if isinstance(given.get(k), str)}


def path_of(call: dict):
    """The path a file tool call names, normalised ("./a.txt" is "a.txt"), or None."""
    given = call.get("input") if isinstance(call.get("input"), dict) else {}
    path = given.get("path")
    return os.path.normpath(path) if isinstance(path, str) and path else None


def shows_whole_file(call: dict, result: dict) -> set:
    """{the path} if this call showed the whole file as it now is (a read_file of all its
    lines, a write_file), and worked; else an empty set."""
    given = call.get("input") if isinstance(call.get("input"), dict) else {}
    part = call.get("name") == "read_file" and (     # some lines, or cut short at the cap
        given.get("offset") not in (None, 1) or given.get("limit") is not None
        or READ_ON in str(result.get("content", "")))
    shown = call.get("name") in SHOW_WHOLE_FILE and not part and not result.get("is_error")
    return {path_of(call)} - {None} if shown else set()


def save_whole(result: dict, name: str, run):
    """Where the whole of a result layer 1 clears can be read again (pinned for the run), or
    None: too short to be worth a file, or it cannot be saved."""
    return spill.save_for_placeholder(result.get("content"), name, run.saved)


def first_of(messages: list, batch: list):
    """Of a batch of (block, call), the block that comes first in the history."""
    wanted = {id(block) for block, call in batch}
    for message in messages:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if id(block) in wanted:
                return block
    return None


def tokens_from(view: list, batch: list) -> int:
    """The tokens from the first message that names a call of the batch (its tool_use) to
    the end of the view: about what clearing the batch makes the API write again."""
    ids = {_tool_id(block) for block, call in batch}
    for n, message in enumerate(view):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and _tool_id(block) in ids:
                return tokens.estimate(view[n:])
    return 0


def _tool_id(block: dict):
    return block.get("tool_use_id") or block.get("id")


def breakpoint_before(view: list, first) -> list:
    """The view with a cache breakpoint on the last block of the message just before the
    first one that names `first`'s call (the latest batch's first block, or its tool_use):
    all before it is unchanged, and read from the cache (while its entry lives: 5 minutes
    from its last use). s03's request has the other."""
    n = _message_with(view, first)
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


def _message_with(view: list, first) -> int:
    """The index of the view's message holding `first` or what is shown for it (its tool id)."""
    if first is None:
        return len(view)
    wanted = _tool_id(first)
    for n, message in enumerate(view):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and _tool_id(block) == wanted:
                return n
    return len(view)


def announce_cleared(run, count: int, freed: int) -> None:
    """Layer 1 cleared a batch: a note for the user, a mark for the session page."""
    what = "an old tool result is now a placeholder"
    if count > 1:
        what = f"{count} old tool results (or inputs) are now placeholders"
    terminal.show_note(f"  [micro_compact: {what} (about {freed:,} tokens cleared); "
                       "the history keeps every result]")
    run.recorder.cleared(count, freed)


# ---------------------------------------------------------------- layer 2's bookkeeping

def window_guard(window: int, reply_tokens: int) -> int:
    """The most layer 2 may let a request grow to in a window of this size: room for the
    reply, and for the summary request that follows it."""
    return max(window - 2 * reply_tokens, window // 2)


def fit_to_window(threshold: int, prefix: int, reply_tokens: int, api_context) -> int:
    """s06's threshold, lowered to fit the model's window (a local model's may be smaller
    than the threshold); with --api-context (api_context not None), layer 2 acts only there.
    prefix: the system prompt and tools. SetupError if the window leaves less than MIN_ROOM
    beyond them."""
    window = config.context_window()
    guard = window_guard(window, reply_tokens)
    if guard - prefix < MIN_ROOM:
        raise SetupError(f"CONTEXT_WINDOW {window:,} leaves no room for a conversation: the "
                         f"system prompt and tools alone are about {prefix:,} of the "
                         f"{guard:,} tokens layer 2 lets a request grow to, and the work "
                         f"needs {MIN_ROOM:,}")
    if api_context is not None:
        return guard
    # A threshold past the window would never be reached: lower it, and say so once.
    if threshold > guard:
        terminal.show_note(f"[COMPACT_THRESHOLD {threshold:,} does not fit the model's window "
                           f"of {window:,} tokens: layer 2 compacts at {guard:,}]")
        return guard
    return threshold


def fit_for_summary(view: list, room: int) -> list:
    """The view, its oldest turns left out until it fits in `room` tokens (the summary
    request of a conversation already past the model's window would be refused, and the
    session could never go on). It starts at a user prompt, or, inside one long turn, at
    that turn's prompt followed by the newest calls that fit; never between a call and its
    result. If nothing fits, the shortest such view: the API may refuse it, and the
    compaction fails in one line with the history kept. The transcript keeps what is left
    out; the user is told."""
    if tokens.estimate(view) <= room:
        return view
    shorter, prompt = [], 0           # prompt: the turn's prompt (or the last summary)
    for start in range(1, len(view)):
        if view[start]["role"] == "assistant":
            # A request opens with a user message: the turn's prompt says what the work is.
            shorter = [view[prompt]] + view[start:]
            kept = f"its turn's prompt and newest {len(view) - start} messages"
        elif not _results_only(view[start]):
            shorter, prompt = view[start:], start
            kept = f"its newest {len(view) - start} messages"
        else:
            continue                  # results without their calls: never a start
        if tokens.estimate(shorter) <= room:
            break
    if not shorter:
        return view
    terminal.show_note(f"[the conversation is past the model's window: the summary covers "
                       f"{kept}; the transcript keeps them all]")
    return shorter


def _results_only(message: dict) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def save_transcript(messages: list) -> Path:
    return save(config.TRANSCRIPTS, messages)


def save(folder: Path, messages: list) -> Path:
    """The history as JSONL, one message per line, in a new transcript_<time>_<n>.jsonl."""
    lines = (json.dumps(m, ensure_ascii=False) + "\n" for m in messages)
    return save_new(folder, "transcript", lines)


def save_new(folder: Path, stem: str, lines) -> Path:
    """Write lines to folder/<stem>_<time>_<n>.jsonl, whole or not at all, never over another.

    The name has the same length for the first of a second and the second of a second, so
    the summary message that names it (and the token counts after it) do not depend on when
    two compactions fall.

    writer.numbered writes a temporary file (a random name, never through a link planted
    there), then gives it the first free name; on any failure nothing is left behind. The
    file is readable by this user alone: it holds the whole conversation.
    """
    data = "".join(lines).encode("utf-8")    # text that cannot be stored fails before a file
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return writer.numbered(folder, f"{stem}_{stamp}", ".jsonl", data, writer.PRIVATE)


def failed(exc: Exception, path=None, folder: Path = config.TRANSCRIPTS) -> bool:
    """One line for the user; the history is left exactly as it was. Returns False."""
    if isinstance(exc, OSError):
        why = f"cannot save the transcript in {folder}/ ({reason(exc)})"
    elif isinstance(exc, (ValueError, EndpointError)):
        why = str(exc)
    else:
        raise exc
    # skipped: the summary was not asked for; failed: it was, and the transcript is saved
    verb = "skipped" if isinstance(exc, OSError) else "failed"
    saved = f" · transcript {path}" if path else ""
    terminal.show_note(f"[compaction {verb}, history kept: {why}{saved}]")
    return False


def announce(run, before: int, after: int, threshold: int, summary: str, path: Path,
             counted=None) -> None:
    """Layer 2 compacted: a note (and a warning if the summary alone is over the threshold),
    and a mark in run.recorder for the session page. Both sizes are what the next request
    sends, system prompt and tools included; counted is the part of `before` the API counted
    (None: all of it estimated)."""
    terminal.show_note(f"[compacted: {before:,} → ~{after:,} tokens (estimated: the next call "
                       f"counts it) · transcript {run.screen.where(path)}]")
    if after > threshold:
        terminal.show_note(f"[the summary alone is over COMPACT_THRESHOLD ({after:,} > "
                           f"{threshold:,} tokens): no new compaction until the context grows "
                           "by half that; raise COMPACT_THRESHOLD]")
    run.recorder.compacted(before, after, summary, path, counted=counted)


def compact_now(compact, messages: list, run, focus: str) -> None:
    """/compact [focus]: layer 3, typed by a person (compact is s06's or s07's compaction).
    The one REPL command that calls the model: it asks for the summary. Without a model (no
    key, a history resumed with --continue) it is refused in one line; the history stays."""
    if not messages:
        terminal.show_note("[nothing to compact yet]")
    elif run.client is None:
        raise SetupError("/compact asks the model for the summary, and there is no model to "
                         "talk to: set ANTHROPIC_API_KEY (docs/real-use.md), or see a "
                         "compaction with no key in --demo; the conversation is as it was")
    else:
        compact(messages, run, focus)
