#!/usr/bin/env python3
"""s06: three layers of context compaction, so the agent can work for as long as the work takes.

A context window is finite; a long task is not. And every call pays again, by the token, for
the whole conversation it sends. So the agent forgets on purpose, in three layers, keeps a
full record on disk so nothing is really lost, and keeps what it sends stable for the cache.

    before every model call:
      layer 1  micro_compact   what the model sees: old tool results become
                               "[Previous: used bash; the whole result is in <file>]"
                               (old big write/edit texts likewise), in batches
                               worth the cache they rewrite. The history keeps all.
      layer 2  auto_compact    what it sees > COMPACT_THRESHOLD, and grown by half a
                               threshold since the last compaction?
                                 1. history -> .transcripts/transcript_<time>_<n>.jsonl
                                 2. the model writes a summary (same prefix: cached)
                                 3. history := [summary + transcript path]
    any time:
      layer 3  `compact` tool or /compact   -> the same as layer 2, now

Prompt caching, the rule layer 1 is built around. A request is read in this order, one
block at a time (a block: a text, a tool call or a tool result in a message):

    tools -> system -> message 1 -> message 2 -> ... -> the last block   <- breakpoint
    |--- as in the last call: read from the cache, 0.1 x ---|-- new: written, 1.25 x --|

A breakpoint asks the API to cache all before it. endpoints.ask sends one with every request
(a top-level cache_control: the API puts it on the last block), so the next call reads all
but its new blocks from the cache. The cache matches byte for byte, and from a breakpoint
looks back at most 20 blocks for a cached start: a batch cleared further back would miss the
cache altogether. So layer 1 adds a second breakpoint, on the last block of the message just
before the latest batch. An entry lives 5 minutes after its last use, and nothing under a
size that depends on the model is cached: 512 to 4,096 tokens, 1,024 for Sonnet 5
(platform.claude.com/docs/en/build-with-claude/prompt-caching, 2026-12). A changed block is
written again, with all that follows it: so layer 1 clears in rare, large batches, and the
summary request is added at the end of the conversation, which is read from the cache.

Key insight: the conversation is working memory, not storage. Summaries keep the thread; the
transcript (and every big result, saved whole) keeps every detail for whoever needs it.

New since s03: the three layers (marked lines in the loop), ContextSize, /compact. The todo
tool is gone: the model sees its list only in old tool results, which a compaction
summarises away (s07 brings the plan back, on disk).
Details: harness/layer1.py and harness/transcripts.py; the API's own: docs/cost.md.

Run it:   python s06_compact.py "run the tests, fix what fails, and run them again"
          COMPACT_THRESHOLD=5000 python s06_compact.py      (a REPL; /compact, /context)
          python s06_compact.py --demo
"""

import functools
import sys

import s03_todo as s03
from harness import api_context, cli, config, demos, endpoints, errors, layer1, tokens, transcripts
from harness.session import views

# Model calls a turn may make: compaction lets it go on longer.
MAX_STEPS = 200
# The newest results stay whole: the model may still be using them.
KEEP_RECENT = 3
# A result this short is never cleared: it costs little.
KEEP_CHARS = 400
# A batch is cleared only if it frees at least CLEAR_AT_LEAST tokens (at most 0.4 x a low
# COMPACT_THRESHOLD, to leave layer 1 room to act), and at least REWRITE_SHARE x what
# clearing it makes the API write to the cache again. Example, in tokens: a batch of 12,000
# with 6,000 after it. Kept, it is read on every call: 0.1 x 12,000 = 1,200 a call. Cleared,
# the 6,000 after it are written once at 1.25 x, not read at 0.1 x: 6,900 once. As 12,000 >=
# 8,000 and >= 1.5 x 6,000, it is cleared, and pays for itself within 6 calls.
CLEAR_AT_LEAST = 8_000
REWRITE_SHARE = 1.5
# Tokens before layer 2 summarises: lower bills less, forgets sooner (docs/cost.md).
DEFAULT_THRESHOLD = 50_000
# A longer summary is cut, and says so.
SUMMARY_MAX_TOKENS = 2000
# --api-context: where the API clears, or summarises.
API_CLEAR_AT = 30_000     # tokens, inputs too
API_COMPACT_AT = 50_000   # tokens: its minimum

SYSTEM = ("You are a coding agent working in the current folder. Use the tools to act. "
          "When the context gets long or a phase of work is done, call compact. Be brief.")


# ---------------------------------------------------------------- measuring the context

# About 4 characters a token.
estimate_tokens = tokens.estimate


