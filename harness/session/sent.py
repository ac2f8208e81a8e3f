"""The session page's "what the model saw": each call's request as it was sent, after layer 1.

Relied on by page.py, reading the requests recorder.py keeps. One collapsed section a call, its
request in order: blocks new since the previous request (cut to a head and a tail), layer 1's
placeholders, the summary and s07's board after a compaction, and each run of unchanged
blocks as one line linking to the call that sent them before. Without each piece:
- the diff against the previous request: a 200-call session showed every request whole, a
  page hundreds of megabytes long; new blocks only would hide what layer 1 cleared.
- SECTION_BYTES: a session of thousands of calls would still make a page too big to open.
- markup.text(): a model's or a tool's text would become markup in the page.
"""

import re
from typing import Optional

from harness import compaction, excerpt
from harness.session.markup import n, text
from harness.session.recorder import MAX_REQUESTS, ModelCall, SentBlock, SessionRecord
from harness.terminal import plural

SECTION_BYTES = 2_000_000    # of the page (about 5 MB in all) for the requests; then one line
SUMMARY_PROBE = 200          # characters of a compaction's summary looked for in a sent text


def section(record: SessionRecord) -> str:
    """<h2> and one <details> per call that recorded its request; "" when none did."""
    calls = [c for c in record.calls if c.request is not None]
    if not calls:
        return ""
    probes = [c.summary[:SUMMARY_PROBE] for c in record.compactions if c.summary.strip()]
    parts = ['<h2 id="requests">What the model saw, call by call</h2><p class="note">Each call\'s '
             'request as it was sent, after layer 1: the system prompt, the tool definitions and '
             'the messages. Blocks new since the previous request are shown (long ones as their '
             'head and tail), marked <span class="badge new">new</span>; placeholders layer 1 '
             'made are marked <span class="badge cleared">cleared</span>; unchanged blocks are '
             'one line linking to the call that sent them before. Sizes marked ~ are estimates '
             '(about 4 characters a token).</p>']
    used, previous, before = sum(map(len, parts)), [], None
    seen = _Seen(probes)
    for call in calls:
        messages = previous[: call.request.same] + list(call.request.messages)
        html_ = _call(record, call, messages, previous, before, seen)
        seen.sent_by(call)
        size = len(html_.encode("utf-8"))
        if used + size > SECTION_BYTES:
            parts.append(f'<p class="note">Calls {call.number:,} to {record.calls[-1].number:,}: '
                         'their requests are not shown; the page keeps to about 5 MB. The '
                         'session log (.transcripts/session_….jsonl) has every message.</p>')
            break
        parts.append(html_)
        used += size
        previous, before = messages, call
    if record.requests_left_out:
        parts.append(f'<p class="note">{record.requests_left_out:,} later calls kept their usage '
                     f'only: a run keeps the requests of its first {MAX_REQUESTS:,} calls.</p>')
    return "\n".join(parts)


def shown_calls(section_html: str) -> set:
    """The numbers of the calls whose request section_html shows: a bar links only to those."""
    return {int(number) for number in re.findall(r'<ol class="blocks" id="call-(\d+)"',
                                                 section_html)}


class _Seen:
    """What the sections before this one showed: a block's text is shown once on the page."""

    def __init__(self, probes: list) -> None:
        self.probes = probes            # the start of each compaction's summary
        self.shown = {}                 # block key -> the call whose section shows its text
        # The last call that sent tool definitions, and a system prompt: a summary call sends
        # no tools, and the call after it sends the same ones as the call before it.
        self.last = {"tools": None, "system": None}

    def sent_by(self, call: ModelCall) -> None:
        for part in self.last:
            if getattr(call.request, part) is not None:
                self.last[part] = call

    def body(self, key: bytes, block: SentBlock, call: ModelCall) -> str:
        """The block's text, or a link to the call that shows it already."""
        if key in self.shown and self.shown[key] != call.number:
            return f'<p class="note">The same text as in {_link(self.shown[key])}.</p>'
        self.shown[key] = call.number
        return _pre(block)


