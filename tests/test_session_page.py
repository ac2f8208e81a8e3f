"""The session page, /context and /cost, on synthetic sessions: what a learner sees must be true."""

import re
from html.parser import HTMLParser
from types import SimpleNamespace

import pytest

from harness.errors import SetupError
from harness.session.page import end_of_run, render, write_page
from harness.session.record import Recorder
from harness.session.views import context_report, cost_report, prices_from_env

HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>\x1b[31m\x00\u202e\ud800'


def usage(uncached=0, read=0, written=0, out=0):
    return SimpleNamespace(input_tokens=uncached, cache_read_input_tokens=read,
                           cache_creation_input_tokens=written, output_tokens=out)


def task(tid, subject, status="pending", blocked=(), owner=None):
    return {"id": tid, "subject": subject, "status": status, "blockedBy": list(blocked), "owner": owner}


BOARD = {1: {**task(1, "Design the data model", "completed", owner="demo"), "unblocked": [2, 3]},
         2: task(2, "Implement the API", "in_progress", owner="alice"),   # #1 was cleared from both
         3: task(3, "Write the docs"), 4: task(4, "Write the API tests", blocked=[2]),
         5: task(5, "Dropped idea", "deleted")}


def synthetic_record(subject="Write the API tests", summary="Summary: planned four tasks.", output="ok"):
    """Six calls: layer 1 clears before call 3, call 4 is a summary that compacts, the board at both."""
    rec = Recorder()
    rec.reset("s07_task_system")
    board = {**BOARD, 4: {**BOARD[4], "subject": subject}}
    rec.watch_board(lambda: board)
    rec.threshold(9_000)
    rec.call(usage(uncached=1_000, out=50))
    rec.tool("bash", {"command": "seq 1 5000"}, "1 2 3 " * 900, False)
    rec.call(usage(read=1_000, written=6_000, out=40))
    rec.tool("read_file", {"path": "missing.txt"}, "ValueError: missing.txt: no such file", True)
    rec.cleared(2, 6_500)
    rec.call(usage(uncached=2_600, out=30))
    rec.call(usage(read=2_500, written=200, out=300), "summary call tokens")
    rec.compacted(9_400, 350, summary, ".transcripts/transcript_1.jsonl")
    rec.call(usage(uncached=600, out=20))
    rec.tool("task_list", {}, output, False)
    rec.call(usage(read=500, written=150, out=10))
    rec.finish()                                     # as end_of_run does: the board at the end
    return rec


class Elements(HTMLParser):
    """Every start tag with its attributes, and all text, as a browser's parser would see them."""

    def __init__(self, page):
        super().__init__(convert_charrefs=True)
        self.tags, self.text = [], []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)

    def having(self, tag, cls=None, **attrs):
        return [a for t, a in self.tags if t == tag and (cls is None or cls in a.get("class", "").split())
                and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]


def parsed(rec):
    return Elements(render(rec.data))


# ---------------------------------------------------------------- the chart

def test_one_bar_per_model_call_stacked_in_the_order_of_the_request():
    page = parsed(synthetic_record())
    bars = page.having("g", "call")
    assert [b["data-call"] for b in bars] == [str(n) for n in range(1, 7)]
    rects = [(t, a) for t, a in page.tags if t == "rect" and a.get("class") in
             ("read", "written", "uncached", "output")]
    assert [a["class"] for _, a in rects[2:5]] == ["read", "written", "output"]  # call 2; no uncached
    heights = {a["class"]: float(a["height"]) for _, a in rects[2:5]}
    assert heights["written"] == pytest.approx(6 * heights["read"], rel=0.01)   # 6,000 vs 1,000 tokens
    assert [b["data-call"] for b in page.having("g", "summary-call")] == ["4"]


def test_the_marks_sit_at_the_right_calls_and_the_summary_is_readable_from_its_mark():
    summary = "Summary: planned four tasks; next, finish the data model."
    page = parsed(synthetic_record(summary=summary))
    assert [m["data-call"] for m in page.having("g", "cleared")] == ["3"]      # cleared building call 3
    (mark,) = page.having("a", "compaction")
    assert mark["data-call"] == "4" and mark["href"] == "#compaction-1"      # made by the summary call
    assert page.having("li", id="compaction-1")
    assert sum(summary in t for t in page.text) >= 2                         # the tooltip and the list
    assert any("COMPACT_THRESHOLD 9,000" in t for t in page.text) and page.having("polyline")


