#!/usr/bin/env python3
"""s06: three layers of context compaction, so the agent can work for as long as the work takes.

A context window is finite; a long task is not. And every call pays again, by the token, for
the whole conversation it sends. So the agent forgets on purpose, in three layers. Layer 1
leaves the history (messages) whole: each call sends the model a view of it, in which old blocks
may be short placeholders. A block: a text, a tool call or a tool result in a message.

    before every model call:
      layer 1  micro_compact   in the view, old long tool results (and write/edit texts)
                               become placeholders ("[Previous: used bash; the whole result
                               is in <file>]"), in batches that pay for the cache they rewrite
      layer 2  auto_compact    when the view is over CONTEXT.threshold (COMPACT_THRESHOLD)
                               tokens, and grew by half of it since the last compaction:
                                 1. history -> .transcripts/transcript_<time>_<n>.jsonl
                                 2. the model writes a summary (same prefix: partly cached)
                                 3. history := one message: transcript path + summary
    any time:
      layer 3  `compact` tool or /compact   -> as layer 2: /compact at once, the tool after
                                               the other calls of its reply (the turn goes on)

Layer 1 is built around prompt caching. The API reads a request in this order, and caches it up
to each breakpoint; a later request reads such a prefix back if it ends within 20 blocks before
one of its own breakpoints. s03's request has one on its last block (top-level cache_control);
view_of adds one just before the latest batch layer 1 cleared.

    tools -> system -> message 1 -> message 2 -> ... -> the last block   <- breakpoint
    |--- as in the last call: read from the cache, 0.1 x ---|-- new: written, 1.25 x --|

The part that is byte for byte as in the last request is cheap. From the first block that
changed, everything is written to the cache again, at more than the full price. So layer 1
changes old blocks rarely, many at once, and the summary request goes at the end. (An entry
lives 5 minutes; a small request is not cached at all: docs/cost.md has the sizes.)

Key insight: the conversation is working memory, not storage. Summaries keep the thread; the
transcript (and every big result, saved whole) keeps every detail for whoever needs it.

New since s03: the history and its view (the loop sends micro_compact's copy), the three
layers (marked lines in the loop), ContextSize, /compact. The todo tool is gone: the model would
see its list only in old tool results, which a compaction summarises away (s07 brings the plan
back, on disk). --api-context clear|compact hands layers 1 and 2 to the API (start() sets it
up; api_context.py): past 30,000 input tokens the server clears old tool results and inputs but
the newest KEEP_RECENT, with no batch rule, or past 50,000 it summarises. Layer 1 then clears
nothing, layer 2 only guards the window, and layer 3 stays.

Run it:   python s06_compact.py "run the tests, fix what fails, and run them again"
          COMPACT_THRESHOLD=5000 python s06_compact.py      (a REPL; /compact, /context)
          python s06_compact.py --demo   (no key; each layer in turn)
          COMPACT_THRESHOLD=4000 python s06_compact.py --demo   (layer 2 acts before layer 1 can)
"""

import functools
import sys

import s03_todo as s03
from harness import compaction, config, errors, model_call, pairing, step_limit, tokens, tool_input

MAX_STEPS = 200      # model calls a turn may make: compaction lets it go on longer
KEEP_RECENT = 3      # the 3 newest tool calls, and every call of the newest reply, stay whole
KEEP_CHARS = 400     # a result or a call's text this short is never cleared: it costs little
# The batch rule, with an example in clear_new_batch: a batch frees at least CLEAR_AT_LEAST
# tokens (or 0.4 x a low threshold, so that layer 1 can act before layer 2 summarises), and
# REWRITE_SHARE x what the API must rewrite.
CLEAR_AT_LEAST = 8_000   # tokens: a smaller batch breaks the cache for little
REWRITE_SHARE = 1.5      # at this limit, a rewrite (1.25 - 0.1 = 1.15 x) pays back in 8 calls
# Tokens before layer 2 summarises: lower bills less, forgets sooner (docs/cost.md).
DEFAULT_THRESHOLD = 50_000
# The keyless demo's: low, so that layer 2 compacts within ten calls (COMPACT_THRESHOLD wins).
DEMO_THRESHOLD = 9_500
SUMMARY_MAX_TOKENS = 2000   # tokens: a longer summary is cut, and says so

