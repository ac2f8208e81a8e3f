#!/usr/bin/env python3
"""s06: three layers of context compaction, so the agent can work forever.

A context window is finite; a long task is not. And every call pays again, by
the token, for the whole conversation it sends. The agent forgets on purpose,
in three layers, keeps a full record on disk so nothing is really lost, and
keeps what it sends stable so that the API can serve it from its cache.

    before every model call:
      layer 1  micro_compact   in what the model sees, old tool results become
                               "[Previous: used bash]", in batches of at least
                               CLEAR_AT_LEAST tokens (the newest 3, short ones and
                               current file contents stay; the history keeps all)
      layer 2  auto_compact    context > COMPACT_THRESHOLD tokens?
                                 1. history -> .transcripts/transcript_<time>.jsonl
                                 2. the model writes a summary (same prefix: cached)
                                 3. history := [summary + transcript path]
    any time:
      layer 3  `compact` tool or /compact   -> the same as layer 2, now

    [u: task] [a: tool_use] [u: result] ... [u: result]  ~60,000 tokens
                            |  auto_compact
                            v
    [u: "compacted; transcript at ...; summary: ...; continue"]  ~1,000 tokens

Prompt caching, the rule layer 1 is built around. The API caches the request's
prefix, in this order, up to a breakpoint (s03's loop sets one on the last block):

    tools -> system -> message 1 -> message 2 -> ... -> last block   <- breakpoint
    |------- read from the cache: 0.1 x price --------|-- new: written, 1.25 x --|

It matches byte for byte, looks back at most 20 blocks for an earlier cached
prefix, lives 5 minutes, and caches nothing (silently) below a minimum length
(1,024 tokens on Sonnet-class models, more on some). So anything that rewrites
an early part of the conversation throws the cache away from that point on:
placeholders are made in rare, large batches, and the summary call repeats
the conversation's own prefix instead of sending it again as new text.

Key insight: the conversation is working memory, not storage. Summaries keep
the thread; the transcript on disk keeps every detail for whoever needs it.

Read it in this order: layer 1 (micro_compact, no_longer_needed), measuring the
context (ContextSize, needs_compaction), layer 2 (save_transcript, summarize, auto_compact),
layer 3 (the compact tool), then the loop, whose three marked lines use them.

New since s03: micro_compact, ContextSize, auto_compact, the compact tool
and /compact. The loop gains three lines, one per layer. (The todo tool is
gone: an in-memory plan does not survive a compaction well; s07 fixes that.)

Run it:   python s06_compact.py "read every .py file here and summarise each"
          COMPACT_THRESHOLD=5000 python s06_compact.py      (a REPL; /compact)
          python s06_compact.py --demo
"""

import json
import os
import sys
import time
from pathlib import Path

from harness.cli import run_cli
from harness.config import SetupError, describe_api_error, model_id
from harness.terminal import show_note, show_stream, show_usage, usage_counts
from s03_todo import (BASE_HANDLERS, BASE_TOOLS, CACHE, MAX_STEPS, MAX_TOKENS, STEP_LIMIT_TEXT, assistant_turn,
                      final_text, object_schema, run_tool_calls, tool_calls)

KEEP_RECENT = 3                 # the newest tool results the model may still be reasoning about
CLEAR_AT_LEAST = 8_000          # tokens a batch must free: clearing rewrites the cache from that point on
KEEP_CHARS = 400                # a result this short costs little, and less still when read from the cache
FILE_TOOLS = {"read_file", "write_file", "edit_file"}  # a later one of these supersedes a read of that path
DEFAULT_THRESHOLD = 50_000      # tokens; well below the window, leaving room for the summary call
SUMMARY_MAX_TOKENS = 2000       # a summary longer than this is no longer a summary
TRANSCRIPTS = Path(".transcripts")

SYSTEM = ("You are a coding agent working in the current folder. Use the tools to act. "
          "When the context gets long or a phase of work is done, call compact. Be brief.")


# ---------------------------------------------------------------- layer 1

_CLEARED = set()  # tool_use ids shown as placeholders: once cleared, always cleared, so the prefix stays stable


