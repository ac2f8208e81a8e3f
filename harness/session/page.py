"""The session page: one self-contained HTML file that shows a run, written when it ends.

Relied on by all three lessons through cli (end_of_run), reading harness/session/record.py.
It draws one bar per model call (cache read, cache written and uncached input stacked, then
output), the compaction threshold, layer 1's clearings, each compaction with its summary, the
tool calls in order, and for s07 the task board as a graph. Without each piece:
- _text: a task subject or a model's reply such as `<script>` would become markup in the page.
- the Content-Security-Policy: if an escape were ever missed, the browser still runs no script
  and loads nothing from the network.
- prefers-color-scheme: the chart is unreadable in a dark browser.
- _write_new: an interrupted write leaves half a page, or replaces an earlier session's page.
"""

import html
import math
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Optional

from harness.session.record import RECORD, BoardTask, Recorder, SessionRecord

TRANSCRIPTS = Path(".transcripts")   # beside s06's transcripts: one folder holds what a run left
CHART_HEIGHT = 280                   # pixels of the plot area
BAR_STEP_MAX = 56                    # pixels per call when there are few calls
CHART_WIDTH_MAX = 1000               # pixels of plot for many calls: bars get thinner, not the page wider
TICKS = 4                            # about this many gridlines above zero
THRESHOLD_ZOOM = 3                   # a threshold this many times the tallest bar is marked, not scaled to:
                                     # otherwise s07's demo (50,000 vs 2,000 tokens) draws flat bars
NODE_W, NODE_H = 190, 48             # a task on the board graph
MAX_BOARD_NODES = 60                 # a bigger board is listed by task_list; the picture stays legible
PREVIEW_LINES = 6                    # lines of a tool result shown in the table
TOOLTIP_CHARS = 1_200                # a summary in a mark's tooltip; the full text is listed below
# Status classes are fixed names: no text from a task file ever reaches an attribute.
STATUS_CLASSES = {"pending", "in_progress", "completed", "missing"}

# C0 and C1 controls (but tab and newline), bidirectional overrides (text that reads backwards)
# and lone surrogates (not encodable as UTF-8): shown as escapes, not passed to the browser.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _text(value: object) -> str:
    """Any text for the page, as text: HTML-escaped, quotes too, controls made visible."""
    def visible(m: re.Match) -> str:
        code = ord(m.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return html.escape(_UNSAFE.sub(visible, str(value)), quote=True)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _n(number: float) -> str:
    return f"{number:,.0f}"


# ---------------------------------------------------------------- the chart

class _Scale:
    """Where a call's bar goes (x) and how high a count of tokens is drawn (y)."""

    LEFT, TOP, BOTTOM, RIGHT = 64, 50, 44, 220   # RIGHT: room for the threshold's name

    def __init__(self, calls: list) -> None:
        self.step = min(BAR_STEP_MAX, CHART_WIDTH_MAX / max(len(calls), 1))
        tallest = max([c.input + c.output for c in calls] + [1])
        near = [c.threshold for c in calls if c.threshold and c.threshold <= THRESHOLD_ZOOM * tallest]
        self.tick = _nice_step(max([tallest] + near) * 1.05 / TICKS)
        self.top_value = self.tick * math.ceil(max([tallest] + near) * 1.05 / self.tick)
        self.width = self.LEFT + self.step * len(calls) + self.RIGHT
        self.height = self.TOP + CHART_HEIGHT + self.BOTTOM

    def x(self, number: int) -> float:
        """The left edge of call `number`'s slot (calls count from 1)."""
        return self.LEFT + self.step * (number - 1)

    def y(self, tokens: float) -> float:
        return self.TOP + CHART_HEIGHT * (1 - tokens / self.top_value)


def _nice_step(value: float) -> float:
    """The round number (1, 2 or 5 times a power of ten) at or above value: the gridlines' step."""
    power = 10 ** math.floor(math.log10(max(value, 1)))
    return next(f * power for f in (1, 2, 5, 10) if f * power >= value)


def _chart(record: SessionRecord) -> str:
    scale = _Scale(record.calls)
    parts = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{scale.width:.0f}" '
             f'height="{scale.height}" viewBox="0 0 {scale.width:.0f} {scale.height}" role="img" '
             'aria-label="tokens per model call">',
             _axes(record, scale), *(_bar(call, scale) for call in record.calls),
             _threshold_line(record, scale), *(_clearing_mark(c, scale) for c in record.clearings),
             *(_compaction_mark(c, scale) for c in record.compactions), "</svg>"]
    return "\n".join(parts)