SYSTEM = ("You are a coding agent working in the current folder. Use the tools to act. "
          "When the context gets long or a phase of work is done, call compact. Be brief.")


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
        response = s03.ask_model(run, SYSTEM, TOOLS, view)
        messages.append({"role": "assistant", "content": response.content})
        run.log.record(messages)              # on disk before its calls run
        CONTEXT.record(response.usage, messages)                         # layer 2 measures
        if response.stop_reason != "tool_use":
            return response.answer
        results = s03.run_tool_calls(run, response, TOOL_HANDLERS, TOOLS)
        messages.append({"role": "user", "content": results})
        compact_if_asked(response, messages, run)                        # layer 3
    return step_limit.reached(max_steps)


# ---------------------------------------------------------------- measuring the context

class ContextSize:
    """How big the next request is: the API's count for the last call, plus about 4 characters
    of JSON a token for the messages since. Say the last call was counted at 9,000 tokens (input,
    cache read and written, output), and the messages since are 1,200 characters: about 9,300."""

    def __init__(self) -> None:
        self.threshold = DEFAULT_THRESHOLD  # COMPACT_THRESHOLD, read by start()
        self.prefix = 0                 # the system prompt and tools, set by start()
        self.reported = None            # the API's count for the last call, as said above
        self.seen = 0                   # how many messages that count covers (reply too)
        self.after_compaction = 0       # the size right after the last compaction

    def record(self, usage, messages: list) -> None:
        """After a reply: usage counts the view sent and the reply, the messages up to now."""
        self.reported = model_call.total_tokens(usage) or None
        self.seen = len(messages)

    def estimate(self, view: list) -> int:
        # No count yet, or one of a longer history (a failed turn undone, /clear): estimate all.
        if self.reported is None or self.seen > len(view):
            return self.prefix + tokens.estimate(view)
        return self.reported + tokens.estimate(view[self.seen:])


CONTEXT = ContextSize()


def needs_compaction(view: list, cleared: int = 0) -> bool:
    """Over the threshold, and grown by half of it since the last compaction: else a summary
    over it would be summarised again on every call. cleared: tokens layer 1 would clear."""
    size = CONTEXT.estimate(view) - cleared
    grown = size - CONTEXT.after_compaction
    return size > CONTEXT.threshold and grown > CONTEXT.threshold // 2


# ---------------------------------------------------------------- layer 1

def micro_compact(messages: list, run, clear: bool = True) -> list:
    """Layer 1, in two steps: clear a new batch if it pays, then return what the model sees.
    clear=False only looks (the summary request, layer 2's measures); /context runs both
    steps, as the next call would. With --api-context the API clears or summarises instead."""
    if clear and run.api_context is None:
        clear_new_batch(messages, run)
    return view_of(messages)


class Cleared:
    """What layer 1 has cleared, and what the model sees instead: view_of swaps each block
    named here for its placeholder, in a copy. Once cleared, always, with the same text: between
    batches, every request repeats the last one byte for byte, and is read from the cache."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget every placeholder: a compaction starts a new history."""
        self.placeholders = {}     # id() of a cleared block -> (the block, its placeholder)
        self.batch_start = None    # the latest batch's earliest block (a dict), or None

    def holds(self, block) -> bool:
        # Keyed by id(block), not tool_use_id, which a call shares with its result: either may
        # be cleared alone. The entry keeps the block alive, so no other block gets its id().
        return id(block) in self.placeholders

    def as_sent(self, block):
        """The block as the model is sent it: its placeholder, if it was cleared."""
        if self.holds(block):
            return self.placeholders[id(block)][1]
        return block


CLEARED = Cleared()


