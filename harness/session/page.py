"""The session page: one self-contained HTML file that shows a run, written when it ends.

Relied on by all three lessons through cli (end_of_run, given the run's recorder). It draws a
bar per model call (cache read, cache written, uncached input, output), the compaction
threshold, layer 1's clearings, each compaction with its summary and sizes, what the model saw
at each call (sent.py), the tool calls, and s07's board as a graph (board_picture.py).
Without each piece:
- markup.text(): a task subject or a model's reply such as `<script>` would become markup.
- the Content-Security-Policy: if an escape were missed, the browser still runs no script and
  loads nothing from the network.
- the chart's viewBox: the chart would keep its drawn size, not the window's; below CHART_MIN
  px it scrolls in its box instead (at 600 px its words were 6 px tall).
- MAX_BARS and _Scale.per: 3,000 calls drew bars each over the next (a 1.7 MB chart); past
  MAX_BARS a bar stands for a run of calls and draws the tallest, so peaks stay true.
- the request's anchor inside its <details>: a link to #call-9 would scroll there and leave
  the request closed; the browser opens it ("ancestor details revealing"), with no script.
- the tool table's preview (excerpt.preview, whole up to WHOLE_LINES): a task file (13 lines,
  what the s07 demo is about) would be cut short, though the terminal shows it whole.
- .scroll's shadows: where scroll bars are hidden, nothing says a wide board goes on.
- _legend: marks the lesson cannot make (s03 neither clears nor compacts) would be explained;
  each entry stays in one piece (nowrap).
- _sizes: a compaction's "before → after" would hide which number the API counted.
- prefers-color-scheme: the chart is unreadable in a dark browser.
- _price_line: the page would give tokens only, not the money in /cost's words (views.money),
  naming the price and its source; _price: a bad price (cli refuses one first) would lose
  the page; it is said on the page instead.
- write_page through writer.numbered, 0600: a write cut short would leave half a page or
  replace an earlier one, and the page, which shows every request and tool output, would be
  readable by anyone. The lesson in the name tells s03's, s06's and s07's pages apart.
"""

import math
import re
import time
from pathlib import Path
from typing import Optional

from harness import config, excerpt, writer
from harness.errors import SetupError, reason
from harness.session import board_picture, sent, views
from harness.session.markup import n, text
from harness.session.recorder import (BOARDS_KEPT, MAX_TOOL_CALLS, Compaction, ModelCall,
                                    Recorder, SessionRecord)
from harness.terminal import Screen, plural, show_note

CHART_MIN = 1000                     # px: in a narrower window the chart scrolls, its words legible
CHART_WIDTH = 1168                   # the chart's drawing units across: the page's width (1200px
                                     # less its padding), so that at full width a unit is a pixel
CHART_HEIGHT = 280                   # units of the plot area
BAR_WIDTH_MAX = 48                   # a bar with few calls: wide slots, bars of a readable width
MAX_BARS = 300                       # bars drawn at most: past it a bar stands for several calls
TICKS = 4                            # about this many gridlines above zero
THRESHOLD_ZOOM = 3                   # a threshold this many times the tallest bar is named, not
                                     # scaled to: else s07's demo (50,000 vs 2,000) draws flat bars
# The page stays near 5 MB whatever the run: each part has its share (the requests' in sent.py).
BOARD_BYTES = 1_200_000              # the pictures of the board: the end's first, then the latest
TOOL_BYTES = 1_000_000               # the table of tool calls
SUMMARY_BYTES = 1_000_000            # the summaries listed whole, the latest first; older ones cut
TOOLTIP_CHARS = 1_200                # a summary in a mark's tooltip; the full text is listed below


# ---------------------------------------------------------------- the chart