def _axes(record: SessionRecord, scale: _Scale) -> str:
    lines = []
    for k in range(round(scale.top_value / scale.tick) + 1):
        value = scale.tick * k
        y = scale.y(value)
        lines.append(f'<line class="grid" x1="{scale.LEFT}" x2="{scale.width - scale.RIGHT:.1f}" '
                     f'y1="{y:.1f}" y2="{y:.1f}"/><text class="axis" x="{scale.LEFT - 6}" y="{y + 4:.1f}" '
                     f'text-anchor="end">{_n(value)}</text>')
    every = max(1, round(24 / scale.step))       # a label per call when they fit, else every few
    every = next(k for k in (1, 2, 5, 10, 20, 50, 100, 10 ** 9) if k >= every)
    for call in record.calls:
        if call.number == 1 or call.number % every == 0:
            x = scale.x(call.number) + scale.step / 2
            lines.append(f'<text class="axis" x="{x:.1f}" y="{scale.TOP + CHART_HEIGHT + 30}" '
                         f'text-anchor="middle">{call.number}</text>')
    lines.append(f'<text class="axis" x="{scale.LEFT}" y="{scale.height - 2}">model call</text>'
                 f'<text class="axis" x="4" y="14">tokens</text>')
    return "\n".join(lines)


def _bar(call, scale: _Scale) -> str:
    """Stacked from the bottom in the order of the request: the cached prefix first."""
    width = max(scale.step * 0.72, 1.5)
    x, base, rects = scale.x(call.number) + (scale.step - width) / 2, 0, []
    for kind, tokens in (("read", call.cache_read), ("written", call.cache_written),
                         ("uncached", call.uncached), ("output", call.output)):
        if tokens:
            top, bottom = scale.y(base + tokens), scale.y(base)
            rects.append(f'<rect class="{kind}" x="{x:.1f}" y="{top:.1f}" width="{width:.1f}" '
                         f'height="{bottom - top:.1f}"/>')
            base += tokens
    share = f"{call.cache_read / call.input:.0%}" if call.input else "0%"
    title = (f"call {call.number} ({call.label}): {_n(call.input)} input = {_n(call.cache_read)} read "
             f"from cache + {_n(call.cache_written)} written to cache + {_n(call.uncached)} uncached "
             f"({share} from cache); {_n(call.output)} output")
    kind = "call summary-call" if call.is_summary else "call"
    return (f'<g class="{kind}" data-call="{call.number}"><title>{_text(title)}</title>'
            + "".join(rects) + "</g>")


def _threshold_line(record: SessionRecord, scale: _Scale) -> str:
    """A step line: COMPACT_THRESHOLD as it was at each call (it can change between runs of a REPL)."""
    points, last = [], None
    for call in record.calls:
        if call.threshold is None:
            continue
        y = max(scale.y(call.threshold), scale.TOP)    # an earlier, higher one: at the top
        points += [f"{scale.x(call.number):.1f},{y:.1f}", f"{scale.x(call.number + 1):.1f},{y:.1f}"]
        last = call.threshold
    if last is None:
        return ""
    end = scale.x(len(record.calls) + 1)
    if last > scale.top_value:           # far above every bar: say where it is instead of drawing it
        return (f'<g class="threshold"><title>COMPACT_THRESHOLD: {_n(last)} tokens</title>'
                f'<text x="{scale.width - 4:.1f}" y="14" text-anchor="end">COMPACT_THRESHOLD '
                f'{_n(last)} ↑ (far above)</text></g>')
    return (f'<g class="threshold"><title>COMPACT_THRESHOLD: {_n(last)} tokens</title>'
            f'<polyline points="{" ".join(points)}"/><text x="{end + 6:.1f}" y="{scale.y(last) + 4:.1f}">'
            f'COMPACT_THRESHOLD {_n(last)}</text></g>')


