"""/context and /cost: what fills the context now, and what the session has cost. No model call.

Relied on by the REPL of all three lessons: cli's /context calls print_context with the
lesson's system prompt, tools and view (s06 and s07: layer 1's, and their ContextSize), and its
/cost calls cost_report. Both read the run's record (recorder.py); a request is sorted and
counted with blocks.py, as the session page does. Without each piece:
- context_report: a learner cannot see that tool results, not their own words, fill the
  window, how much the cache holds, how far layer 2 is, and how much of the window is free.
  Its total is the one layer 2 compares with COMPACT_THRESHOLD, and `[compacted: A → ~B]` and
  the page give: the API's count for the last call plus an estimate of what came since, or
  tokens.request (marked ~) where no count covers this history.
- the bars as wide as the terminal allows (terminal.width), their words on a line of their
  own: an 80-column terminal broke them mid-bar. One width for all, so the cache's ^ stand
  under the prefix they hold.
- cost_report: what caching saved stays a claim, the 1.25x write premium hidden, and a summary
  the API wrote (--api-context compact) mixed with the loop's calls.
- in_charge: /context and /cost would not say whether the harness's layers or the API
  (--api-context) manage the context; with the API, /context measures against its trigger.
- money: /cost and the page would give tokens only. It prices the session at config.price()
  (none for another model: it would be made up), naming the price and its source, in one
  place so that the two never disagree.
"""

import sys
import textwrap
from typing import Optional

from harness import config, terminal, tokens
from harness.session import blocks
from harness.session.recorder import SUMMARY_BY_API, Recorder, SessionRecord

LABEL = 17                   # columns of a /context row's label: "  what fills it  "
WRITE_PRICE, READ_PRICE = 1.25, 0.1   # cache writes and reads, as multiples of the input price


def _bar(parts: list, total: int, columns: int) -> str:
    """One letter per column: the kind found at that point of the request."""
    cells, edges, running = [], [], 0
    for kind, size in parts:
        running += size
        edges.append((running, blocks.KINDS[kind][0]))
    for col in range(columns):
        point = (col + 0.5) * total / columns
        cells.append(next((letter for edge, letter in edges if edge > point), edges[-1][1]))
    return "".join(cells)


def _row(label: str, said: str, columns: int) -> str:
    """A row of /context: its label, then what it says, wrapped under the label's column."""
    return textwrap.fill(said, columns, initial_indent=f"  {label:<{LABEL - 2}}",
                         subsequent_indent=" " * LABEL, break_on_hyphens=False)


def _bar_row(label: str, cells: str) -> str:
    """A row of /context that is a bar: its label, then the bar, never wrapped."""
    return f"  {label:<{LABEL - 2}}[{cells}]"


def context_report(system: str, tools: list, view_messages: list, threshold: Optional[int],
                   cached_tokens: Optional[int], reported_tokens: Optional[int],
                   reported_covers: Optional[int] = None, window: Optional[int] = None,
                   columns: int = terminal.PLAIN_WIDTH, in_charge: Optional[str] = None,
                   api=None) -> str:
    """/context: what the next request would send, by kind, against COMPACT_THRESHOLD (with
    api, --api-context's Setting: the API's trigger), the cache and the model's window, in
    `columns`. reported_tokens: the API's count for the first reported_covers messages (None:
    all); the rest, and every row, estimated (~). in_charge: which manages the context."""
    bar = columns - LABEL - 2                    # the brackets
    parts = [("tools", tokens.estimate(tools)), ("system", tokens.estimate(system)),
             *blocks.message_parts(view_messages)]     # in the order of the request
    estimate = sum(t for _, t in parts)
    covers = len(view_messages) if reported_covers is None else reported_covers
    counted = bool(reported_tokens) and covers <= len(view_messages)
    if counted:
        since = tokens.estimate(view_messages[covers:])
        total = reported_tokens + since
        how = f"the API's count for the last call{f' + ~{since:,} since' if since else ''}"
        shown = f"{total:,}"
    else:
        total = tokens.request(system, tools, view_messages)
        how = "estimated: no API count for this context yet"
        shown = f"~{total:,}"
    if api is None:
        limit = _threshold_line(threshold, total, bar, columns)
    elif threshold is not None and threshold < api.trigger:     # the API never acts: layer 2
        limit = _threshold_line(threshold, total, bar, columns, "layer 2 at", "layer 2 compacts")
    else:
        limit = _threshold_line(api.trigger, total, bar, columns,
                                f"--api-context {api.mode} at", api.acts)
    lines = [f"context now: {shown} tokens ({how})",
             _bar_row("what fills it", _bar(parts, estimate or 1, bar)),
             in_charge and _row("in charge", in_charge, columns),
             _cache_line(cached_tokens, total, bar, columns), limit,
             _window_line(window, total, bar, columns)]
    sums = {kind: sum(t for k, t in parts if k == kind) for kind in blocks.KINDS}
    for kind, (letter, name) in _kinds_of(tools, threshold, sums).items():
        share = f"{sums[kind] / estimate:.0%}" if estimate else "0%"
        lines.append(f"    {letter} {name:<22} {'~' + format(sums[kind], ','):>9}  {share:>4}")
    if counted and api is not None and api.mode == "clear" and api.cleared:
        # The headline is the API's count of what the server read; the rows, what is sent.
        results = terminal.plural(api.cleared, "old tool result")
        lines.append(textwrap.fill(f"the rows are what the harness sends, whole: the API "
                                   f"cleared {results} of it on the server, so its count is "
                                   "less", columns, initial_indent="  ",
                                   subsequent_indent="    "))
    lines.append(textwrap.fill(f"~ an estimate, about {tokens.CHARS_PER_TOKEN} characters a "
                               "token · ^ the prefix the cache holds, read at 0.1x if the next "
                               "request starts the same · no model call was made", columns,
                               initial_indent="  ", subsequent_indent="    "))
    return "\n".join(line for line in lines if line)