def view_of(messages: list) -> list:
    """What the model sees: a copy of the history, each cleared block as its placeholder."""
    view = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            message = {**message, "content": [CLEARED.as_sent(block) for block in content]}
        view.append(message)
    # A second cache breakpoint (in a copy; none before the first batch), just before the reply
    # holding the latest batch's first call, where an earlier request ended: the clearing request
    # and later ones read all before it from the cache, even past the 20-block lookback.
    return compaction.breakpoint_before(view, CLEARED.batch_start)


def clear_new_batch(messages: list, run) -> None:
    """Clear what the model can do without, if the batch pays for the cache it rewrites."""
    batch = clearable(messages)
    freed = sum(tokens_freed(block, call) for block, call in batch)
    # What the API must write again, at least: from the reply holding the batch's earliest
    # call (where an earlier request's cache ends) to the end of the view, less the batch.
    view_now = view_of(messages)
    rewritten = compaction.tokens_from_first_call(view_now, batch) - freed
    # No API count yet (resumed, or compacted): a cold cache has nothing to lose.
    if CONTEXT.reported is None:
        rewritten = 0
    # Say the batch frees 12,000 tokens, and 6,000 tokens not in it follow its first block.
    # Kept, the batch is read on every call: 0.1 x 12,000 = 1,200 a call. Cleared, the 6,000
    # are written once at 1.25 x, not read at 0.1 x: 6,000 x (1.25 - 0.1) = 6,900, once. As
    # 12,000 >= 8,000 and >= 1.5 x 6,000, it is cleared, and pays for itself within 6 calls.
    big_enough = freed >= min(CLEAR_AT_LEAST, 0.4 * CONTEXT.threshold)
    pays_for_itself = freed >= REWRITE_SHARE * rewritten
    # Not if layer 2 summarises even so: its summary should see these results whole.
    if not batch or not big_enough or not pays_for_itself or needs_compaction(view_now, freed):
        return
    for block, call in batch:
        CLEARED.placeholders[id(block)] = (block, placeholder(block, call, run))
    CLEARED.batch_start = compaction.first_of(messages, batch)
    compaction.announce_cleared(run, len(batch), freed)
    # The API's last count still holds what was just cleared: layer 2 must not count it.
    if CONTEXT.reported is not None:
        CONTEXT.reported -= freed


def clearable(messages: list) -> list:
    """Layer 1's choice of what the model can do without, as (block, its call). A tool
    result, or a write_file or edit_file call's own texts, is cleared when all hold:
      1. it is old: not of the newest KEEP_RECENT calls, nor of the newest reply;
      2. it is over KEEP_CHARS characters, and not cleared yet;
      3. a read_file's result or a write_file's content that worked, the model's copy of a
         file, stays until a later call that worked shows the file whole (read all, or written)."""
    pairs = pairing.tool_pairs(messages)   # the history's own (tool_use, tool_result), oldest first
    newest = pairing.newest_ids(messages)          # the last reply's calls: results unseen yet
    whole_later = set()                            # files a later call shows whole
    batch = []
    # Newest first: whole_later then holds the later views before an older one is judged.
    for n in range(len(pairs) - 1, -1, -1):
        call, result = pairs[n]
        old = n < len(pairs) - KEEP_RECENT and call["id"] not in newest
        # A read of a file, or a write of it that worked, stays until a later call shows the
        # whole file: it may be the model's only view of it, and the model may edit it next.
        may_go = (call["name"] not in ("read_file", "write_file")
                  or compaction.path_of(call) in whole_later or bool(result.get("is_error")))
        result_size = len(str(result.get("content")))
        if old and may_go and result_size > KEEP_CHARS and not CLEARED.holds(result):
            batch.append((result, call))           # the result
        # input_texts: write_file's content, edit_file's old_text and new_text; {} otherwise.
        input_size = sum(map(len, compaction.input_texts(call).values()))
        if old and may_go and input_size > KEEP_CHARS and not CLEARED.holds(call):
            batch.append((call, call))             # the call's own long texts
        # Whole: a read_file from line 1 with no limit, not cut short, or a write_file; no error.
        whole_later |= compaction.shows_whole_file(call, result)
    return batch