class ContextSize:
    """How big the next request is: the API's count for the last call, plus about 4
    characters a token since."""

    def __init__(self) -> None:
        self.threshold = DEFAULT_THRESHOLD  # COMPACT_THRESHOLD, read by start()
        self.prefix = 0                 # the system prompt and tools, set by start()
        self.reported = None            # the last call's input + output, as the API counted
        self.seen = 0                   # how many messages that count covers
        self.after_compaction = 0       # the size right after the last compaction

    def record(self, usage, messages: list) -> None:
        """After the loop appends a reply; usage is its reply.usage, the API's count."""
        self.reported = endpoints.total_tokens(usage) or None
        self.seen = len(messages)

    def estimate(self, view: list) -> int:
        if self.reported is None or self.seen > len(view):
            return self.prefix + estimate_tokens(view)
        return self.reported + estimate_tokens(view[self.seen:])


CONTEXT = ContextSize()


def needs_compaction(view: list) -> bool:
    """Over the threshold, and grown by half of it since the last compaction: else a summary
    over it would be summarised again on every call."""
    size = CONTEXT.estimate(view)
    grown = size - CONTEXT.after_compaction
    return size > CONTEXT.threshold and grown > CONTEXT.threshold // 2


# ---------------------------------------------------------------- layer 1

# What layer 1 has cleared: once cleared, always, with the same placeholder, so each request
# repeats the last one byte for byte, and is read from the cache.
CLEARED = layer1.Cleared()


def micro_compact(messages: list, run, batch: bool = True) -> list:
    """What the model will see: a copy of the history, what layer 1 cleared shown as its
    placeholder. batch=False starts no new batch."""
    if batch:
        clear_new_batch(messages, run)
    # view() also puts the second cache breakpoint just before the latest batch.
    return layer1.view(messages, CLEARED)