def test_a_threshold_far_above_every_bar_is_named_instead_of_flattening_them():
    rec = Recorder()
    rec.threshold(50_000)
    rec.call(usage(uncached=1_000, out=100))
    page = parsed(rec)
    assert not page.having("polyline") and any("50,000 ↑" in t for t in page.text)
    bar = [float(a["height"]) for t, a in page.tags if t == "rect" and a.get("class") in ("uncached", "output")]
    assert len(bar) == 2 and sum(bar) > 200                                  # most of the 280 px plot


# ---------------------------------------------------------------- the board

def test_the_board_is_a_graph_of_live_tasks_and_blockers_at_the_compaction_and_at_the_end():
    page = parsed(synthetic_record())
    boards = page.having("svg", "board")
    assert len(boards) == 2                                                  # at compaction 1, at the end
    nodes = page.having("g", "task")
    assert sorted({n["data-task"] for n in nodes}) == ["1", "2", "3", "4"]   # #5 was deleted
    assert {n["data-task"]: n["class"] for n in nodes[:4]}["2"] == "task in_progress"
    arrows = {(a["data-from"], a["data-to"]) for a in page.having("path", "blocks")}
    assert arrows == {("2", "4")}                                            # waiting now
    done = {(a["data-from"], a["data-to"]) for a in page.having("path", "blocked")}
    assert done == {("1", "2"), ("1", "3")}                                  # until #1 was completed
    assert any("in progress · alice" in t for t in page.text)


def test_columns_follow_dependency_depth_and_a_hand_made_cycle_or_missing_blocker_still_draws():
    rec = Recorder()
    rec.call(usage(uncached=10))
    rec.board({1: task(1, "a"), 2: task(2, "b", blocked=[1]), 3: task(3, "c", blocked=[2]),
               7: task(7, "loop", blocked=[8]), 8: task(8, "back", blocked=[7]), 9: task(9, "x", blocked=[42]),
               10: {**task(10, "done", "completed"), "unblocked": [11]}, 11: task(11, "freed")})
    page = Elements(render(rec.data))
    x = {}
    for tag, attrs in page.tags:
        if tag == "g" and "task" in attrs.get("class", ""):
            current = attrs["data-task"]
        elif tag == "rect" and "rx" in attrs:
            x[current] = float(attrs["x"])
    assert x["1"] < x["2"] < x["3"]
    assert x["10"] < x["11"]                                                 # a finished blocker keeps its place
    assert {"7", "8", "9", "42"} <= set(x)                                   # 42: not on the board, drawn
    assert [n["data-task"] for n in page.having("g", "missing")] == ["42"]


# ---------------------------------------------------------------- escaping

def test_hostile_text_is_shown_as_text_never_markup():
    rec = synthetic_record(subject=HOSTILE, summary=HOSTILE, output=HOSTILE)
    rec.tool(HOSTILE, {HOSTILE: HOSTILE}, HOSTILE, True)
    rec.data.lesson = HOSTILE
    page_text = render(rec.data)
    page = Elements(page_text)
    allowed = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "small", "p", "span", "div",
               "svg", "g", "rect", "text", "line", "polyline", "path", "circle", "a", "defs", "marker",
               "ol", "ul", "li", "b", "code", "pre", "table", "thead", "tbody", "tr", "th", "td"}
    assert {t for t, _ in page.tags} <= allowed                              # no script, no img
    assert not [k for _, a in page.tags for k in a if k.startswith("on")]
    shown = "".join(page.text)
    assert "<script>alert(1)</script>\"><img src=x onerror=alert(2)>" in shown   # as text
    assert "\\x1b[31m\\x00\\u202e\\ud800" in shown                            # controls made visible
    assert not re.search("[\x00-\x08\x0b\x1b\u202e]", page_text)
    page_text.encode("utf-8")                                                 # no lone surrogate left
    assert "default-src 'none'" in page_text                                  # and no script would run