def _clearing_mark(cleared, scale: _Scale) -> str:
    x, y = scale.x(cleared.before_call) + scale.step / 2, scale.TOP + CHART_HEIGHT + 4
    what = f"{cleared.count} old tool result{'s' * (cleared.count != 1)} (or inputs)"
    tip = f"layer 1, before call {cleared.before_call}: {what} became placeholders " \
          f"(about {_n(cleared.tokens)} tokens)"
    return (f'<g class="cleared" data-call="{cleared.before_call}"><title>{_text(tip)}</title>'
            f'<path d="M{x:.1f},{y:.1f} l-6,12 h12 z"/></g>')


def _compaction_mark(compaction, scale: _Scale) -> str:
    x = scale.x(compaction.after_call + 1)
    tip = (f"compaction {compaction.number}, by call {compaction.after_call}: {_n(compaction.before)} → "
           f"{_n(compaction.after)} tokens. Summary: {_cut(compaction.summary, TOOLTIP_CHARS)}")
    return (f'<a class="compaction" data-call="{compaction.after_call}" '
            f'href="#compaction-{compaction.number}">'
            f'<title>{_text(tip)}</title><line x1="{x:.1f}" x2="{x:.1f}" y1="{scale.TOP - 6}" '
            f'y2="{scale.TOP + CHART_HEIGHT}"/><circle cx="{x:.1f}" cy="{scale.TOP - 14}" r="10"/>'
            f'<text x="{x:.1f}" y="{scale.TOP - 10}" text-anchor="middle">{compaction.number}</text></a>')


# ---------------------------------------------------------------- the board as a graph

def _depths(tasks: dict) -> dict:
    """Each task's column: 0 with no blockers, else one more than its deepest blocker (cycles cut)."""
    depth, visiting = {}, set()

    def visit(tid: int) -> int:
        if tid in depth:
            return depth[tid]
        if tid in visiting or tid not in tasks:  # a hand-made cycle, or a blocker not on the board
            return -1
        visiting.add(tid)
        depth[tid] = 1 + max([visit(b) for b in _waited_for(tasks, tid)] + [-1])
        visiting.discard(tid)
        return depth[tid]
    for tid in sorted(tasks):
        visit(tid)
    return depth


def _waited_for(tasks: dict, tid: int) -> list:
    """What tid waits for, or waited for: its blockers, and finished tasks that once blocked it."""
    return tasks[tid].blocked_by + [t.id for t in tasks.values() if tid in t.unblocked]