class _Scale:
    """Where a call's bar goes (x) and how high a count of tokens is drawn (y). A bar's slot
    holds `per` calls: one up to MAX_BARS calls, more past it."""

    LEFT, TOP, BOTTOM = 64, 50, 56
    RIGHT_NAMED, RIGHT_BARE = 220, 24   # room for the threshold's name, when there is one

    def __init__(self, calls: list, last: int) -> None:
        """last: the last call drawn, len(calls), or one after it that layer 1 cleared for
        and that got no reply."""
        self.right = self.RIGHT_NAMED if any(c.threshold for c in calls) else self.RIGHT_BARE
        self.calls = len(calls)
        self.per = math.ceil(last / MAX_BARS) or 1
        self.slots = math.ceil(last / self.per) or 1
        self.step = (CHART_WIDTH - self.LEFT - self.right) / self.slots
        tallest = max([c.input + c.output for c in calls] + [1])
        near = [c.threshold for c in calls
                if c.threshold and c.threshold <= THRESHOLD_ZOOM * tallest]
        top = max([tallest] + near) * 1.05
        self.tick = _nice_step(top / TICKS)
        self.top_value = self.tick * math.ceil(top / self.tick)
        self.width = CHART_WIDTH
        self.height = self.TOP + CHART_HEIGHT + self.BOTTOM

    def slot(self, number: int) -> int:
        """The slot of call `number` (calls count from 1; slots from 0)."""
        return (number - 1) // self.per

    def x(self, number: int) -> float:
        """The left edge of call `number`'s slot."""
        return self.LEFT + self.step * self.slot(number)

    def y(self, tokens: float) -> float:
        return self.TOP + CHART_HEIGHT * (1 - tokens / self.top_value)


def _nice_step(value: float) -> float:
    """The round number (1, 2 or 5 times a power of ten) at or above value: a step of the axes."""
    power = 10 ** math.floor(math.log10(max(value, 1)))
    return next(f * power for f in (1, 2, 5, 10) if f * power >= value)


def _chart(record: SessionRecord, linked: set) -> str:
    """The SVG, as wide as the page; its viewBox keeps the proportions. linked: the calls
    whose request the page shows, which a bar links to."""
    scale = _Scale(record.calls, max([len(record.calls)]
                                     + [cleared.before_call for cleared in record.clearings]))
    parts = ['<div class="scroll">',
             f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="100%" '
             f'viewBox="0 0 {scale.width} {scale.height}" role="img" '
             'aria-label="tokens per model call">',
             _axes(record, scale), *_bars(record.calls, scale, linked),
             _threshold_line(record, scale),
             *_clearing_marks(record.clearings, scale),
             *_compaction_marks(record, scale), "</svg>", "</div>"]
    return "\n".join(parts)


def _runs(items: list, scale: _Scale, number) -> list:
    """items in runs that share a slot, in order; number(item) is the call it belongs to."""
    runs = []
    for item in items:
        if runs and scale.slot(number(runs[-1][0])) == scale.slot(number(item)):
            runs[-1].append(item)
        else:
            runs.append([item])
    return runs


def _bars(calls: list, scale: _Scale, linked: set) -> list:
    """One bar a slot: its call's, or of a run of calls, the tallest one's."""
    return [_bar(max(run, key=lambda call: call.input + call.output), scale, run, linked)
            for run in _runs(calls, scale, lambda call: call.number)]


def _axes(record: SessionRecord, scale: _Scale) -> str:
    lines = []
    for k in range(round(scale.top_value / scale.tick) + 1):
        value = scale.tick * k
        y = scale.y(value)
        lines.append(f'<line class="grid" x1="{scale.LEFT}" x2="{scale.width - scale.right:.1f}" '
                     f'y1="{y:.1f}" y2="{y:.1f}"/><text class="axis" x="{scale.LEFT - 6}" '
                     f'y="{y + 4:.1f}" text-anchor="end">{n(value)}</text>')
    # A label per call when they fit, else every few: labels at least 24 units apart.
    every = _nice_step(max(1, round(24 * scale.per / scale.step)))
    for number in [1, *range(every, len(record.calls) + 1, every)]:
        x = scale.x(number) + scale.step / 2
        lines.append(f'<text class="axis" x="{x:.1f}" y="{scale.TOP + CHART_HEIGHT + 32}" '
                     f'text-anchor="middle">{number}</text>')
    lines.append(f'<text class="axis" x="{scale.LEFT}" y="{scale.height - 2}">model call</text>'
                 f'<text class="axis" x="4" y="14">tokens</text>')
    return "\n".join(lines)


