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

Prompt caching, the rule layer 1 is built around. The API caches the request's prefix, in
this order, up to a breakpoint (endpoints.ask puts one on the last block):

    tools -> system -> message 1 -> message 2 -> ... -> last block   <- breakpoint
    |------- read from the cache: 0.1 x price --------|-- new: written, 1.25 x --|

It matches byte for byte, looks back at most 20 blocks from a breakpoint (so layer 1 puts a
second one just before each batch it clears), lives 5 minutes, and silently
caches nothing below a minimum that depends on the model: 512 to 4,096 tokens, 1,024 for
Sonnet 5 (platform.claude.com/docs/en/build-with-claude/prompt-caching, 2026-12).
Rewriting an early part throws the cache away from there on: so placeholders come in rare,
large batches, and the summary call repeats the conversation's prefix.

Key insight: the conversation is working memory, not storage. Summaries keep the thread; the
transcript (and every big result, saved whole) keeps every detail for whoever needs it.

New since s03: the three layers (marked lines in the loop), ContextSize, /compact. The todo
tool is gone: an in-memory plan does not survive a compaction (s07 brings it back, on disk).
Placeholders, and what a batch frees and rewrites: harness/layer1.py; transcripts:
harness/transcripts.py.

Run it:   python s06_compact.py "run the tests, fix what fails, and run them again"
          COMPACT_THRESHOLD=5000 python s06_compact.py      (a REPL; /compact, /context)
          python s06_compact.py --demo
"""

import functools
import sys
from pathlib import Path

import s03_todo as s03
from harness import cli, config, demos, endpoints, errors, layer1, tokens, transcripts
from harness.session import views

MAX_STEPS = 200            # model calls a turn may make: compaction lets it go on
KEEP_RECENT = 3            # the newest results stay whole: the model may still use them
KEEP_CHARS = 400           # a result this short costs little: it stays
CLEAR_AT_LEAST = 8_000     # tokens a batch must free (at most 0.4 x the threshold)
REWRITE_SHARE = 1.5        # and 1.5 x what it makes the API write again: then the saving
                           # pays the one rewrite back within a few calls (bench_tokens.py)
DEFAULT_THRESHOLD = 50_000  # tokens; far below the window: room for the summary call
SUMMARY_MAX_TOKENS = 2000  # a summary longer than this is cut, and says so
TRANSCRIPTS = Path(".transcripts")

SYSTEM = ("You are a coding agent working in the current folder. Use the tools to act. "
          "When the context gets long or a phase of work is done, call compact. Be brief.")


# ---------------------------------------------------------------- layer 1

CLEARED = layer1.Cleared()   # what layer 1 has cleared: once cleared, always (the cache)


def micro_compact(messages: list, run, batch: bool = True) -> list:
    """What the model will see: the history with everything layer 1 cleared shown as its
    placeholder. A copy: the history keeps all. batch=False starts no new batch."""
    if batch:
        clear_new_batch(messages, run)
    return layer1.view(messages, CLEARED)


def clear_new_batch(messages: list, run) -> None:
    """Clear what the model can do without, if the batch pays for the cache it rewrites."""
    # Not needed any more: results older than the newest KEEP_RECENT and over KEEP_CHARS
    # (a read_file result only once a later whole read or write of that file follows); big
    # write/edit inputs by the same rules. The newest turn stays: the model has not seen it.
    batch = layer1.no_longer_needed(messages, KEEP_RECENT, KEEP_CHARS, CLEARED)
    # Clearing rewrites the request from the batch's first block on: the cache is read up to
    # there, and all after it, as sent now, is written to the cache again (1.25 x). A cold
    # cache (a resumed session, or just after a compaction) has nothing to lose.
    sent = layer1.view(messages, CLEARED)
    rewritten = layer1.tokens_after(sent, batch) - batch.tokens
    if CONTEXT.reported is None:
        rewritten = 0
    at_least = min(CLEAR_AT_LEAST, CONTEXT.threshold * 2 // 5)
    if batch.tokens < at_least or batch.tokens < REWRITE_SHARE * rewritten:
        return
    CLEARED.add(run, batch, messages)
    layer1.announce(run, batch)
    # The API's last count still holds what was just cleared: layer 2 must not see it.
    if CONTEXT.reported is not None:
        CONTEXT.reported -= batch.tokens


# ---------------------------------------------------------------- measuring the context

# About 4 characters a token: the harness's one estimate, the one /context and the page use.
estimate_tokens = tokens.estimate


class ContextSize:
    """How big the next request is: the API's count for the last call (tools, system and
    every message, by the real tokenizer), plus about 4 characters a token since."""

    def __init__(self) -> None:
        self.threshold = DEFAULT_THRESHOLD  # COMPACT_THRESHOLD, read by start()
        self.prefix = 0                 # the system prompt and tools, set by start()
        self.reported = None            # the last call's input + output, as the API counted
        self.seen = 0                   # how many messages that count covers
        self.after_compaction = 0       # the size right after the last compaction

    def record(self, usage, messages: list) -> None:
        """After the loop appends the reply that `usage` describes."""
        self.reported = endpoints.total_tokens(usage) or None
        self.seen = len(messages)

    def estimate(self, view: list) -> int:
        if self.reported is None or self.seen > len(view):
            return self.prefix + estimate_tokens(view)
        return self.reported + estimate_tokens(view[self.seen:])


CONTEXT = ContextSize()


def needs_compaction(view: list) -> bool:
    """Over the threshold, and grown by half a threshold since the last compaction: else a
    summary that is itself over the threshold would be summarised again on every call."""
    size = CONTEXT.estimate(view)
    grown = size - CONTEXT.after_compaction
    return size > CONTEXT.threshold and grown > CONTEXT.threshold // 2


# ---------------------------------------------------------------- layer 2

SUMMARY_REQUEST = """<summary-request>
Pause the work and do not call any tool now. Summarise this conversation so the work can continue
from the summary alone. Keep: the user's request; what was done (files, commands, results); the
current state; decisions made and why; open next steps. Be concrete: names, paths, numbers.{focus}
</summary-request>"""


def summarize(messages: list, run, focus: str, system: str, tools: list) -> str:
    """The model's summary. The request goes at the end of the loop's own view, with the
    loop's system and tools: the API reads all of that from the cache."""
    if focus:
        focus = f"\nAbove all, preserve: {focus}"
    view = micro_compact(messages, run, batch=False)
    view = transcripts.ask_at_end(view, SUMMARY_REQUEST.format(focus=focus))
    reply = endpoints.ask(run, system, tools, view, SUMMARY_MAX_TOKENS,
                          label="summary call")
    if not reply.said:
        raise ValueError("the summary came back empty")
    if reply.stop_reason == "max_tokens":    # the transcript holds what it did not say
        return reply.said + "\n[this summary was cut at SUMMARY_MAX_TOKENS]"
    return reply.said