def board_svg(board: list, name: str) -> str:
    """Tasks as boxes in columns by dependency depth; an arrow from each blocker to what it blocks."""
    live = [t for t in board if t.status != "deleted"][:MAX_BOARD_NODES]
    if not live:
        return '<p class="note">The board has no live tasks.</p>'
    tasks = {t.id: t for t in live}
    missing = sorted({b for t in live for b in t.blocked_by if b not in tasks})
    tasks.update({b: BoardTask(b, "(not on the board)", "missing", None, [], []) for b in missing})
    depth = _depths(tasks)
    place, rows = {}, {}
    for tid in sorted(tasks, key=lambda i: (depth[i], i)):
        row = rows[depth[tid]] = rows.get(depth[tid], -1) + 1
        place[tid] = (16 + depth[tid] * (NODE_W + 56), 16 + row * (NODE_H + 18))
    width = max(x for x, _ in place.values()) + NODE_W + 16
    height = max(y for _, y in place.values()) + NODE_H + 16
    arrows = [_arrow(place[b], place[t.id], b, t.id, name, "blocks") for t in live for b in t.blocked_by]
    arrows += [_arrow(place[t.id], place[d], t.id, d, name, "blocked") for t in live for d in t.unblocked
               if d in tasks and t.id not in tasks[d].blocked_by]
    return (f'<svg class="board" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="the task board">'
            f'<defs><marker id="{name}-head" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto"><path class="head" d="M0,0 L10,5 L0,10 z"/></marker></defs>'
            + "".join(arrows) + "".join(_node(tasks[tid], place[tid]) for tid in sorted(tasks)) + "</svg>")


BOARD_KEY = ('<p class="legend">The board: an arrow runs from a blocker to the task that waits for it; '
             'dashed, it waited until the blocker finished (s07 then removed it from blockedBy).</p>')


def _arrow(start: tuple, end: tuple, blocker: int, task: int, name: str, kind: str) -> str:
    """kind "blocks": task waits for blocker now; "blocked": it did, until blocker finished."""
    (x1, y1), (x2, y2) = start, end
    x1, y1, y2 = x1 + NODE_W, y1 + NODE_H / 2, y2 + NODE_H / 2
    bend = max(abs(x2 - x1) / 2, 30)
    what = (f"#{blocker} blocks #{task}" if kind == "blocks"
            else f"#{blocker} blocked #{task} until it finished")
    return (f'<path class="{kind}" data-from="{blocker}" data-to="{task}" marker-end="url(#{name}-head)" '
            f'd="M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"><title>{what}</title></path>')


def _node(task: BoardTask, at: tuple) -> str:
    x, y = at
    status = task.status if task.status in STATUS_CLASSES else "unknown"
    who = f" · {task.owner}" if task.owner else ""
    title = f"#{task.id}: {task.subject} ({task.status}{who})"
    return (f'<g class="task {status}" data-task="{task.id}"><title>{_text(title)}</title>'
            f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="6"/>'
            f'<text x="{x + 10}" y="{y + 19}" class="subject">'
            f'{_text(_cut(f"#{task.id} {task.subject}", 27))}'
            f'</text><text x="{x + 10}" y="{y + 37}" class="status">'
            f'{_text(_cut(task.status.replace("_", " ") + who, 30))}</text></g>')


# ---------------------------------------------------------------- the page

def _summary_line(record: SessionRecord) -> str:
    calls = record.calls
    sent = sum(c.input for c in calls)
    read = sum(c.cache_read for c in calls)
    share = f"{read / sent:.0%}" if sent else "0%"
    parts = [f"{len(calls)} model call{'s' * (len(calls) != 1)}", f"{_n(sent)} input tokens, {share} read "
             f"from the cache", f"{_n(sum(c.output for c in calls))} output tokens",
             f"{len(record.clearings)} layer-1 clearing{'s' * (len(record.clearings) != 1)}",
             f"{len(record.compactions)} compaction{'s' * (len(record.compactions) != 1)}"]
    return _text(" · ".join(parts))


LEGEND = ('<p class="legend"><span class="swatch read"></span>read from the cache (0.1×) '
          '<span class="swatch written"></span>written to the cache (1.25×) '
          '<span class="swatch uncached"></span>uncached input (1×) '
          '<span class="swatch output"></span>output '
          '<span class="swatch line"></span>COMPACT_THRESHOLD '
          '<span class="mark-cleared">▲</span> layer 1 cleared a batch before this call '
          '<span class="mark-compaction">①</span> compaction (hover, or see the list)</p>')


