#!/usr/bin/env python3
"""s06: three layers of context compaction, so the agent can work forever.

A context window is finite; a long task is not. The agent forgets on purpose,
in three layers, and keeps a full record on disk so nothing is really lost.

    before every model call:
      layer 1  micro_compact   in what the model sees, old tool results become
                               "[Previous: used bash]" (keeps the last 3, read_file
                               results and short ones; the history keeps them all)
      layer 2  auto_compact    context > COMPACT_THRESHOLD tokens?
                                 1. history -> .transcripts/transcript_<time>.jsonl
                                 2. model (no tools) writes a summary
                                 3. history := [summary + transcript path]
    any time:
      layer 3  `compact` tool or /compact   -> the same as layer 2, now

    [u: task] [a: tool_use] [u: result] ... [u: result]  ~60,000 tokens
                            |  auto_compact
                            v
    [u: "compacted; transcript at ...; summary: ...; continue"]  ~1,000 tokens

Key insight: the conversation is working memory, not storage. Summaries keep
the thread; the transcript on disk keeps every detail for whoever needs it.

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

from harness import SetupError, describe_api_error, model_id, run_cli, show_note, show_usage, usage_counts
from s03_todo import (BASE_HANDLERS, BASE_TOOLS, CACHE, MAX_STEPS, MAX_TOKENS, STEP_LIMIT_TEXT, assistant_turn,
                      final_text, object_schema, run_tool_calls, tool_calls)

KEEP_RECENT = 3                 # the newest tool results the model may still be reasoning about
KEEP_TOOLS = {"read_file"}      # file contents are reference material: clearing them means re-reading
KEEP_CHARS = 100                # a result this short costs about what its placeholder would
DEFAULT_THRESHOLD = 50_000      # tokens; well below the window, leaving room for the summary call
SUMMARY_MAX_TOKENS = 2000       # a summary longer than this is no longer a summary
SUMMARY_INPUT_CHARS = 200_000   # the transcript tail the summary call reads (about 50k tokens)
TRANSCRIPTS = Path(".transcripts")

SYSTEM = ("You are a coding agent working in the current folder. Use the tools to act. "
          "When the context gets long or a phase of work is done, call compact. Be brief.")


# ---------------------------------------------------------------- layer 1

def micro_compact(messages):
    """The history as the model will see it: old tool results become placeholders.

    It returns a copy; the history itself keeps every result, so the transcript
    saved by layer 2 is complete. Ids and tool_use/tool_result pairs are kept.
    """
    names = {b["id"]: b["name"] for m in messages if m["role"] == "assistant"
             for b in m["content"] if b.get("type") == "tool_use"}
    ids = [b["tool_use_id"] for m in messages if m["role"] == "user" and isinstance(m["content"], list)
           for b in m["content"] if b.get("type") == "tool_result"]
    old = set(ids[:max(len(ids) - KEEP_RECENT, 0)])
    view = []
    for m in messages:
        if m["role"] == "user" and isinstance(m["content"], list):
            m = {**m, "content": [_placeholder(b, names) if b.get("tool_use_id") in old else b
                                  for b in m["content"]]}
        view.append(m)
    return view


_SHOWN = set()  # results already announced: the view is rebuilt every call, the note is shown once


def _placeholder(block, names):
    name = names.get(block["tool_use_id"], "a tool")
    if name in KEEP_TOOLS or len(str(block["content"])) <= KEEP_CHARS:
        return block
    if block["tool_use_id"] not in _SHOWN:  # tell the user once per result
        _SHOWN.add(block["tool_use_id"])
        show_note(f"  [micro_compact: an old {name} result is now a placeholder]")
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


SUMMARY_PROMPT = """Summarise this agent conversation so the work can continue from the summary alone.
Keep: the user's request; what was done (files, commands, results); the current state;
decisions made and why; open next steps. Be concrete: names, paths, numbers.{focus}

<transcript>
{transcript}
</transcript>"""


def summarize(messages, client, focus=""):
    transcript = json.dumps(messages, ensure_ascii=False)
    if len(transcript) > SUMMARY_INPUT_CHARS:
        transcript = "[...earlier part omitted...]" + transcript[-SUMMARY_INPUT_CHARS:]
    focus = f"\nAbove all, preserve: {focus}" if focus else ""
    response = client.messages.create(model=model_id(), max_tokens=SUMMARY_MAX_TOKENS, messages=[
        {"role": "user", "content": SUMMARY_PROMPT.format(focus=focus, transcript=transcript)}])
    show_usage(response.usage, "summary call tokens")
    summary = "\n".join(b.text for b in response.content if b.type == "text").strip()
    if not summary:
        raise ValueError("the summary came back empty")
    return summary


def auto_compact(messages, client, focus="", attach=None):
    """Save, summarise, replace. On failure the history stays exactly as it was.

    attach() returns text to add after the summary (s07: the task board); the note counts it.
    """
    import anthropic  # here, not at the top: see harness.py
    before = CONTEXT.estimate(messages)
    try:
        path = save_transcript(messages)
    except OSError as exc:  # without its transcript a compaction would lose the details: skip it
        show_note(f"[compaction skipped, history kept: cannot save the transcript in {TRANSCRIPTS}/ ({exc})]")
        return False
    try:
        summary = summarize(messages, client, focus)
    except (anthropic.APIError, ValueError) as exc:
        reason = describe_api_error(exc) if isinstance(exc, anthropic.APIError) else str(exc)
        show_note(f"[compaction failed, history kept: {reason} · transcript {path}]")
        return False
    extra = attach() if attach else ""
    messages[:] = [{"role": "user", "content": (
        f"[This conversation was compacted to save context. The full transcript is in {path}.]\n\n"
        f"{summary}\n\nContinue the work from here." + (f"\n\n{extra}" if extra else ""))}]
    CONTEXT.reset()
    show_note(f"[compacted: {before:,} → {estimate_tokens(messages):,} tokens · transcript {path}]")
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
        if CONTEXT.estimate(messages) > compact_threshold():                          # layer 2
            auto_compact(messages, client)
        response = client.messages.create(model=model_id(), system=SYSTEM, messages=micro_compact(messages),
                                          tools=TOOLS, max_tokens=MAX_TOKENS, cache_control=CACHE)  # layer 1
        show_usage(response.usage)
        messages.append(assistant_turn(response))
        CONTEXT.record(response.usage, messages)
        if response.stop_reason == "pause_turn":  # the server paused a long turn: resume it
            continue
        calls = tool_calls(response)
        if not calls:
            return final_text(response)
        messages.append({"role": "user", "content": run_tool_calls(response.content, TOOLS, TOOL_HANDLERS)})
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
    from stand_in_api import reply, text, tool
    os.environ.setdefault("COMPACT_THRESHOLD", "1500")  # low, so layer 2 fires within the demo
    script = [
        reply(text("I'll generate some bulky output."), tool("bash", {"command": "seq -s ' ' 1 150"})),
        reply(tool("write_file", {"path": "demo/notes.md", "content": "# Notes\n" + "- a finding\n" * 30})),
        reply(tool("read_file", {"path": "demo/notes.md"})),
        reply(tool("bash", {"command": "seq -s ' ' 1000 1100"})),
        reply(tool("bash", {"command": "ls -la demo"})),
        reply(text("The first results are placeholders now; the context keeps growing."),
              tool("bash", {"command": "seq -s ' ' 5000 5600"})),
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