def placeholder(block: dict, call: dict, run) -> dict:
    """What the model sees instead of a cleared block, one of four kinds:
        a result                 "[Previous: used bash; the whole result is in <file>]"
        a result under 2,000 ch. "[Previous: used bash]" (not saved: cheaper to run again;
                                 so too if it cannot be saved)
        a read that worked       "[Previous: read a.py; a later read or write of it follows]"
        a write or edit's text   "[cleared from the context: 5,120 characters; ...]"
    """
    name = call["name"]
    if block["type"] == "tool_use":                # the call's own texts, not a result
        return cleared_input(call)
    # A read that worked: a later call shows the file. (A failed one is any other result.)
    if name == "read_file" and not block.get("is_error"):
        text = f"[Previous: read {compaction.path_of(call)}; a later read or write of it follows]"
        return {**block, "content": text}
    # The result's file: s03's, if over its OUTPUT_CAP; a new one from 2,000 characters; or None.
    path = compaction.save_whole(block, name, run)
    if path is None:
        return {**block, "content": f"[Previous: used {name}]"}
    return {**block, "content": f"[Previous: used {name}; the whole result is in {path}]"}


def cleared_input(call: dict) -> dict:
    """A write or edit call, its texts (content; old_text, new_text) replaced by a note of their
    length: it cannot pass for a file's contents, and is true whether the call worked or not."""
    texts = compaction.input_texts(call)
    said = {}
    for field, text in texts.items():
        said[field] = (f"[cleared from the context: {len(text):,} characters; read_file shows "
                       "the file as it is now]")
    return {**call, "input": {**call["input"], **said}}


def tokens_freed(block: dict, call: dict) -> int:
    """About what clearing a block frees: a result's text, or what a call's texts lose."""
    if block["type"] == "tool_use":
        return tokens.estimate(call["input"]) - tokens.estimate(cleared_input(call)["input"])
    return tokens.estimate(block.get("content"))


# ---------------------------------------------------------------- layer 2

SUMMARY_REQUEST = """<summary-request>
Pause the work and do not call any tool now. Summarise this conversation so the work can continue
from the summary alone. Keep: the user's request; what was done (files, commands, results); the
current state; decisions made and why; open next steps. Be concrete: names, paths, numbers.{focus}
</summary-request>"""


def summarize(messages: list, run, focus: str, system: str, tools: list) -> str:
    """The model's summary, asked at the end of the loop's own view with its system and
    tools: all but the newest part read from the cache (unless the oldest turns must go)."""
    if focus:
        focus = f"\nAbove all, preserve: {focus}"
    view = micro_compact(messages, run, clear=False)
    # What does not fit in the model's window is left to the transcript: the oldest whole
    # turns go first, and a call never goes without its result.
    room = config.context_window() - SUMMARY_MAX_TOKENS - CONTEXT.prefix
    view = compaction.fit_for_summary(view, room)
    view = ask_at_end(view, SUMMARY_REQUEST.format(focus=focus))
    # The loop's own tools, though none is run (a reply of calls alone fails the compaction):
    # other tools would change the prefix, and the cache would be rewritten.
    with run.recorder.labelled("summary call"):
        response = s03.ask_model(run, system, tools, view, SUMMARY_MAX_TOKENS)
    # The model's words (.said), or ValueError: none, a refusal, or not shorter than the view.
    summary = compaction.summary_of(response, view)
    # Cut short: the transcript holds the rest; the model is told.
    if response.cut:
        return summary + "\n[this summary was cut before its end]"
    return summary


def ask_at_end(view: list, text: str) -> list:
    """The view with the text as the last block of its last user message (after an assistant
    one, a new message), so that all before it is as in the loop's last call: cached."""
    ask = {"type": "text", "text": text}
    last = view[-1]
    if last["role"] != "user":
        return view + [{"role": "user", "content": [ask]}]
    content = last["content"]
    # A message sent as a plain string becomes a text block, so that the ask can follow it.
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    return view[:-1] + [{**last, "content": content + [ask]}]