def clear_new_batch(messages: list, run) -> None:
    """Clear what the model can do without, if the batch pays for the cache it rewrites."""
    if run.api_context:
        return
    # No longer needed: results older than the newest KEEP_RECENT and over KEEP_CHARS (a
    # read_file's once the file is read again); big write/edit inputs alike; never the newest
    # reply's.
    batch = layer1.no_longer_needed(messages, KEEP_RECENT, KEEP_CHARS, CLEARED)
    # What the API must write again: from the batch's first message on, less the batch.
    sent = layer1.view(messages, CLEARED)
    rewritten = layer1.tokens_after(sent, batch) - batch.tokens
    # No API count yet (resumed, or compacted): a cold cache has nothing to lose.
    if CONTEXT.reported is None:
        rewritten = 0
    at_least = min(CLEAR_AT_LEAST, CONTEXT.threshold * 2 // 5)
    if batch.tokens < at_least or batch.tokens < REWRITE_SHARE * rewritten:
        return
    CLEARED.add(run, batch, messages)
    layer1.announce(run, batch)
    # The API's last count still holds what was just cleared: layer 2 must not count it.
    if CONTEXT.reported is not None:
        CONTEXT.reported -= batch.tokens


# ---------------------------------------------------------------- layer 2

SUMMARY_REQUEST = """<summary-request>
Pause the work and do not call any tool now. Summarise this conversation so the work can continue
from the summary alone. Keep: the user's request; what was done (files, commands, results); the
current state; decisions made and why; open next steps. Be concrete: names, paths, numbers.{focus}
</summary-request>"""


def summarize(messages: list, run, focus: str, system: str, tools: list) -> str:
    """The model's summary, asked at the end of the loop's own view with its system and
    tools: all of it read from the cache."""
    if focus:
        focus = f"\nAbove all, preserve: {focus}"
    view = micro_compact(messages, run, batch=False)
    view = transcripts.ask_at_end(view, SUMMARY_REQUEST.format(focus=focus))
    reply = endpoints.ask(run, system, tools, view, SUMMARY_MAX_TOKENS,
                          label="summary call")
    # reply.said: the model's words, not the harness's notes for the user.
    if not reply.said:
        raise ValueError("the summary came back empty")
    # Cut short: the transcript holds the rest; the model is told.
    if reply.cut:
        return reply.said + "\n[this summary was cut before its end]"
    return reply.said


def auto_compact(messages: list, run, focus: str = "", system: str = SYSTEM,
                 tools: list = None, attach=None) -> bool:
    """Save the history, summarise it, replace it; False if that failed, and the history
    is then as it was. attach(run): text to add after the summary (s07's board). system and
    tools are the loop's, so the summary call is cached."""
    tools = tools or TOOLS
    before = CONTEXT.estimate(micro_compact(messages, run, batch=False))
    counted = CONTEXT.reported          # the part of `before` the API counted
    # On failure, wait for more work before trying again.
    CONTEXT.after_compaction = before
    path = None
    try:
        # Without its transcript, a compaction would lose details for good.
        path = transcripts.save(config.TRANSCRIPTS, messages)
        summary = summarize(messages, run, focus, system, tools)
    except (OSError, ValueError, errors.EndpointError) as exc:
        return transcripts.compaction_failed(exc, config.TRANSCRIPTS, path)
    text = transcripts.summary_message(summary, path)
    if attach:
        text += "\n\n" + attach(run)
    messages[:] = [{"role": "user", "content": text}]
    CLEARED.clear()                    # what layer 1 cleared left with the old history
    CONTEXT.reported = None            # the API has not counted the new history yet
    after = CONTEXT.estimate(messages)
    CONTEXT.after_compaction = after
    transcripts.announce(run, before, after, CONTEXT.threshold, summary, path, counted)
    return True


# ---------------------------------------------------------------- layer 3

COMPACT_TOOL = {
    "name": "compact",
    "description": "Summarise the conversation so far and continue from the summary, "
                   "freeing context. Use it when the context is long or a phase of work "
                   "is finished.",
    "input_schema": s03.schema([], focus={"type": "string",
                                          "description": "what the summary must keep"}),
}


def compact_tool(focus: str = "") -> str:
    # The loop compacts after this step: the tool only says so.
    return "Compaction requested: it runs after this step."


TOOLS = s03.BASE_TOOLS + [COMPACT_TOOL]
# The dispatch table: s03's base tools, and compact.
TOOL_HANDLERS = {
    "bash": s03.run_bash,
    "read_file": s03.run_read,
    "write_file": s03.run_write,
    "edit_file": s03.run_edit,
    "compact": compact_tool,
}

COMPACTION_FAILED = "[the compaction did not happen; the conversation goes on as it was]"


def compact_if_asked(calls: list, messages: list, run, compact=auto_compact) -> None:
    """Compact if a `compact` call asked with a valid input; if it fails, tell the model."""
    for call in calls:
        if call.name == "compact" and not call.problem:
            if not compact(messages, run, str(call.input.get("focus", ""))):
                note = {"type": "text", "text": COMPACTION_FAILED}
                messages[-1]["content"].append(note)
            return


# ---------------------------------------------------------------- the loop

def agent_loop(messages: list, run, max_steps: int = MAX_STEPS) -> str:
    """s03's loop, plus the three layers on their marked lines."""
    steps = 0
    while steps < max_steps:
        steps += 1
        view = micro_compact(messages, run)                              # layer 1
        if needs_compaction(view):                                       # layer 2
            auto_compact(messages, run)                                  # layer 2
            view = micro_compact(messages, run)                          # layer 1
        reply = endpoints.ask(run, SYSTEM, TOOLS, view, s03.MAX_TOKENS)
        messages.append(reply.message)
        run.log.record(messages)              # on disk before its calls run
        CONTEXT.record(reply.usage, messages)                            # layer 2 measures
        if not reply.calls:
            return reply.text
        results = s03.run_tool_calls(run, reply.calls, TOOL_HANDLERS) + reply.notes
        messages.append({"role": "user", "content": results})
        compact_if_asked(reply.calls, messages, run)                     # layer 3
    return cli.step_limit(max_steps)


# ---------------------------------------------------------------- the REPL and main

def repl_commands(system: str, tools: list, compact=auto_compact) -> dict:
    """/compact [focus] (layer 3, typed by a person) and /context, for a lesson's REPL."""
    return {"/compact": functools.partial(views.compact_now, compact),
            "/context": views.context_command(system, tools, micro_compact, CONTEXT)}


def start(run, args, system: str = SYSTEM, tools: list = TOOLS) -> None:
    """When a run starts (after ./.env is read): --api-context, COMPACT_THRESHOLD, and the
    prefix every request starts with."""
    run.api_context = api_context.setting(args, API_CLEAR_AT, API_COMPACT_AT, KEEP_RECENT)
    CONTEXT.threshold = config.positive_int("COMPACT_THRESHOLD", DEFAULT_THRESHOLD, "tokens")
    if run.api_context:
        CONTEXT.threshold = config.context_window()
    CONTEXT.prefix = estimate_tokens([system, tools])
    run.recorder.threshold(CONTEXT.threshold)


def main(argv: list = None) -> int:
    demo = functools.partial(demos.s06_demo, CONTEXT)
    lesson = cli.Lesson("s06_compact", __doc__, agent_loop, demo=demo,
                        commands=repl_commands(SYSTEM, TOOLS), on_start=start,
                        options=[api_context.OPTION])
    return cli.run_cli(lesson, argv)


if __name__ == "__main__":
    sys.exit(main())