def _bar(call: ModelCall, scale: _Scale, run: list, linked: set) -> str:
    """Stacked from the bottom in the order of the request: the cached prefix first. A bar
    whose request was kept links to it. run: the calls of its slot (call is the tallest)."""
    width = min(max(scale.step * 0.72, 1.5), BAR_WIDTH_MAX)
    x, base, rects = scale.x(call.number) + (scale.step - width) / 2, 0, []
    for kind, tokens in (("read", call.cache_read), ("written", call.cache_written),
                         ("uncached", call.uncached), ("output", call.output)):
        if tokens:
            top, bottom = scale.y(base + tokens), scale.y(base)
            rects.append(f'<rect class="{kind}" x="{x:.1f}" y="{top:.1f}" width="{width:.1f}" '
                         f'height="{bottom - top:.1f}"/>')
            base += tokens
    share = f"{call.cache_read / call.input:.0%}" if call.input else "0%"
    title = (f"call {call.number} ({call.label}): {n(call.input)} input = {n(call.cache_read)} "
             f"read from cache + {n(call.cache_written)} written to cache + {n(call.uncached)} "
             f"uncached ({share} from cache); {n(call.output)} output")
    if len(run) > 1:
        title = f"calls {run[0].number} to {run[-1].number}, the tallest drawn: {title}"
    kind = "call summary-call" if call.is_summary else "call"
    bar = (f'<g class="{kind}" data-call="{call.number}"><title>{text(title)}</title>'
           + "".join(rects) + "</g>")
    return f'<a href="#call-{call.number}">{bar}</a>' if call.number in linked else bar


def _threshold_line(record: SessionRecord, scale: _Scale) -> str:
    """A step line: COMPACT_THRESHOLD at each slot's last call (it can change in a REPL)."""
    points, last = [], None
    for run in _runs(record.calls, scale, lambda call: call.number):
        set_at = [call for call in run if call.threshold is not None]
        if not set_at:
            continue
        last = set_at[-1].threshold
        y = max(scale.y(last), scale.TOP)                 # an earlier, higher one: at the top
        left = scale.x(run[0].number)
        points += [f"{left:.1f},{y:.1f}", f"{left + scale.step:.1f},{y:.1f}"]
    if last is None:
        return ""
    head = f'<g class="threshold"><title>COMPACT_THRESHOLD: {n(last)} tokens</title>'
    if last > scale.top_value:           # far above every bar: say where it is, do not draw it
        return (f'{head}<text x="{scale.width - 4:.1f}" y="14" text-anchor="end">'
                f'COMPACT_THRESHOLD {n(last)} ↑ (far above)</text></g>')
    end = scale.LEFT + scale.step * scale.slots
    return (f'{head}<polyline points="{" ".join(points)}"/><text x="{end + 6:.1f}" '
            f'y="{scale.y(last) + 4:.1f}">COMPACT_THRESHOLD {n(last)}</text></g>')


def _clearing_marks(clearings: list, scale: _Scale) -> list:
    """A ▲ under each slot before whose call layer 1 cleared a batch (or several)."""
    return [_clearing_mark(run, scale)
            for run in _runs(clearings, scale, lambda cleared: cleared.before_call)]


def _clearing_mark(run: list, scale: _Scale) -> str:
    first = run[0]
    x, y = scale.x(first.before_call) + scale.step / 2, scale.TOP + CHART_HEIGHT + 4
    count = sum(cleared.count for cleared in run)
    what = f"{plural(count, 'old tool result')} (or inputs)"
    tokens = n(sum(cleared.tokens for cleared in run))
    if len(run) > 1:
        when = f"in {len(run)} batches, before calls {first.before_call} to {run[-1].before_call}"
    elif first.before_call > scale.calls:
        when = f"before call {first.before_call}, which got no reply"
    else:
        when = f"before call {first.before_call}"
    tip = f"layer 1, {when}: {what} became placeholders (about {tokens} tokens)"
    return (f'<g class="cleared" data-call="{first.before_call}"><title>{text(tip)}</title>'
            f'<path d="M{x:.1f},{y:.1f} l-6,12 h12 z"/></g>')


def _compaction_marks(record: SessionRecord, scale: _Scale) -> list:
    """A numbered line after each compaction's summary call: a slot's first (the list below
    the chart has them all)."""
    runs = _runs(record.compactions, scale, lambda compaction: compaction.after_call + 1)
    return [_compaction_mark(run[0], record, scale, len(run) - 1) for run in runs]


