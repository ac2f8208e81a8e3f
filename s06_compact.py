#!/usr/bin/env python3
"""s06: three layers of context compaction, so the agent can work for as long as the work takes.

A context window is finite; a long task is not. And every call pays again, by the token, for
the whole conversation it sends. So the agent forgets on purpose, in three layers, keeps a
full record on disk so nothing is really lost, and keeps what it sends stable for the cache.

    before every model call (layer 2 checks first, then layer 1 builds what is sent):
      layer 1  micro_compact   in what the model sees, old tool results (and old big
                               write/edit texts) become "[Previous: used bash]", in batches
                               worth the cache they rewrite (the newest turn, short ones
                               and the last read of each file stay; the history keeps all)
      layer 2  auto_compact    context > COMPACT_THRESHOLD (and grown by half since)?
                                 1. history -> .transcripts/transcript_<time>_<n>.jsonl
                                 2. the model writes a summary (same prefix: cached)
                                 3. history := [summary + transcript path]
    any time:
      layer 3  `compact` tool or /compact   -> the same as layer 2, now

Prompt caching, the rule layer 1 is built around. The API caches the request's prefix, in
this order, up to a breakpoint (s03's loop sets one on the last block):

    tools -> system -> message 1 -> message 2 -> ... -> last block   <- breakpoint
    |------- read from the cache: 0.1 x price --------|-- new: written, 1.25 x --|

It matches byte for byte, looks back at most 20 blocks, lives 5 minutes, and silently caches
nothing below a minimum (1,024 tokens on Sonnet-class models). Rewriting an early part throws
the cache away from there on: so placeholders come in rare, large batches (with a second
breakpoint just before the batch), and the summary call repeats the conversation's prefix.

Key insight: the conversation is working memory, not storage. Summaries keep the thread; the
transcript (and every big result, saved whole) keeps every detail for whoever needs it.

Read it in this order: layer 1, measuring the context (ContextSize), layer 2, layer 3, then
the loop. New since s03: all of those (four marked lines in the loop) and /compact; the todo
tool is gone (an in-memory plan does not survive a compaction; s07 brings it back, on disk).

Run it:   python s06_compact.py "read every .py file here and summarise each"
          COMPACT_THRESHOLD=5000 python s06_compact.py      (a REPL; /compact, /context)
          python s06_compact.py --demo
"""

import json
import sys
from functools import partial
from pathlib import Path

from harness import demos, layer1, spill, transcripts
from harness.session import log as session_log
from harness.cli import run_cli, step_limit
from harness.config import max_steps, model_id, positive_int
from harness.endpoints import assistant_turn, check_args, complete_tool_calls, cut_note, decode_args, final_text
from harness.session.record import RECORD
from harness.session.views import context_command
from harness.terminal import show_note, show_stream, show_usage, usage_counts
from s03_todo import (BASE_HANDLERS, BASE_TOOLS, CACHE, MAX_TOKENS, object_schema, run_tool_calls,
                      show_reply)

MAX_STEPS = 200                 # model calls a turn may make: compaction lets a turn go on
CLEAR_AT_LEAST = 8_000          # a batch rewrites the cache after it: free this much (--sweep)
KEEP_RECENT = 1                 # the newest result stays whole: the model may still be using it
KEEP_CHARS = 400                # a result this short costs little, and less read from the cache
DEFAULT_THRESHOLD = 50_000      # tokens; well below the window, leaving room for the summary call
SUMMARY_MAX_TOKENS = 2000       # a summary longer than this is no longer a summary
TRANSCRIPTS = Path(".transcripts")

SYSTEM = ("You are a coding agent working in the current folder. Use the tools to act. "
          "When the context gets long or a phase of work is done, call compact. Be brief.")


# ---------------------------------------------------------------- layer 1

_CLEARED = set()  # ids of tool results shown as placeholders: once cleared, always (the cache)
_CLEARED_INPUTS = set()  # ids of calls whose write/edit texts are placeholders, the same way
_LATEST = [None]  # the first id of the latest batch: a cache breakpoint goes just before it


