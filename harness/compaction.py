"""What s06's layers need and a learner need not read: the bookkeeping around layers 1 and 2.

s06 holds the layers (what layer 1 clears, the batch rule, layer 2's threshold and summary
request); this module does the rest, for s06 and so s07. Without each piece:
- input_texts / path_of / shows_whole_file: layer 1 cannot tell a write or edit's big texts,
  nor that a later whole read_file or write_file shows a file again (a partial or capped read,
  or a failed write, does not), and clearing the earlier read makes the model read it again.
- save_whole: a cleared long result is gone for the model, which runs it again or guesses.
- tokens_from_first_call / first_of: the batch rule cannot weigh what a batch frees against
  the cache it makes the API write again, from its first block on.
- breakpoint_before: the API looks for a cached prefix at most 20 blocks back; a batch
  further back misses the cache, and the whole request is written again.
- announce_cleared / announce: the user does not see what layer 1 or 2 did, nor that a
  summary over COMPACT_THRESHOLD will not be compacted again soon; the session page has no mark.
- save_transcript: two compactions in one second overwrite each other's transcript, a full
  disk leaves one that looks whole, and a link planted at its name receives the conversation.
- summary_of: a refusal's words ("no"), or a summary longer than the conversation (from an
  endpoint that ignored max_tokens), became the new history.
- failed: an API error in the summary call, or a full disk, ends the turn in a traceback.
- window_guard / fit_to_window: with a window smaller than the threshold (a local model's),
  or --api-context, layer 2 acts once a request no longer fits, and then its summary request
  cannot fit either; a window or threshold the system prompt and tools nearly fill has every
  prompt summarised away (MIN_ROOM: the window is refused, the threshold raised).
- fit_for_summary: a conversation already past the window can never be summarised.
- compact_now: /compact with nothing to compact, or without a model, fails at the API; of a
  history that is one summary, it pays for a summary of the summary.
"""

import json
import os
import time
from pathlib import Path

from harness import config, pairing, spill, terminal, tokens, writer
from harness.errors import EndpointError, SetupError, reason
from harness.files import READ_ON          # how read_file ends a read it cut short

# The texts of a write or edit call layer 1 may clear.
INPUT_FIELDS = {"write_file": ("content",), "edit_file": ("old_text", "new_text")}
SHOW_WHOLE_FILE = {"read_file", "write_file"}   # an edit shows only a part of a file
# How the new first message opens after a compaction (the demo knows one by it).
SUMMARY_OPENING = "[This conversation was compacted to save context."
# Tokens layer 2 needs beyond the system prompt and tools, in the window and the threshold.
MIN_ROOM = 1_000
# s06's and s07's flag, here so that their parsers need not load harness/api_context.py.
API_CONTEXT_FLAG = (("--api-context",), {
    "choices": ("clear", "compact"), "metavar": "{clear,compact}",
    "help": "let the API manage the context: clear old tool results (context editing), or "
            "compact (a summary it writes), instead of layer 1 and layer 2's threshold; layer "
            "2 still guards the window; docs/cost.md"})


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
    None: too short to be worth a file (spill.py), or it cannot be saved."""
    return spill.save_for_placeholder(result.get("content"), name, run.saved)


def first_of(messages: list, batch: list):
    """Of a batch of (block, call), the block that comes first in the history."""
    wanted = {id(block) for block, call in batch}
    return next((b for _, _, b in pairing.each_block(messages) if id(b) in wanted), None)


def tokens_from_first_call(view: list, batch: list) -> int:
    """The tokens from the first message that names a call of the batch (its tool_use) to
    the end of the view: about what clearing the batch makes the API write again."""
    ids = {pairing.tool_id(block) for block, call in batch}
    for n, _, block in pairing.each_block(view):
        if pairing.tool_id(block) in ids:
            return tokens.estimate(view[n:])
    return 0


def breakpoint_before(view: list, first) -> list:
    """The view with a cache breakpoint on the last block of the message before the first
    that names `first`'s call (the latest batch's first block): all before it is unchanged,
    and read from the cache (for 5 minutes from its last use). s03's request has the other."""
    n = len(view)
    if first is not None:
        wanted = pairing.tool_id(first)
        found = (i for i, _, b in pairing.each_block(view) if pairing.tool_id(b) == wanted)
        n = next(found, n)
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
    """s06's threshold, lowered to fit the model's window, or raised to leave MIN_ROOM beyond
    prefix (the system prompt and tools); with --api-context (not None), the window's guard.
    SetupError if the window leaves less than MIN_ROOM beyond prefix."""
    window = config.context_window()
    guard = window_guard(window, reply_tokens)
    needed = prefix + MIN_ROOM
    if guard < needed:
        # The smallest window whose guard leaves MIN_ROOM: by either of window_guard's terms.
        smallest = min(needed + 2 * reply_tokens, 2 * needed)
        raise SetupError(f"CONTEXT_WINDOW {window:,} is too small: the system prompt and tools "
                         f"take about {prefix:,} tokens, the work needs {MIN_ROOM:,} more, and "
                         "a reply and a summary need room too; set CONTEXT_WINDOW to at least "
                         f"{smallest:,} (the model's real window is best)")
    if api_context is not None:
        return api_context.within(guard)     # said if the API's trigger is past it
    # A threshold past the window would never be reached: lower it, and say so once.
    if threshold > guard:
        terminal.show_note(f"[COMPACT_THRESHOLD {threshold:,} does not fit the model's window "
                           f"of {window:,} tokens: layer 2 compacts at {guard:,}]")
        return guard
    # One under `needed` would have layer 2 summarise before every call: raise it.
    if threshold < needed:
        terminal.show_note(f"[COMPACT_THRESHOLD {threshold:,} is under what layer 2 needs: the "
                           f"system prompt and tools (about {prefix:,} tokens) plus "
                           f"{MIN_ROOM:,}; it compacts at {needed:,}]")
    return max(threshold, needed)