def micro_compact(messages, batch=True):
    """The history as the model will see it: old tool results become placeholders, in batches.

    A batch is cleared only when it frees at least CLEAR_AT_LEAST tokens, and a cleared result
    stays a placeholder, so between batches every request repeats the last one byte for byte
    and the API reads it from its cache. (Clearing one result per call, as a simpler design
    would, changes the prefix every time and nothing is ever read back.) The API's server-side
    `clear_tool_uses_20250919` edit (trigger, keep, clear_at_least) and production agents batch
    for the same reason. batch=False shows the view without starting a new batch.

    It returns a copy; the history itself keeps every result, so the transcript saved by
    layer 2 is complete. Ids and tool_use/tool_result pairs are kept.
    """
    calls = {b["id"]: b for m in messages if m["role"] == "assistant"
             for b in m["content"] if b.get("type") == "tool_use"}
    results = [b for m in messages if m["role"] == "user" and isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    if batch:
        clear = no_longer_needed(results, calls) - _CLEARED
        fresh = [b for b in results if b["tool_use_id"] in clear]
        freed = sum(estimate_tokens(b["content"]) for b in fresh)
        if freed >= CLEAR_AT_LEAST:
            _CLEARED.update(b["tool_use_id"] for b in fresh)
            what = (f"{len(fresh)} old tool results are now placeholders" if len(fresh) > 1
                    else "an old tool result is now a placeholder")
            show_note(f"  [micro_compact: {what} (about {freed:,} tokens cleared); "
                      "the history keeps every result]")
    view = []
    for m in messages:
        if m["role"] == "user" and isinstance(m["content"], list):
            m = {**m, "content": [_placeholder(b, calls) if b.get("tool_use_id") in _CLEARED else b
                                  for b in m["content"]]}
        view.append(m)
    return view


def no_longer_needed(results, calls):
    """Ids of results the model can do without: older than the newest few, long, and for a
    read_file, superseded by a later read, write or edit of the same path (the current
    contents of a file stay in sight)."""
    later_paths, ids = set(), set()
    for n, block in reversed(list(enumerate(results))):
        call = calls.get(block["tool_use_id"], {})
        name, path = call.get("name"), _path(call)
        old = n < len(results) - KEEP_RECENT and len(str(block["content"])) > KEEP_CHARS
        if old and (name != "read_file" or path in later_paths):
            ids.add(block["tool_use_id"])
        if name in FILE_TOOLS and path:
            later_paths.add(path)
    return ids


def _path(call):
    path = (call.get("input") or {}).get("path")
    return os.path.normpath(path) if isinstance(path, str) and path else None


def _placeholder(block, calls):
    call = calls.get(block["tool_use_id"], {})
    name = call.get("name", "a tool")
    if name == "read_file":
        return {**block, "content": f"[Previous: read {_path(call)}; a later read or write of it follows]"}
    return {**block, "content": f"[Previous: used {name}]"}


# ---------------------------------------------------------------- measuring the context

def estimate_tokens(messages):
    return len(json.dumps(messages, ensure_ascii=False)) // 4


class ContextSize:
    """How big the context is: the API's own count for the last call, plus an estimate since.

    The reported count is exact: it includes the system prompt and the tool
    schemas, and the tokenizer's real ratio (code and non-English text run
    far from 4 characters a token). Characters/4 is only the fallback.
    """

    def __init__(self):
        self.reported, self.seen = None, 0
        self.after_compaction = 0  # the size right after the last compaction (or failed attempt)

    def record(self, usage, messages):
        """Call after appending the assistant turn that `usage` describes."""
        self.reported = sum(usage_counts(usage)) or None  # uncached + read + written + output; null counts 0
        self.seen = len(messages)

    def estimate(self, messages):
        if self.reported is None or self.seen > len(messages):
            return estimate_tokens(messages)
        return self.reported + estimate_tokens(messages[self.seen:])

    def reset(self):
        self.reported, self.seen = None, 0


CONTEXT = ContextSize()


def compact_threshold():
    raw = os.environ.get("COMPACT_THRESHOLD", "").strip()
    if not raw:
        return DEFAULT_THRESHOLD
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:  # "²".isdigit() is True; int("²") fails
        raise SetupError(f"COMPACT_THRESHOLD must be a positive whole number of tokens, got {raw!r}")
    return int(raw)


def needs_compaction(messages):
    """Layer 2's test: over the threshold, and grown by half a threshold since the last compaction.

    Without the second part, a summary that is itself over the threshold (a huge board, a
    tiny COMPACT_THRESHOLD), or a summary call that keeps failing, would be retried before
    every model call, each time at the price of the whole context.
    """
    size, limit = CONTEXT.estimate(messages), compact_threshold()
    return size > limit and size > CONTEXT.after_compaction + limit // 2


# ---------------------------------------------------------------- layer 2

def save_transcript(messages):
    """Write the history as JSONL, one message per line; never overwrite an earlier one."""
    TRANSCRIPTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        path = TRANSCRIPTS / (f"transcript_{stamp}.jsonl" if n == 1 else f"transcript_{stamp}_{n}.jsonl")
        try:
            with path.open("x", encoding="utf-8") as f:  # "x": fail rather than overwrite
                f.writelines(json.dumps(m, ensure_ascii=False) + "\n" for m in messages)
            return path
        except FileExistsError:
            continue
    raise OSError(f"too many transcripts named transcript_{stamp}*")


SUMMARY_REQUEST = """<summary-request>
Pause the work and do not call any tool now. Summarise this conversation so the work can continue
from the summary alone. Keep: the user's request; what was done (files, commands, results); the
current state; decisions made and why; open next steps. Be concrete: names, paths, numbers.{focus}
</summary-request>"""


def summarize(messages, client, focus="", system=None, tools=None):
    """Ask for a summary by sending the conversation's own prefix, so the call reads the cache.

    Same system, tools and view as the loop's last call, with the request appended to the
    last user turn: everything before it is already cached and costs a tenth. tool_choice
    stays as the loop sends it, because changing it (to "none") makes the API drop the
    cached messages; the request asks in words for no tool call, and any call is ignored.
    """
    view = micro_compact(messages, batch=False)
    ask = {"type": "text", "text": SUMMARY_REQUEST.format(focus=f"\nAbove all, preserve: {focus}" if focus else "")}
    last = view[-1]
    if last["role"] == "user":
        content = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
        view = view[:-1] + [{**last, "content": content + [ask]}]
    else:
        view = view + [{"role": "user", "content": [ask]}]
    response = client.messages.create(model=model_id(), system=system or SYSTEM, tools=tools or TOOLS,
                                      messages=view, max_tokens=SUMMARY_MAX_TOKENS, cache_control=CACHE)
    show_usage(response.usage, "summary call tokens")
    summary = "\n".join(b.text for b in response.content or [] if b.type == "text").strip()
    if not summary:
        raise ValueError("the summary came back empty")
    return summary


def auto_compact(messages, client, focus="", attach=None, system=None, tools=None):
    """Save, summarise, replace. On failure the history stays exactly as it was.

    attach() returns text to add after the summary (s07: the task board); the note counts it.
    system and tools are the calling lesson's (default: s06's), so the summary shares its cached prefix.
    """
    import anthropic  # here, not at the top: see harness.py
    before = CONTEXT.estimate(messages)
    CONTEXT.after_compaction = before   # if it fails, wait for more work before trying again
    try:
        path = save_transcript(messages)
    except OSError as exc:  # without its transcript a compaction would lose the details: skip it
        show_note(f"[compaction skipped, history kept: cannot save the transcript in {TRANSCRIPTS}/ ({exc})]")
        return False
    try:
        summary = summarize(messages, client, focus, system, tools)
    except (anthropic.APIError, ValueError) as exc:
        reason = describe_api_error(exc) if isinstance(exc, anthropic.APIError) else str(exc)
        show_note(f"[compaction failed, history kept: {reason} · transcript {path}]")
        return False
    extra = attach() if attach else ""
    messages[:] = [{"role": "user", "content": (
        f"[This conversation was compacted to save context. The full transcript is in {path}.]\n\n"
        f"{summary}\n\nContinue the work from here." + (f"\n\n{extra}" if extra else ""))}]
    CONTEXT.reset()
    CONTEXT.after_compaction = after = estimate_tokens(messages)
    show_note(f"[compacted: {before:,} → {after:,} tokens · transcript {path}]")
    if after > compact_threshold():
        show_note(f"[the summary alone is over COMPACT_THRESHOLD ({after:,} > {compact_threshold():,} tokens): "
                  "no new compaction until the context grows by half that; raise COMPACT_THRESHOLD]")
    return True


# ---------------------------------------------------------------- layer 3

COMPACT_TOOL = {
    "name": "compact",
    "description": "Summarise the conversation so far and continue from the summary, freeing context. "
                   "Use it when the context is long or a phase of work is finished.",
    "input_schema": object_schema({"focus": {"type": "string",
                                             "description": "what the summary must preserve"}}, []),
}


def run_compact(focus=""):
    return "Compacting the conversation after this step."  # the loop does the work, after the results


TOOLS = BASE_TOOLS + [COMPACT_TOOL]
TOOL_HANDLERS = {**BASE_HANDLERS, "compact": run_compact}


def compact_request(content):
    """The focus of a `compact` call in this response, or None if there was none."""
    calls = [b for b in content if b.type == "tool_use" and b.name == "compact"]
    return str(calls[0].input.get("focus", "")) if calls else None


# ---------------------------------------------------------------- the loop

def agent_loop(messages, client):
    """s03's loop plus the three layers, one marked line each."""
    steps = 0
    while steps < MAX_STEPS:
        steps += 1
        if needs_compaction(messages):                                                # layer 2
            auto_compact(messages, client)
        response = show_stream(client.messages.stream(model=model_id(), system=SYSTEM, tools=TOOLS,
                                                      messages=micro_compact(messages),               # layer 1
                                                      max_tokens=MAX_TOKENS, cache_control=CACHE))
        show_usage(response.usage, tools=TOOLS)   # warns once if the endpoint dropped the tools
        messages.append(assistant_turn(response))
        CONTEXT.record(response.usage, messages)
        if response.stop_reason == "pause_turn":  # the server paused a long turn: resume it
            continue
        calls = tool_calls(response)
        if not calls:
            return final_text(response)
        messages.append({"role": "user", "content": run_tool_calls(response, TOOLS, TOOL_HANDLERS)})
        focus = compact_request(response.content)
        if focus is not None:                                                         # layer 3
            auto_compact(messages, client, focus)
    return STEP_LIMIT_TEXT


# ---------------------------------------------------------------- demo and main

def compact_now(messages, client, arg="", compact=auto_compact):
    """/compact [focus] in the REPL."""
    if messages:
        compact(messages, client, arg)
    else:
        show_note("[nothing to compact yet]")


def demo():
    """Each layer in turn: placeholders, an automatic compaction, a manual one."""
    from harness.stand_in_api import reply, text, tool
    os.environ.setdefault("COMPACT_THRESHOLD", "9500")  # low, so layer 2 fires within the demo
    script = [
        reply(text("I'll generate some bulky output."), tool("bash", {"command": "seq -s ' ' 1 7000"})),
        reply(tool("write_file", {"path": "demo/notes.md", "content": "# Notes\n" + "- a finding\n" * 30})),
        reply(tool("read_file", {"path": "demo/notes.md"})),
        reply(tool("bash", {"command": "ls -la demo"})),
        reply(text("My first result is a placeholder now; later calls read the rest from the cache."),
              tool("bash", {"command": "seq -s ' ' 20000 23000"})),
        reply(tool("bash", {"command": "seq -s ' ' 30000 33000"})),
        reply(tool("bash", {"command": "wc -l demo/notes.md"})),
        reply(text("A phase is done; compacting on purpose."), tool("compact", {"focus": "the notes file"})),
        reply(tool("bash", {"command": "wc -c demo/notes.md"})),
        reply(text("Done. I carried on from the summary after each compaction.")),
    ]
    summary = ("Summary: generated bulky output with bash, wrote demo/notes.md (31 lines), "
               "read it back. Next: check the notes file and finish.")
    return script, "produce some bulky output, take notes in demo/notes.md, and keep working", summary


def main(argv=None):
    return run_cli("s06_compact", __doc__, agent_loop, commands={"/compact": compact_now},
                   demo=demo, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