def micro_compact(messages: list, batch: bool = True) -> list:
    """The history as the model will see it: old tool results become placeholders, in batches.

    Once cleared, always cleared: between batches each request repeats the last byte for byte
    (read from the cache). A copy: the history keeps all. batch=False starts no new batch."""
    calls = {b["id"]: b for m in messages if m["role"] == "assistant"
             for b in m["content"] if b.get("type") == "tool_use"}
    results = [b for m in messages if m["role"] == "user" and isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    if batch:
        clear_batch(results, calls, messages)
    view = [{**m, "content": [_placeholder(b, calls) if b.get("tool_use_id") in _CLEARED else b
                              for b in m["content"]]}
            if m["role"] == "user" and isinstance(m["content"], list) else m for m in messages]
    view = layer1.clear_inputs(view, _CLEARED_INPUTS)   # old write_file/edit_file texts
    return layer1.with_cache_point(view, _LATEST[0])  # the prefix before the batch: cached


def clear_batch(results: list, calls: dict, messages: list) -> None:
    """Clear every result and big input no longer needed, if the batch is worth its rewrite."""
    not_yet = layer1.unanswered(messages)   # the newest turn: the model has not seen it
    gone = no_longer_needed(results, calls) - _CLEARED - not_yet
    fresh = {b["tool_use_id"]: estimate_tokens(b["content"]) for b in results if b["tool_use_id"] in gone}
    inputs = layer1.inputs_worth_clearing(messages, KEEP_RECENT, KEEP_CHARS, _CLEARED_INPUTS | not_yet)
    freed, batch = sum(fresh.values()) + sum(inputs.values()), fresh.keys() | inputs.keys()
    if not layer1.batch_worth_clearing(messages, batch, freed, CLEAR_AT_LEAST,
                                              compact_threshold()):
        return                                 # at least CLEAR_AT_LEAST, and more than it rewrites
    _CLEARED.update(fresh)
    _CLEARED_INPUTS.update(inputs)
    _LATEST[0] = layer1.first_id(messages, batch)
    transcripts.announce_cleared(len(batch), freed, show_note)


def no_longer_needed(results: list, calls: dict) -> set:
    """Ids of results the model can do without: not the newest, long, and for a read_file, made
    stale by a later read or write of the whole file that worked. The last read of a file stays
    in sight: an edit, or a read of some lines, shows only a part."""
    later_paths, ids = set(), set()
    for n, block in reversed(list(enumerate(results))):
        call = calls.get(block["tool_use_id"], {})
        name, path = call.get("name"), layer1.path_of(call)
        old = n < len(results) - KEEP_RECENT and len(str(block["content"])) > KEEP_CHARS
        if old and (name != "read_file" or path in later_paths):
            ids.add(block["tool_use_id"])
        later_paths |= layer1.files_shown_whole(call, block)
    return ids


def _placeholder(block: dict, calls: dict) -> dict:
    call = calls.get(block["tool_use_id"], {})
    name = call.get("name", "a tool")
    if name == "read_file":
        return {**block, "content": f"[Previous: read {layer1.path_of(call)}; a later "
                                    "read or write of it follows]"}
    saved = spill.spill_for_placeholder(block["content"], name)   # the whole text stays readable
    return {**block, "content": f"[Previous: used {name}" + (f"; the whole result is in {saved}]"
                                                              if saved else "]")}


# ---------------------------------------------------------------- measuring the context

def estimate_tokens(messages: object) -> int:
    return len(json.dumps(messages, ensure_ascii=False)) // 4


class ContextSize:
    """The API's count for the last call (tools, system, real tokenizer), plus chars/4 since."""

    def __init__(self) -> None:
        self.reported, self.seen = None, 0
        self.after_compaction = 0  # the size right after the last compaction (or failed attempt)

    def record(self, usage, messages: list) -> None:  # after appending the turn `usage` describes
        self.reported = sum(usage_counts(usage)) or None  # uncached + read + written + output
        self.seen = len(messages)

    def estimate(self, messages: list) -> int:
        if self.reported is None or self.seen > len(messages):
            return estimate_tokens(messages)
        return self.reported + estimate_tokens(messages[self.seen:])


CONTEXT = ContextSize()


def compact_threshold() -> int:
    return positive_int("COMPACT_THRESHOLD", DEFAULT_THRESHOLD, "tokens")


def needs_compaction(messages: list) -> bool:
    """Over the threshold, and grown by half a threshold since the last compaction: else a summary
    over the threshold, or a summary call that keeps failing, would be retried on every call."""
    view = messages if CONTEXT.reported else micro_compact(messages)  # uncounted: layer 1 first
    size, limit = CONTEXT.estimate(view), compact_threshold()
    RECORD.threshold(limit)                    # for the session page's threshold line
    return size > limit and size > CONTEXT.after_compaction + limit // 2


# ---------------------------------------------------------------- layer 2

def save_transcript(messages: list) -> Path:
    """Write the history as JSONL, one message per line; never overwrite an earlier one."""
    return transcripts.save_new(TRANSCRIPTS, "transcript",
                                (json.dumps(m, ensure_ascii=False) + "\n" for m in messages))


SUMMARY_REQUEST = """<summary-request>
Pause the work and do not call any tool now. Summarise this conversation so the work can continue
from the summary alone. Keep: the user's request; what was done (files, commands, results); the
current state; decisions made and why; open next steps. Be concrete: names, paths, numbers.{focus}
</summary-request>"""


def summarize(messages: list, client, focus: str = "", system=None, tools=None) -> str:
    """Ask for a summary with the loop's own prefix (system, tools, view: read from the cache),
    the request added to the last user turn; tool_choice stays (a change drops the cache)."""
    ask = SUMMARY_REQUEST.format(focus=f"\nAbove all, preserve: {focus}" if focus else "")
    view = transcripts.ask_at_end(micro_compact(messages, batch=False), ask)
    response = client.messages.create(model=model_id(), system=system or SYSTEM, messages=view,
                                      tools=tools or TOOLS, max_tokens=SUMMARY_MAX_TOKENS, cache_control=CACHE)
    show_usage(response.usage, "summary call tokens")
    summary = "\n".join(b.text for b in response.content or [] if b.type == "text").strip()
    if not summary:
        raise ValueError("the summary came back empty")
    return summary


def auto_compact(messages: list, client, focus="", attach=None, system=None, tools=None) -> bool:
    """Save, summarise, replace; on failure the history stays exactly as it was. attach() gives
    text to add after the summary (s07: the board); system and tools are the caller's (cached)."""
    before = CONTEXT.estimate(micro_compact(messages, batch=False))  # what layer 2 measured
    CONTEXT.after_compaction = before   # if it fails, wait for more work before trying again
    path = None
    try:
        path = save_transcript(messages)  # without its transcript a compaction would lose details
        summary = summarize(messages, client, focus, system, tools)
    except Exception as exc:  # an API error, an empty summary, a full disk: keep the history
        return transcripts.compaction_failed(exc, TRANSCRIPTS, show_note, path)
    extra = attach() if attach else ""
    messages[:] = [{"role": "user", "content": (
        f"[This conversation was compacted to save context. The full transcript is in {path}.]\n\n"
        f"{summary}\n\nContinue the work from here." + (f"\n\n{extra}" if extra else ""))}]
    CONTEXT.reported, CONTEXT.seen = None, 0   # the API has not counted the new history yet
    CONTEXT.after_compaction = after = estimate_tokens(messages)
    transcripts.announce(before, after, compact_threshold(), summary, path, show_note)
    return True


# ---------------------------------------------------------------- layer 3

COMPACT_TOOL = {
    "name": "compact",
    "description": "Summarise the conversation so far and continue from the summary, freeing "
                   "context. Use it when the context is long or a phase of work is finished.",
    "input_schema": object_schema({"focus": {"type": "string",
                                             "description": "what the summary must preserve"}}, []),
}

COMPACTION_FAILED = "[the compaction did not happen; the conversation goes on as it was]"
TOOLS = BASE_TOOLS + [COMPACT_TOOL]
TOOL_HANDLERS = {**BASE_HANDLERS,  # the loop compacts after the results, so the tool only says so
                 "compact": lambda focus="": "Compaction requested: it runs after this step."}


def compact_if_needed(messages: list, client, compact=auto_compact) -> None:
    if needs_compaction(messages):
        compact(messages, client)


def compact_if_asked(calls: list, messages: list, client, compact=auto_compact) -> None:
    """Compact if a call asked to with a valid input (call_tool refused others); say if it fails."""
    for call in [c for c in calls if c.name == "compact"][:1]:
        try:
            args = decode_args(call.input, COMPACT_TOOL["input_schema"])
            check_args(COMPACT_TOOL["input_schema"], args)      # call_tool's verdict, again
        except ValueError:
            return
        if not compact(messages, client, str(args.get("focus", ""))):
            messages[-1]["content"].append({"type": "text", "text": COMPACTION_FAILED})


# ---------------------------------------------------------------- the loop

def agent_loop(messages: list, client) -> str:
    """s03's loop plus the three layers, on its four marked lines."""
    steps = 0
    while steps < max_steps(MAX_STEPS):                  # --max-steps, or MAX_STEPS
        steps += 1
        session_log.record(messages)                     # saved as it goes: --continue
        compact_if_needed(messages, client)                                       # layer 2
        view = micro_compact(messages)                                            # layer 1
        response = show_stream(client.messages.stream(model=model_id(), system=SYSTEM, tools=TOOLS,
                                                      messages=view, max_tokens=MAX_TOKENS,
                                                      cache_control=CACHE))
        show_usage(response.usage, tools=TOOLS)   # warns once if the endpoint dropped the tools
        messages.append(assistant_turn(response, note=show_note))
        CONTEXT.record(response.usage, messages)                                  # layer 2 measures
        if response.stop_reason == "pause_turn":  # the server paused a long turn: resume it
            continue
        calls = complete_tool_calls(response)     # a call cut off by max_tokens is not run
        if not calls:
            return final_text(response)
        show_reply(response)
        results = run_tool_calls(calls, TOOLS, TOOL_HANDLERS) + cut_note(response)
        messages.append({"role": "user", "content": results})
        compact_if_asked(calls, messages, client)                                 # layer 3
    return step_limit(steps)    # not a finished turn: the CLI says how to go on


def compact_now(messages: list, client, arg: str = "", compact=auto_compact) -> None:  # /compact
    if not messages:
        return show_note("[nothing to compact yet]")
    compact(messages, client, arg)


def main(argv: list = None) -> int:
    return run_cli("s06_compact", __doc__, agent_loop, demo=demos.s06_demo, argv=argv,
                   commands={"/compact": compact_now, "/context": partial(
                       context_command, SYSTEM, TOOLS, micro_compact, compact_threshold, CONTEXT)})


if __name__ == "__main__":
    sys.exit(main())