def _events(record: SessionRecord) -> str:
    items = []
    for c in record.compactions:
        items.append(f'<li id="compaction-{c.number}"><b>Compaction {c.number}</b>, made by call '
                     f'{c.after_call}: {_n(c.before)} → {_n(c.after)} tokens; transcript '
                     f'<code>{_text(c.transcript)}</code>'
                     f'<pre class="summary">{_text(c.summary)}</pre>'
                     + (f"<p>The board at this compaction:</p>{board_svg(c.board, f'board-{c.number}')}"
                        if c.board is not None else "") + "</li>")
    cleared = [f'<li>Before call {c.before_call}: {c.count} old tool result{"s" * (c.count != 1)} '
               f'(or inputs) became placeholders (about {_n(c.tokens)} tokens freed)</li>' for c in record.clearings]
    html_ = ""
    if items:
        html_ += f'<h2>Compactions</h2><ol class="compactions">{"".join(items)}</ol>'
    if cleared:
        html_ += f'<h2>Layer 1 clearings</h2><ul>{"".join(cleared)}</ul>'
    return html_


def _tool_table(record: SessionRecord) -> str:
    if not record.tools:
        return "<h2>Tool calls</h2><p class=\"note\">No tool calls.</p>"
    rows = []
    for n, t in enumerate(record.tools, 1):
        lines = t.output.splitlines() or [""]
        if len(lines) > PREVIEW_LINES:
            lines = lines[:PREVIEW_LINES - 1] + [f"… ({len(lines) - PREVIEW_LINES + 1} more lines)"]
        mark = '<span class="err">error</span> ' if t.is_error else ""
        rows.append(f'<tr class="{"error" if t.is_error else "ok"}"><td>{n}</td><td>{t.after_call}</td>'
                    f'<td><code>{_text(t.name)}</code></td><td><code>{_text(t.args)}</code></td>'
                    f'<td>{mark}<pre>{_text(chr(10).join(lines))}</pre></td></tr>')
    more = (f'<p class="note">… and {record.tools_left_out:,} more tool calls not recorded.</p>'
            if record.tools_left_out else "")
    return ('<h2>Tool calls, in order</h2><table class="tools"><thead><tr><th>#</th><th>call</th>'
            '<th>tool</th><th>arguments</th><th>result</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>" + more)


def render(record: SessionRecord) -> str:
    """The whole page as one string: CSS inline, SVG inline, no script."""
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.started))
    board = (f"<h2>The board at the end</h2>{board_svg(record.final_board, 'board-end')}"
             if record.final_board is not None else "")
    problems = (f'<h2>Not recorded</h2><ul>{"".join(f"<li>{_text(p)}</li>" for p in record.problems)}</ul>'
                if record.problems else "")
    boards = record.final_board is not None or any(c.board is not None for c in record.compactions)
    key = BOARD_KEY if boards else ""
    chart = _chart(record) if record.calls else '<p class="note">No model calls.</p>'
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
            f'style-src \'unsafe-inline\'"><meta name="color-scheme" content="light dark">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{_text(record.lesson or "session")} · {_text(started)}</title>'
            f'<style>{CSS}</style></head><body>\n'
            f'<h1>{_text(record.lesson or "session")} <small>{_text(started)}</small></h1>'
            f'<p class="totals">{_summary_line(record)}</p>\n{LEGEND}\n{key}'
            f'<div class="scroll">{chart}</div>\n{_events(record)}\n{board}\n{_tool_table(record)}\n'
            f'{problems}</body></html>\n')


def write_page(record: SessionRecord, folder: Path = TRANSCRIPTS) -> Path:
    """Write the page as folder/session_<time>.html and return its path. Raises OSError."""
    return _write_new(Path(folder), f"session_{time.strftime('%Y%m%d-%H%M%S')}", render(record))