def _call(record: SessionRecord, call: ModelCall, messages: list, previous: list,
          before: Optional[ModelCall], seen: _Seen) -> str:
    """One <details>: a summary line, then the request's entries in order."""
    request, blocks = call.request, record.blocks
    entries, run, counts = [], [], {"new": 0, "cleared": 0}
    entries += _preamble(call, blocks, counts, seen)
    for index, (role, keys) in enumerate(messages):
        earlier = previous[index][1] if index < len(previous) and previous[index][0] == role else ()
        for position, key in enumerate(keys):
            if position < len(earlier) and earlier[position] == key:
                run.append((index, key))
                continue
            entries.append(_run(run, blocks, before))
            run = []
            block = blocks[key]
            kind = "cleared" if block.cleared else "new"
            counts[kind] += 1
            entries.append(_block(block, role, index, kind, seen.body(key, block, call),
                                  seen.probes))
    entries.append(_run(run, blocks, before))
    api = (f"; the API counted {n(call.input)} input tokens" if call.input else "")
    what = "summary call" if call.is_summary else "call"
    line = (f"{what.capitalize()} {call.number}: sent ~{n(request.tokens)} tokens in "
            f"{plural(request.count, 'message')}{api} · {counts['new']} new"
            + (f" · {counts['cleared']} cleared" if counts["cleared"] else ""))
    # The anchor is inside the <details>: following a link to it opens the request.
    return (f'<details class="request" data-call="{call.number}"><summary>{text(line)}</summary>'
            f'<ol class="blocks" id="call-{call.number}">{"".join(entries)}</ol></details>')


def _preamble(call: ModelCall, blocks: dict, counts: dict, seen: _Seen) -> list:
    """The tool definitions and the system prompt: whole the first time, then one line
    naming the last call that sent them (a summary call sends no tools)."""
    request, entries, same = call.request, [], {}
    for key, part, name in ((request.tools, "tools", "the tool definitions"),
                            (request.system, "system", "the system prompt")):
        if key is None:
            continue
        block = blocks[key]
        last = seen.last[part]
        if last is not None and getattr(last.request, part) == key:
            same.setdefault(last.number, (last, []))[1].append(f"{name} (~{n(block.tokens)} "
                                                               "tokens)")
            continue
        counts["new"] += 1
        label = f"{name}: {block.label}" if block.label else name
        entries.append(f'<li class="new"><span class="badge new">new</span> <b>{text(label)}</b> '
                       f'<span class="size">~{n(block.tokens)} tokens</span>'
                       f'{seen.body(key, block, call)}</li>')
    lines = [f'<li class="same">{text(" and ".join(names))}: as in {_link(last)}</li>'
             for last, names in same.values()]
    return lines + entries


def _run(run: list, blocks: dict, before: Optional[ModelCall]) -> str:
    """A run of blocks sent unchanged since the previous request, as one line."""
    if not run:
        return ""
    first, last = run[0][0] + 1, run[-1][0] + 1
    where = f"message {first}" if first == last else f"messages {first} to {last}"
    tokens = sum(blocks[key].tokens for _, key in run)
    cleared = sum(blocks[key].cleared for _, key in run)
    also = f", {cleared} of them cleared placeholders" if cleared else ""
    return (f'<li class="same">{where}: {plural(len(run), "block")} '
            f'(~{n(tokens)} tokens{also}) as in {_link(before)}</li>')


def _link(call: object) -> str:
    """A link to a call's section; call is a ModelCall or its number."""
    number = getattr(call, "number", call)
    return f'<a href="#call-{number}">call {number}</a>' if number else "the last call"


def _block(block: SentBlock, role: str, index: int, kind: str, body: str, probes: list) -> str:
    """A block that is new here (or newly a placeholder), its text cut to a head and a tail."""
    badges = [f'<span class="badge {kind}">{kind}</span>']
    # Layer 2's message opens so; a prompt that quotes a short summary does not.
    summary = block.kind == "text" and block.text.startswith(compaction.SUMMARY_OPENING)
    if summary and any(probe in block.text for probe in probes):
        badges.append('<span class="badge summary">the summary</span>')
    what = block.kind.replace("_", " ")
    if block.label:
        what += f" {'for ' if block.kind == 'tool_result' else ''}{block.label}"
    if block.error:
        what += " (error)"
    head = (f'{" ".join(badges)} <b>{text(role or "?")}</b> · {text(excerpt.cut(what, 80))} '
            f'· message {index + 1} <span class="size">~{n(block.tokens)} tokens</span>')
    if block.board_chars:
        body += ('<p class="board-note"><span class="badge board">the board</span> s07 added it '
                 f'after the compaction ({block.board_chars:,} characters)</p>'
                 f'<pre class="sent board-text">{text(block.board)}</pre>')
    return f'<li class="{kind}">{head}{body}</li>'


def _pre(block: SentBlock) -> str:
    if not block.kept:
        return (f'<p class="note">Its text ({block.chars:,} characters) was not kept: a run keeps '
                'about 3 million characters of what it sent.</p>')
    shown = block.text.rstrip() if block.board else block.text   # the blank lines before it
    return f'<pre class="sent">{text(shown)}</pre>' if shown or not block.board else ""