# ---------------------------------------------------------------- writing the page

def test_pages_are_written_whole_and_never_overwrite_each_other(tmp_path):
    rec = synthetic_record()
    first, second = write_page(rec.data, tmp_path / "t"), write_page(rec.data, tmp_path / "t")
    assert first != second and first.name.startswith("session_") and first.suffix == ".html"
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == sorted([first.name, second.name])
    assert first.read_text(encoding="utf-8") == render(rec.data)


def test_end_of_run_names_the_page_writes_none_without_calls_and_explains_a_failure(tmp_path, capsys):
    assert end_of_run(Recorder(), tmp_path / "none") is None and not (tmp_path / "none").exists()
    path = end_of_run(synthetic_record(), tmp_path / "pages")
    assert f"[session page: {path}" in capsys.readouterr().err
    (tmp_path / "blocked").write_text("a file in the way")
    assert end_of_run(synthetic_record(), tmp_path / "blocked") is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no session page: cannot write in" in err and "Traceback" not in err


def test_the_recorder_never_raises_into_the_lesson_and_says_what_it_missed():
    rec = Recorder()
    rec.call(SimpleNamespace(input_tokens="lots"))
    rec.board({1: {"subject": "no id"}})
    rec.tool("bash", object(), object(), False)              # odd arguments are shown, not fatal
    rec.watch_board(lambda: 1 / 0)
    rec.compacted(10, 5, "s", "t.jsonl")
    assert len(rec.data.problems) == 3 and rec.data.tools
    page = Elements(render(rec.data))
    assert any("the board could not be read: ZeroDivisionError" in t for t in page.text)


# ---------------------------------------------------------------- /context