def _kinds_of(tools: list, threshold: Optional[int], sums: dict) -> dict:
    """The kinds worth a row: not one this lesson never sends and that is not here. Without a
    threshold (s03) nothing is cleared; only a lesson with task_list (s07) has a board."""
    kinds = dict(blocks.KINDS)
    if threshold is None and not sums["cleared"]:
        del kinds["cleared"]
    if not sums["board"] and not any(isinstance(t, dict) and t.get("name") == "task_list"
                                     for t in tools or []):
        del kinds["board"]
    return kinds


def _cache_line(cached: Optional[int], total: int, bar: int, columns: int) -> str:
    """The prefix the cache holds, under the letters of the request it is the start of."""
    if cached is None:
        return _row("in the cache", "unknown: no model call yet for this history, or the "
                    "cache has expired (5 minutes)", columns)
    shown = min(cached, total)
    cols = round(bar * shown / total) if total else 0
    share = f"{shown / total:.0%}" if total else "0%"
    why = (" (the prefix is below the model's minimum for caching, or it changed)" if not cached
           else ", the last call's prefix")
    cells = "^" * cols + " " * (bar - cols)
    return "\n".join([_bar_row("in the cache", cells),
                      _row("", f"{cached:,} tokens ({share}){why}", columns)])


def _threshold_line(threshold: Optional[int], total: int, bar: int, columns: int,
                    name: str = "COMPACT_THRESHOLD", acts: str = "layer 2 compacts") -> str:
    if threshold is None:
        return _row("threshold", "none: this lesson does not compact (s06 does)", columns)
    span = max(threshold, total)
    used = round(bar * total / span)
    mark = min(round(bar * threshold / span), bar - 1)
    cells = ["#" if col < used else "·" for col in range(bar)]
    cells[mark] = "|"
    if total > threshold:
        where = f"over it by {total - threshold:,}: {acts} before the next call"
    else:
        where = f"{threshold - total:,} to go before {acts}"
    return "\n".join([_bar_row("threshold", "".join(cells)),
                      _row("", f"{name} {threshold:,}: {where}", columns)])


def _window_line(window: Optional[int], total: int, bar: int, columns: int) -> str:
    """The model's window, as Claude Code's /context shows it: used of the window, and free."""
    if not window:
        return ""
    used = min(round(bar * total / window), bar)
    cells = "#" * used + "·" * (bar - used)
    if total > window:
        free = f"over it by {total - window:,}: the API refuses a request this long"
    else:
        free = f"{window - total:,} free ({(window - total) / window:.1%})"
    return "\n".join([_bar_row("window", cells),
                      _row("", f"{total:,} of {window:,} tokens used ({total / window:.1%}), "
                           f"{free}", columns)])