def auto_compact(messages: list, run, focus: str = "", system: str = SYSTEM,
                 tools: list = None, attach=None) -> bool:
    """Save the history, summarise it, replace it; False if that failed, and then the
    history is exactly as it was. attach() gives text to add after the summary (s07: the
    board); system and tools are the loop's, so that the summary call is cached."""
    tools = tools or TOOLS
    before = CONTEXT.estimate(micro_compact(messages, run, batch=False))
    counted = CONTEXT.reported          # the part of `before` the API counted, if any
    # If it fails, wait for more work before trying again.
    CONTEXT.after_compaction = before
    path = None
    try:
        # Without its transcript, a compaction would lose details for good.
        path = transcripts.save(TRANSCRIPTS, messages)
        summary = summarize(messages, run, focus, system, tools)
    except (OSError, ValueError, errors.EndpointError) as exc:
        return transcripts.compaction_failed(exc, TRANSCRIPTS, path)
    text = transcripts.summary_message(summary, path)
    if attach:
        text += "\n\n" + attach()
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
    # The loop compacts once the results are in the history: the tool only says so.
    return "Compaction requested: it runs after this step."


TOOLS = s03.BASE_TOOLS + [COMPACT_TOOL]
TOOL_HANDLERS = {**s03.BASE_HANDLERS, "compact": compact_tool}

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
    for _ in range(max_steps):
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
    """When a run starts (after ./.env is read): COMPACT_THRESHOLD, and what every request
    starts with (the system prompt and the tools)."""
    CONTEXT.threshold = config.positive_int("COMPACT_THRESHOLD", DEFAULT_THRESHOLD, "tokens")
    CONTEXT.prefix = estimate_tokens([system, tools])
    run.recorder.threshold(CONTEXT.threshold)      # the session page draws it


def main(argv: list = None) -> int:
    demo = functools.partial(demos.s06_demo, CONTEXT)
    lesson = cli.Lesson("s06_compact", __doc__, agent_loop, demo=demo,
                        commands=repl_commands(SYSTEM, TOOLS), on_start=start)
    return cli.run_cli(lesson, argv)


if __name__ == "__main__":
    sys.exit(main())