def compacted_history():
    board = "<task-board>\n" + "[ ] #1: Design the data model\n" * 20 + "</task-board>"
    return [{"role": "user", "content": f"[compacted] Summary: work so far.\n\n{board}"},
            {"role": "assistant", "content": [{"type": "text", "text": "Reading."},
                                              {"type": "tool_use", "id": "t1", "name": "bash",
                                               "input": {"command": "cat big.txt"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x" * 4000},
                                         {"type": "tool_result", "tool_use_id": "t0",
                                          "content": "[Previous: used bash]"}]}]


def row(report, name):
    line = next(line for line in report.splitlines() if f" {name} " in line)
    return int(re.search(r"~([\d,]+)", line)[1].replace(",", ""))


def test_context_shows_each_kind_the_threshold_and_marks_estimates():
    history = compacted_history()
    tools = [{"name": "bash", "description": "Run a shell command. " * 20}]   # ~110 tokens
    report = context_report("You are a coding agent. " * 10, tools, history, 1_000, None, None)
    assert "~ estimated: no API count" in report
    assert 1_000 <= row(report, "tool results") <= 1_050                     # 4,000 characters
    assert 0 < row(report, "cleared placeholders") < 40
    assert 150 < row(report, "the board") < 200                              # ~620 characters of board
    assert row(report, "text") < 40                                          # the board is not text
    assert "over it by" in report and "in the cache   unknown" in report
    bar = re.search(r"what fills it  \[(.*)\]", report)[1]
    assert bar.index("T") < bar.index("S") < bar.index("b") < bar.index("r")  # the order of the request
    assert bar.count("r") > 30 * bar.count("p")


def test_context_has_no_row_for_what_the_lesson_never_sends():
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    s03 = context_report("", [{"name": "bash"}], history, None, None, None)
    assert " cleared placeholders " not in s03 and " the board " not in s03 and " tool results " in s03
    s06 = context_report("", [{"name": "bash"}], history, 50_000, None, None)
    assert row(s06, "cleared placeholders") == 0 and " the board " not in s06
    s07 = context_report("", [{"name": "bash"}, {"name": "task_list"}], history, 50_000, None, None)
    assert row(s07, "cleared placeholders") == 0 and row(s07, "the board") == 0


def test_context_counts_a_cleared_write_as_a_placeholder_not_as_a_call():
    from harness import layer1
    call = {"type": "tool_use", "id": "t0", "name": "write_file", "input": {"path": "a.py", "content": "x" * 4000}}
    history = [{"role": "user", "content": "go"}, {"role": "assistant", "content": [call]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0", "content": "ok"}]}]
    cleared = layer1.clear_inputs(history, {"t0"})
    report = context_report("", [], cleared, 50_000, None, None)
    assert row(report, "cleared placeholders") > 10 and row(report, "tool calls") == 0
    assert row(context_report("", [], history, 50_000, None, None), "tool calls") > 1_000


def test_context_uses_the_apis_count_where_known_and_shows_the_cached_prefix():
    history = compacted_history()
    report = context_report("", [], history, 50_000, 1_500, 2_000, reported_covers=2)
    since = re.search(r"context now: ([\d,]+) tokens \(the API's count for the last call \+ ~([\d,]+) since",
                      report)
    assert since and int(since[1].replace(",", "")) == 2_000 + int(since[2].replace(",", ""))
    assert f"{50_000 - int(since[1].replace(',', '')):,} tokens to go" in report
    cache = re.search(r"in the cache   \[(\^*) *\] 1,500 tokens", report)
    assert cache and abs(len(cache[1]) - round(60 * 1_500 / int(since[1].replace(",", "")))) <= 1
    assert "none: this lesson does not compact" in context_report("", [], history, None, None, None)


# ---------------------------------------------------------------- /cost

def test_cost_splits_the_input_and_prices_it_only_when_asked():
    rec = synthetic_record()
    calls = rec.data.calls
    uncached, read, written = (sum(c.uncached for c in calls), sum(c.cache_read for c in calls),
                               sum(c.cache_written for c in calls))
    billed, sent = uncached + 1.25 * written + 0.1 * read, uncached + read + written
    report = cost_report(rec.data)
    assert "6 model calls (5 in the loop, 1 summary)" in report
    assert f"billed as {billed:,.0f} input tokens; without caching {sent:,}" in report
    assert f"caching saved {1 - billed / sent:.0%}" in report
    assert not re.search(r"\d\.\d{4}", report) and "set PRICE_PER_MTOK" in report
    priced = cost_report(rec.data, 3.0, 15.0)
    out = sum(c.output for c in calls)
    assert f"input {billed * 3 / 1e6:,.4f} (without caching {sent * 3 / 1e6:,.4f})" in priced
    assert f"total {(billed * 3 + out * 15) / 1e6:,.4f}" in priced


@pytest.mark.parametrize("value", ["three", "-1", "nan", "inf", "1e999"])
def test_a_bad_price_is_one_clear_line(monkeypatch, value):
    monkeypatch.setenv("PRICE_PER_MTOK", value)
    with pytest.raises(SetupError, match="PRICE_PER_MTOK must be a price per million input tokens"):
        prices_from_env()


def test_prices_come_from_the_environment_and_are_absent_by_default(monkeypatch):
    monkeypatch.delenv("PRICE_PER_MTOK", raising=False)
    monkeypatch.setenv("PRICE_PER_MTOK_OUT", " 15 ")
    assert prices_from_env() == (None, 15.0)


def test_the_cost_matches_what_the_stand_in_api_bills():
    """The same usage, read by the real client: /cost adds it up as the API's documented prices do."""
    anthropic = pytest.importorskip("anthropic")
    from harness.stand_in_api import StandInAPI, reply, text
    rec = Recorder()
    big = "notes " * 1_500                          # above the caching minimum, so the cache is used
    with StandInAPI([reply(text("one")), reply(text("two")), reply(text("three"))]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        messages = [{"role": "user", "content": big}]
        for _ in range(3):
            answer = client.messages.create(model="m", max_tokens=50, messages=messages,
                                            cache_control={"type": "ephemeral"})
            rec.call(answer.usage)
            messages += [{"role": "assistant", "content": answer.content[0].text},
                         {"role": "user", "content": "go on"}]
    bill = api.billing()
    assert bill["cache_read"] > 0                   # the comparison covers all three kinds of input
    report = cost_report(rec.data)
    assert f"billed as {bill['billed_input']:,.0f} input tokens; without caching {bill['input_sent']:,}" in report
    assert re.search(r"output +([\d,]+) tokens", report)[1] == f"{bill['output']:,}"