def print_context(recorder: Recorder, system: str, tools: list, view: list,
                  context: object = None, run=None) -> None:
    """/context in a lesson's REPL, as wide as the terminal. view: what the harness would send
    (s06 and s07: after layer 1); context: s06's ContextSize, or None (s03: no threshold, the
    count from the record); run: says which manages the context, and with --api-context what
    the next request sends of view."""
    api = run.api_context if run is not None else None
    sent = view if api is None else api.view(view)
    # The API's count covers messages of the history: less those the API drops (before its
    # summary), which .seen counts.
    dropped = len(view) - len(sent)
    if context is None:
        threshold = None
        reported, covers = recorder.context_tokens(), recorder.context_covers()
    else:
        threshold = context.threshold() if callable(context.threshold) else context.threshold
        reported, covers = context.reported, context.seen - dropped
    charge = in_charge(run) if run is not None else None
    report = context_report(system, tools, sent, threshold, recorder.cached_tokens(), reported,
                            covers, config.context_window(), terminal.width(sys.stdout),
                            charge, api)
    terminal.show_out(report)


# ---------------------------------------------------------------- /cost

def cost_report(record: SessionRecord, price: Optional[config.Price] = None,
                in_charge: Optional[str] = None) -> str:
    """/cost: the session's tokens as the API bills them, without caching, and in money at
    `price` (config.price()); in_charge: which manages the context."""
    calls = record.calls
    summaries = sum(c.is_summary for c in calls)
    by_api = sum(c.label == SUMMARY_BY_API for c in calls)
    uncached, written, read, sent, billed = _input(record)
    output = record.totals["out"]
    split = f" ({len(calls) - summaries} in the loop, {summaries} summary)" if summaries else ""
    if by_api:
        split = split.replace(" summary)", f" summary: {by_api} written by the API)")
    lines = [f"session so far: {terminal.plural(len(calls), 'model call')}{split}",
             in_charge and f"  context managed by {in_charge}",
             f"  input            {sent:>10,} tokens",
             f"    uncached       {uncached:>10,}  x1    = {uncached:>12,.0f}",
             f"    to the cache   {written:>10,}  x1.25 = {WRITE_PRICE * written:>12,.0f}",
             f"    from the cache {read:>10,}  x0.1  = {READ_PRICE * read:>12,.0f}",
             f"  billed as {billed:,.0f} input tokens; without caching {sent:,} "
             f"({_saving(billed, sent)})",
             f"  output           {output:>10,} tokens"]
    priced = money(record, price) if price is not None else ""
    if priced:                         # the money, then which price it was and from where
        lines += [f"  price: {priced}", f"    {price.said}"]
    elif price is not None:            # none: the words say why, and how to set one
        lines.append(f"  price: {price.said}")
    return "\n".join(line for line in lines if line)


def _input(record: SessionRecord) -> tuple:
    """The session's input tokens: uncached, written to the cache, read from it, all sent,
    and billed (the 1.25x and 0.1x applied), as the API bills them."""
    totals = record.totals
    uncached, written, read = totals["fresh"], totals["written"], totals["read"]
    billed = uncached + WRITE_PRICE * written + READ_PRICE * read
    return uncached, written, read, record.input_tokens, billed


def money(record: SessionRecord, price: config.Price) -> str:
    """The session at `price`, for /cost and the page: total = input (without caching) +
    output when both are priced, else the one that is; "" when neither is."""
    _, _, _, sent, billed = _input(record)
    output = record.totals["out"]
    unit, parts = price.unit, []
    if price.input is not None:
        parts.append(f"input {unit}{billed * price.input / 1e6:,.4f} "
                     f"(without caching {unit}{sent * price.input / 1e6:,.4f})")
    if price.output is not None:
        parts.append(f"output {unit}{output * price.output / 1e6:,.4f}")
    if len(parts) < 2:
        return "".join(parts)
    total = (billed * price.input + output * price.output) / 1e6
    return f"{unit}{total:,.4f} = " + " + ".join(parts)


def _saving(billed: float, sent: int) -> str:
    if not sent:
        return "nothing sent yet"
    change = 1 - billed / sent
    if change >= 0:
        return f"caching saved {change:.0%}"
    return f"caching cost {-change:.0%} more: cache writes are billed at 1.25x"


def in_charge(run) -> Optional[str]:
    """Which manages the context, for /context and /cost; None for a lesson without layers."""
    if run.api_context is not None:
        return run.api_context.describe()
    if run.recorder.data.current_threshold is None:
        return None
    return "the harness's layers 1 and 2 (without --api-context)"