def auto_compact(messages: list, run, focus: str = "", system: str = SYSTEM,
                 tools: list = None, attach=None) -> bool:
    """Save the history, summarise it, replace it; False if that failed, and the history is
    then as it was. attach(run): text to add after the summary (s07's board). system and
    tools are the loop's, so the summary call is read from the cache."""
    tools = tools or TOOLS
    before = CONTEXT.estimate(micro_compact(messages, run, clear=False))
    counted = CONTEXT.reported          # the part of `before` the API counted
    # Set first, so that a failed attempt also waits until the view grows by threshold/2.
    CONTEXT.after_compaction = before
    path = None
    try:
        # Without its transcript, a compaction would lose details for good.
        path = compaction.save_transcript(messages)
        summary = summarize(messages, run, focus, system, tools)
    except (OSError, ValueError, errors.EndpointError) as exc:
        return compaction.failed(exc, path)
    # The new history, one message: "[This conversation was compacted to save context. The
    # full transcript is in <path>.]", the summary, and "Continue the work from here."
    text = (f"{compaction.SUMMARY_OPENING} The full transcript is in {path}.]\n\n"
            f"{summary}\n\nContinue the work from here.")
    if attach:
        text += "\n\n" + attach(run)
    messages[:] = [{"role": "user", "content": text}]
    CLEARED.reset()                    # what layer 1 cleared left with the old history
    CONTEXT.reported = None            # the API has not counted the new history yet
    CONTEXT.after_compaction = CONTEXT.estimate(messages)
    compaction.announce(run, before, CONTEXT.after_compaction, CONTEXT.threshold, summary,
                        path, counted)
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


def compact_tool(focus: str = "") -> str:   # compact_if_asked reads focus, after the step
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


def compact_if_asked(response, messages: list, run, compact=auto_compact) -> None:
    """Compact if a `compact` call asked, and its result was no error (a bad input is told to
    the model instead); if the compaction fails, tell the model."""
    results = messages[-1]["content"]
    for call in response.tool_uses:
        answered = [r for r in results if r.get("tool_use_id") == call["id"]]
        if call["name"] == "compact" and answered and not answered[0].get("is_error"):
            # The input as a dict (call_tool checked it; some endpoints send it as JSON text).
            focus = tool_input.checked(call["input"], "compact", TOOLS).get("focus", "")
            if not compact(messages, run, focus):
                messages[-1]["content"].append({"type": "text", "text": COMPACTION_FAILED})
            return


def start(run, args, system: str = SYSTEM, tools: list = TOOLS, attach=None) -> None:
    """When a run starts (after ./.env is read): --api-context, COMPACT_THRESHOLD, and the
    prefix every request starts with. attach: as auto_compact's, after the API's summary."""
    run.use_api_context(args.api_context, KEEP_RECENT, attach)
    default = DEMO_THRESHOLD if args.demo else DEFAULT_THRESHOLD
    CONTEXT.threshold = config.positive_int("COMPACT_THRESHOLD", default, "tokens")
    CONTEXT.prefix = tokens.estimate([system, tools])
    # Lowered to the window less room for a reply and a summary (a local model's may be small),
    # raised to 1,000 beyond the prefix, or the run refused. --api-context: that guard.
    CONTEXT.threshold = compaction.fit_to_window(CONTEXT.threshold, CONTEXT.prefix,
                                                 s03.MAX_TOKENS, run.api_context)
    run.recorder.threshold(CONTEXT.threshold)


def repl_commands(compact=auto_compact) -> dict:
    """/compact [focus]: layer 3, typed by a person."""
    return {"/compact": functools.partial(compaction.compact_now, compact)}


def main(argv: list = None) -> int:
    # As in s03: the command line loads only when the lesson runs.
    from harness import cli
    lesson = cli.Lesson("s06_compact", __doc__, agent_loop, system=SYSTEM, tools=TOOLS,
                        commands=repl_commands(), on_start=start,
                        options=[compaction.API_CONTEXT_FLAG],
                        context_view=micro_compact, context_size=CONTEXT, demo_args=(CONTEXT,))
    return cli.run_cli(lesson, argv)


if __name__ == "__main__":
    sys.exit(main())