def fit_for_summary(view: list, room: int) -> list:
    """The view, its oldest turns left out until it fits in `room` tokens (the user is told;
    the transcript keeps them). It starts at a user prompt, or, inside one long turn, at that
    turn's prompt and the newest calls that fit; never between a call and its result. If
    nothing fits, the shortest such view: the API may refuse it, and the compaction fails in
    one line with the history kept."""
    if tokens.estimate(view) <= room:
        return view
    # Each message measured once, and the view cut once: measuring and copying all that
    # follows each start again took 392 s of CPU for 17.7 MB of history. (tokens.characters:
    # a list's JSON is its items', each + 2; estimate() divides by CHARS_PER_TOKEN.)
    each = [tokens.characters(message) + 2 for message in view]
    after = sum(each)                 # the characters of view[start:] as a list
    head, cut, prompt = [], 0, 0      # prompt: the turn's prompt (or the last summary)
    for start in range(1, len(view)):
        after -= each[start - 1]
        if view[start]["role"] == "assistant":
            # A request opens with a user message: the turn's prompt says what the work is.
            head, size = [view[prompt]], each[prompt] + after
        elif not _results_only(view[start]):
            head, prompt, size = [], start, after
        else:
            continue                  # results without their calls: never a start
        cut = start
        if size // tokens.CHARS_PER_TOKEN <= room:
            break
    shorter = head + view[cut:]
    # Nothing left out (one call and its result, say): no note, and the request as it is.
    if cut == 0 or len(shorter) == len(view):
        return view
    kept = f"its newest {len(view) - cut} messages"
    if head:
        kept = f"its turn's prompt and newest {len(view) - cut} messages"
    terminal.show_note(f"[the conversation is too long to summarise whole in the model's "
                       f"window: the summary covers {kept}; the transcript keeps them all]")
    return shorter


def _results_only(message: dict) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def save_transcript(messages: list) -> Path:
    return save(config.TRANSCRIPTS, messages)


def save(folder: Path, messages: list) -> Path:
    """The history as JSONL, one message a line, in a new folder/transcript_<time>_<n>.jsonl:
    whole or not at all, never over another file nor through a planted link, readable by this
    user alone. The first and second of a second have names of one length, so the summary
    that names one (and its token count) does not depend on when compactions fall."""
    data = "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages)
    data = data.encode("utf-8")    # text that cannot be stored fails before a file is made
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return writer.numbered(folder, f"transcript_{stamp}", ".jsonl", data, writer.PRIVATE)


def summary_of(response, view: list) -> str:
    """The summary s06 asked for: the model's words, or ValueError if there are none, the
    model refused, or they are no smaller than the view they would replace."""
    if not response.said:
        raise ValueError("the summary came back empty")
    if response.stop_reason == "refusal":
        raise ValueError("the model refused to summarise")
    if tokens.estimate(response.said) >= tokens.estimate(view):
        raise ValueError("the summary is no smaller than the conversation it replaces")
    return response.said


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
    """Layer 2 compacted: a note naming the transcript as the user finds it (under demo/ in
    --demo), a warning if what it left is over the threshold, a mark for the session
    page. Sizes include the system prompt and tools; counted: the part of `before` the API
    counted (None: all estimated)."""
    terminal.show_note(f"[compacted: {before:,} → ~{after:,} tokens (estimated: the next call "
                       f"counts it) · transcript {run.screen.where(path)}]")
    if after > threshold:
        terminal.show_note(f"[what the compaction left (summary, any board, system prompt, "
                           f"tools) is over layer 2's threshold ({after:,} > {threshold:,} "
                           "tokens): no new compaction until it grows by half that; raise "
                           "COMPACT_THRESHOLD, or CONTEXT_WINDOW if the window set the threshold]")
    run.recorder.compacted(before, after, summary, path, counted=counted)


def is_summary_message(message: dict) -> bool:
    """message is the one a compaction leaves: the summary (s07 adds its board to it)."""
    content = message.get("content")
    return isinstance(content, str) and content.startswith(SUMMARY_OPENING)


def compact_now(compact, messages: list, run, focus: str) -> None:
    """/compact [focus]: layer 3, typed by a person (compact: s06's or s07's). Without a
    model (no key) it is refused in one line; the history stays."""
    if not messages:
        terminal.show_note("[nothing to compact yet]")
    elif len(messages) == 1 and is_summary_message(messages[0]):
        # a summary of the summary costs a call and can only lose what the first one kept
        terminal.show_note("[nothing to compact: the conversation is one summary already; it "
                           "grows again with your next prompt]")
    elif run.client is None:
        raise SetupError("/compact asks the model for the summary, and there is no model to "
                         "talk to: set ANTHROPIC_API_KEY (docs/real-use.md), or see a "
                         "compaction with no key in --demo; the conversation is as it was")
    else:
        compact(messages, run, focus)