def _write_new(folder: Path, stem: str, text: str) -> Path:
    """Atomically: a temporary file, then a hard link to a free name (never replacing a page)."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".session-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        for n in range(1, 1000):
            path = folder / (f"{stem}.html" if n == 1 else f"{stem}_{n}.html")
            try:
                os.link(tmp, path)           # fails if the name is taken: no page is overwritten
                return path
            except FileExistsError:
                continue
            except OSError:                  # a file system without hard links: replace if still free
                if not path.exists():
                    os.replace(tmp, path)
                    return path
        raise OSError(f"too many session pages named {stem}*")
    finally:
        Path(tmp).unlink(missing_ok=True)


def end_of_run(recorder: Recorder = RECORD, folder: Path = TRANSCRIPTS) -> Optional[Path]:
    """At the end of a run: the last board, the page, and one line saying where it is (or why not)."""
    from harness.errors import reason
    from harness.terminal import show_note
    if not recorder.data.calls:
        return None                          # nothing happened: leave no file behind, read no board
    recorder.finish()
    try:
        path = write_page(recorder.data, folder)
    except OSError as exc:
        show_note(f"[no session page: cannot write in {folder}/ ({reason(exc)})]")
        return None
    except Exception as exc:  # noqa: BLE001 - a bug in the page must not end the run with a traceback
        show_note(f"[no session page: {type(exc).__name__}: {exc}]")
        return None
    show_note(f"[session page: {path} (open it in a browser)]")
    return path


CSS = """
:root { --fg: #1d2330; --bg: #ffffff; --muted: #5b6475; --grid: #e3e6ec; --panel: #f5f6f8;
  --read: #3b75af; --written: #ef8a17; --uncached: #d0413e; --output: #55a868;
  --threshold: #8e44ad; --compaction: #2a9d8f; --cleared: #b8860b; --err: #c0392b;
  --pending: #f5f6f8; --in_progress: #dbe9f8; --completed: #dff3e2; --missing: #fdecea; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6e9ef; --bg: #15181e; --muted: #9aa3b2; --grid: #2c323c; --panel: #1f232b;
    --read: #6fa8dc; --written: #f6b26b; --uncached: #e67c73; --output: #93c47d;
    --threshold: #c39bd3; --compaction: #5fd3c4; --cleared: #f1c232; --err: #ff7b6e;
    --pending: #262b34; --in_progress: #1f3550; --completed: #1f3b27; --missing: #4a2424; } }
body { font: 15px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg);
  margin: 1.5em auto; max-width: 1200px; padding: 0 1em; }
h1 small { color: var(--muted); font-weight: normal; font-size: 60%; }
h2 { font-size: 1.1em; margin-top: 1.8em; }
.totals, .note { color: var(--muted); }
.scroll { overflow-x: auto; }
svg { overflow: visible; }
svg text { fill: var(--fg); font: 12px system-ui, sans-serif; }
svg text.axis { fill: var(--muted); }
.grid { stroke: var(--grid); }
.read, .swatch.read { fill: var(--read); background: var(--read); }
.written, .swatch.written { fill: var(--written); background: var(--written); }
.uncached, .swatch.uncached { fill: var(--uncached); background: var(--uncached); }
.output, .swatch.output { fill: var(--output); background: var(--output); }
.summary-call rect { stroke: var(--compaction); stroke-width: 2; }
.threshold polyline { fill: none; stroke: var(--threshold); stroke-width: 2; stroke-dasharray: 6 4; }
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
pre { white-space: pre-wrap; word-break: break-word; margin: 0; font-size: 12px; }
pre.summary { background: var(--panel); padding: 0.6em 0.8em; border-radius: 6px; margin: 0.4em 0; }
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
.board text.status { fill: var(--muted); }
.board .blocks, .board .blocked { fill: none; stroke: var(--muted); stroke-width: 1.5; }
.board .blocked { stroke-dasharray: 5 4; opacity: 0.7; }
.board .head { fill: var(--muted); }
li { margin-bottom: 0.6em; }
"""