def _compaction_mark(compaction: Compaction, record: SessionRecord, scale: _Scale,
                     more: int = 0) -> str:
    x = scale.x(compaction.after_call + 1)
    summary = excerpt.cut(compaction.summary, TOOLTIP_CHARS)
    tip = (f"compaction {compaction.number}, by call {compaction.after_call}: "
           f"{_sizes(compaction, record)}. Summary: {summary}")
    if more:
        tip += f" (and {more} more compactions in the calls of this bar: see the list)"
    return (f'<a class="compaction" data-call="{compaction.after_call}" '
            f'href="#compaction-{compaction.number}">'
            f'<title>{text(tip)}</title><line x1="{x:.1f}" x2="{x:.1f}" y1="{scale.TOP - 6}" '
            f'y2="{scale.TOP + CHART_HEIGHT}"/><circle cx="{x:.1f}" cy="{scale.TOP - 14}" r="10"/>'
            f'<text x="{x:.1f}" y="{scale.TOP - 10}" text-anchor="middle">{compaction.number}'
            '</text></a>')


def _sizes(compaction: Compaction, record: SessionRecord) -> str:
    """before → after (what the next request sends), each said to be the API's count or an
    estimate (~), and what the next call then sent, as the API counted it."""
    before, counted = compaction.before, compaction.counted
    if counted is None:
        first, how = f"~{n(before)}", "before: estimated"
    elif counted >= before:
        first, how = n(before), "before: the API's count"
    else:
        first = n(before)
        how = f"before: the API's count, {n(counted)}, + ~{n(before - counted)} estimated since"
    if compaction.after_counted:
        line = f"{first} → {n(compaction.after)} tokens ({how}; after: the API's count)"
    else:
        line = (f"{first} → ~{n(compaction.after)} tokens ({how}; after: estimated, no call "
                "had sent it yet)")
    later = [c for c in record.calls if c.number > compaction.after_call and not c.is_summary]
    if later and later[0].input:
        line += f"; call {later[0].number} then sent {n(later[0].input)} (the API's count)"
    return line


# ---------------------------------------------------------------- the page

def _summary_line(record: SessionRecord) -> str:
    totals, sent_tokens = record.totals, record.input_tokens
    parts = [plural(totals["calls"], "model call"),
             f"{n(sent_tokens)} input tokens, {record.cache_share} read from the cache",
             f"{n(totals['out'])} output tokens"]
    if _compacts(record):
        parts += [plural(len(record.clearings), "layer-1 clearing"),
                  plural(len(record.compactions), "compaction")]
    return text(" · ".join(parts))


def _compacts(record: SessionRecord) -> bool:
    """Whether the lesson has layers 1 and 2 (s06, s07): it sets a threshold at every call."""
    return (any(c.threshold is not None for c in record.calls) or bool(record.clearings)
            or bool(record.compactions))


def _legend(record: SessionRecord) -> str:
    """The marks this lesson can make, and only those."""
    items = ['<span class="swatch read"></span>read from the cache (0.1×)',
             '<span class="swatch written"></span>written to the cache (1.25×)',
             '<span class="swatch uncached"></span>uncached input (1×)',
             '<span class="swatch output"></span>output']
    if _compacts(record):
        items += ['<span class="swatch line"></span>COMPACT_THRESHOLD',
                  '<span class="swatch summary-call"></span>a summary call',
                  '<span class="mark-cleared">▲</span> layer 1 cleared a batch before this call',
                  '<span class="mark-compaction">①</span> compaction (hover, or see the list)']
    if any(c.request for c in record.calls):
        items.append('· click a bar for what the model saw')
    entries = " ".join(f'<span class="item">{item}</span>' for item in items)
    return f'<p class="legend">{entries}</p>'


def _pictures(record: SessionRecord) -> dict:
    """The board's pictures by name, within BOARD_BYTES (a dense graph of MAX_NODES tasks is
    some hundreds of kilobytes): the end's first, then from the latest compaction back."""
    wanted = [("board-end", record.final_board)]
    wanted += [(f"board-{c.number}", c.board) for c in reversed(record.compactions)]
    pictures, used = {}, 0
    for name, board in wanted:
        if board is None:
            continue
        picture = board_picture.board_svg(board, name)
        if used + len(picture.encode("utf-8")) > BOARD_BYTES:
            picture = ('<p class="note">Not drawn: the pictures of the board on this page '
                       'already take about 1 MB; /tasks shows the board.</p>')
        pictures[name] = picture
        used += len(picture.encode("utf-8"))
    return pictures


def _summaries(record: SessionRecord) -> dict:
    """{compaction number: its summary as listed}: whole, from the latest back, within
    SUMMARY_BYTES; an older one past it is cut to TOOLTIP_CHARS, and says where it is whole."""
    shown, used = {}, 0
    for c in reversed(record.compactions):
        used += len(c.summary)                      # characters: about its bytes
        shown[c.number] = c.summary
        if used > SUMMARY_BYTES:
            shown[c.number] = (excerpt.cut(c.summary, TOOLTIP_CHARS) + "\n[cut here: the page "
                               "keeps to about 5 MB; the transcript has the conversation whole]")
    return shown


def _events(record: SessionRecord, pictures: dict) -> str:
    items, summaries = [], _summaries(record)
    for c in record.compactions:
        if c.board is not None:
            board = f"<p>The board at this compaction:</p>{pictures[f'board-{c.number}']}"
        elif c.board_dropped:
            board = (f'<p class="note">The board at this compaction is not kept: a run keeps the '
                     f'board of its last {BOARDS_KEPT} compactions.</p>')
        else:
            board = ""
        items.append(f'<li id="compaction-{c.number}"><b>Compaction {c.number}</b>, made by call '
                     f'{c.after_call}: {text(_sizes(c, record))}; transcript '
                     f'<code>{text(c.transcript)}</code>'
                     f'<pre class="summary">{text(summaries[c.number])}</pre>{board}</li>')
    cleared = [f'<li>Before call {c.before_call}: {plural(c.count, "old tool result")} '
               f'(or inputs) became placeholders (about {n(c.tokens)} tokens freed)</li>'
               for c in record.clearings]
    html_ = ""
    if items:
        html_ += f'<h2>Compactions</h2><ol class="compactions">{"".join(items)}</ol>'
    if cleared:
        html_ += f'<h2>Layer 1 clearings</h2><ul>{"".join(cleared)}</ul>'
    return html_


def _tool_table(record: SessionRecord) -> str:
    if not record.tools:
        return "<h2>Tool calls</h2><p class=\"note\">No tool calls.</p>"
    rows, used, left_out = [], 0, record.tools_left_out
    for number, t in enumerate(record.tools, 1):
        if used > TOOL_BYTES:
            left_out += 1
            continue
        lines = excerpt.preview(t.output)             # a task file, a board: whole
        mark = '<span class="err">error</span> ' if t.is_error else ""
        rows.append(f'<tr class="{"error" if t.is_error else "ok"}"><td>{number}</td>'
                    f'<td>{t.after_call}</td><td><code>{text(t.name)}</code></td>'
                    f'<td><code>{text(t.args)}</code></td>'
                    f'<td>{mark}<pre>{text(chr(10).join(lines))}</pre></td></tr>')
        used += len(rows[-1].encode("utf-8"))
    more = (f'<p class="note">… and {left_out:,} more tool calls, not shown: a page keeps to '
            f'about 5 MB, a run\'s record to {MAX_TOOL_CALLS:,} tool calls.</p>'
            if left_out else "")
    return ('<h2>Tool calls, in order</h2><table class="tools"><thead><tr><th>#</th><th>call</th>'
            '<th>tool</th><th>arguments</th><th>result</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>" + more)


def _price_line(record: SessionRecord, price: Optional[config.Price]) -> str:
    """What the session cost in money, and at which price from where, as /cost says it."""
    if price is None:
        return ""
    priced = views.money(record, price)      # "": another model, no price set; said says so
    said = f"{priced}, {price.said}" if priced else price.said
    return f'<p class="totals">price: {text(said)}</p>\n'


def render(record: SessionRecord, price: Optional[config.Price] = None) -> str:
    """The whole page: CSS and SVG inline, no script. price: config.price(); None, no price."""
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.started))
    pictures = _pictures(record)
    board = (f"<h2>The board at the end</h2>{pictures['board-end']}"
             if record.final_board is not None else "")
    missed = "".join(f"<li>{text(p)}</li>" for p in record.problems)
    problems = f"<h2>Not recorded or not drawn</h2><ul>{missed}</ul>" if record.problems else ""
    boards = record.final_board is not None or any(c.board is not None for c in record.compactions)
    key = board_picture.KEY if boards else ""
    requests = sent.section(record)
    chart = '<p class="note">No model calls.</p>'
    if record.calls:
        chart = _chart(record, sent.shown_calls(requests))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
            f'style-src \'unsafe-inline\'"><meta name="color-scheme" content="light dark">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{text(record.lesson or "session")} · {text(started)}</title>'
            f'<style>{CSS.replace("MIN_WIDTH", str(CHART_MIN))}</style></head><body>\n'
            f'<h1>{text(record.lesson or "session")} <small>{text(started)}</small></h1>'
            f'<p class="totals">{_summary_line(record)}</p>\n{_price_line(record, price)}'
            f'{_legend(record)}\n{key}'
            f'{chart}\n{_events(record, pictures)}\n{requests}\n{board}\n'
            f'{_tool_table(record)}\n{problems}</body></html>\n')


def write_page(record: SessionRecord, folder: Path = config.TRANSCRIPTS,
               price: Optional[config.Price] = None) -> Path:
    """Write the page as folder/session_<lesson>_<time>_<n>.html, 0600, never replacing a file
    nor through a link (writer.numbered), and return it. Raises OSError."""
    stem = f"session_{_lesson_tag(record.lesson)}{time.strftime('%Y%m%d-%H%M%S')}"
    page = render(record, price).encode("utf-8")
    return writer.numbered(Path(folder), stem, ".html", page, writer.PRIVATE)


def _price() -> config.Price:
    """The run's price, as /cost gives it; a bad one is said on the page instead of money."""
    try:
        return config.price()
    except SetupError as exc:
        return config.Price(None, None, "", f"none: {exc}")


def _lesson_tag(lesson: str) -> str:
    """"s07_" for s07_task_system; a name that is not a lesson's, made safe for a file name."""
    found = re.match(r"(s\d+)(_|$)", lesson)
    tag = found[1] if found else re.sub(r"[^A-Za-z0-9-]+", "-", lesson).strip("-")[:20]
    return f"{tag}_" if tag else ""


def end_of_run(recorder: Recorder, folder: Path = config.TRANSCRIPTS,
               screen: Optional[Screen] = None) -> Optional[Path]:
    """At the end of a run: the last board, the page, and one line saying where it is (as
    screen.where gives it: --demo runs in demo/), or why there is none."""
    if not recorder.data.calls:
        return None                          # nothing happened: leave no file behind, read no board
    recorder.finish()
    try:
        path = write_page(recorder.data, folder, _price())
    except OSError as exc:
        where = screen.where(f"{folder}/") if screen else f"{folder}/"
        show_note(f"[no session page: cannot write in {where} ({reason(exc)})]")
        return None
    # A bug in the page must not end the run with a traceback.
    except Exception as exc:  # noqa: BLE001
        show_note(f"[no session page: {type(exc).__name__}: {exc}]")
        return None
    shown = screen.where(path) if screen else path
    show_note(f"[session page: {shown} (open it in a browser)]")
    return path


CSS = """
:root { --fg: #1d2330; --bg: #ffffff; --muted: #5b6475; --grid: #e3e6ec; --panel: #f5f6f8;
  --read: #3b75af; --written: #ef8a17; --uncached: #d0413e; --output: #55a868;
  --threshold: #8e44ad; --compaction: #2a9d8f; --cleared: #b8860b; --err: #c0392b;
  --pending: #f5f6f8; --in_progress: #dbe9f8; --completed: #dff3e2; --missing: #fdecea;
  --new: #2a9d8f; --shade: rgba(0, 0, 0, 0.25); }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6e9ef; --bg: #15181e; --muted: #9aa3b2; --grid: #2c323c; --panel: #1f232b;
    --read: #6fa8dc; --written: #f6b26b; --uncached: #e67c73; --output: #93c47d;
    --threshold: #c39bd3; --compaction: #5fd3c4; --cleared: #f1c232; --err: #ff7b6e;
    --pending: #262b34; --in_progress: #1f3550; --completed: #1f3b27; --missing: #4a2424;
    --new: #5fd3c4; --shade: rgba(255, 255, 255, 0.25); } }
body { font: 15px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg);
  margin: 1.5em auto; max-width: 1200px; padding: 0 1em; }
h1 small { color: var(--muted); font-weight: normal; font-size: 60%; }
h2 { font-size: 1.1em; margin-top: 1.8em; }
.totals, .note { color: var(--muted); }
.scroll { overflow-x: auto;           /* a board wider than the window scrolls in its box */
  background:                       /* and a shadow at an edge says there is more that way */
    linear-gradient(to right, var(--bg) 30%, transparent) left / 3em 100% no-repeat local,
    linear-gradient(to left, var(--bg) 30%, transparent) right / 3em 100% no-repeat local,
    radial-gradient(farthest-side at 0 50%, var(--shade), transparent) left / 1em 100%
      no-repeat scroll,
    radial-gradient(farthest-side at 100% 50%, var(--shade), transparent) right / 1em 100%
      no-repeat scroll; }
svg { overflow: visible; }
svg.chart { display: block; width: 100%; height: auto; min-width: MIN_WIDTHpx; }
svg text { fill: var(--fg); font: 12px system-ui, sans-serif; }
svg text.axis { fill: var(--muted); }
.grid { stroke: var(--grid); }
.read, .swatch.read { fill: var(--read); background: var(--read); }
.written, .swatch.written { fill: var(--written); background: var(--written); }
.uncached, .swatch.uncached { fill: var(--uncached); background: var(--uncached); }
.output, .swatch.output { fill: var(--output); background: var(--output); }
.summary-call rect { stroke: var(--compaction); stroke-width: 2; }
.swatch.summary-call { border: 2px solid var(--compaction); box-sizing: border-box; }
.threshold polyline { fill: none; stroke: var(--threshold); stroke-width: 2;
  stroke-dasharray: 6 4; }
.threshold text { fill: var(--threshold); }
.cleared path, .mark-cleared { fill: var(--cleared); color: var(--cleared); }
.compaction line { stroke: var(--compaction); stroke-width: 2; stroke-dasharray: 3 3; }
.compaction circle { fill: var(--compaction); }
.compaction text { fill: var(--bg); font-weight: bold; }
.mark-compaction { color: var(--compaction); font-weight: bold; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; vertical-align: -0.1em;
  margin: 0 0.3em 0 0.9em; }
.swatch.line { height: 0; border-top: 2px dashed var(--threshold); vertical-align: 0.25em; }
.legend { font-size: 13px; }
.legend .item { white-space: nowrap; }   /* a swatch stays with its words */
pre { white-space: pre-wrap; word-break: break-word; margin: 0; font-size: 12px; }
pre.summary, pre.sent { background: var(--panel); padding: 0.6em 0.8em; border-radius: 6px;
  margin: 0.4em 0; }
details.request { border-top: 1px solid var(--grid); padding: 0.3em 0; }
details.request summary { cursor: pointer; font-size: 14px; }
ol.blocks { font-size: 13px; padding-left: 1.4em; scroll-margin-top: 4em; }
ol.blocks li { margin-bottom: 0.3em; }
li.same { color: var(--muted); }
.badge { font-size: 11px; border-radius: 4px; padding: 0 0.4em; border: 1px solid; }
.badge.new { color: var(--new); }
.badge.cleared { color: var(--cleared); }
.badge.summary, .badge.board { color: var(--compaction); }
.size { color: var(--muted); }
table.tools { border-collapse: collapse; width: 100%; font-size: 13px; }
table.tools td, table.tools th { border-top: 1px solid var(--grid); padding: 4px 8px;
  text-align: left; vertical-align: top; }
table.tools code { word-break: break-all; }
table.tools td:nth-child(3) code { word-break: normal; white-space: nowrap; }
table.tools td:nth-child(4) { width: 32%; }
tr.error td { background: color-mix(in srgb, var(--err) 10%, transparent); }
.err { color: var(--err); font-weight: bold; }
.board rect { stroke: var(--muted); stroke-width: 1.2; fill: var(--pending); }
.board .in_progress rect { fill: var(--in_progress); stroke: var(--read); stroke-width: 2; }
.board .completed rect { fill: var(--completed); stroke: var(--output); }
.board .missing rect { fill: var(--missing); stroke: var(--err); stroke-dasharray: 4 3; }
.board .ready rect { stroke: var(--output); stroke-width: 2; }
.board .blocked rect { stroke-dasharray: 2 3; }
.board text.status, .board text.waits { fill: var(--muted); font-size: 11px; }
.board .ready text.waits { fill: var(--output); font-weight: bold; }
.board path.blocks, .board path.blocked { fill: none; stroke: var(--muted); stroke-width: 1.5; }
.board path.blocked { stroke-dasharray: 5 4; opacity: 0.7; }
.board .head { fill: var(--muted); }
li { margin-bottom: 0.6em; }
"""
