"""The session page on synthetic sessions: what a learner sees there must be true."""

import re
from types import SimpleNamespace

import pytest

from harness import config
from harness.session import views
from harness.session.page import end_of_run, render, write_page
from harness.session.recorder import Recorder
from helpers import HOSTILE, Elements, messages, synthetic_record, usage, words


def parsed(rec):
    return Elements(render(rec.data))


# ---------------------------------------------------------------- the chart

def test_one_bar_per_model_call_stacked_in_the_order_of_the_request():
    page = parsed(synthetic_record())
    bars = page.having("g", "call")
    assert [b["data-call"] for b in bars] == [str(n) for n in range(1, 7)]
    rects = [(t, a) for t, a in page.tags if t == "rect" and a.get("class") in
             ("read", "written", "uncached", "output")]
    assert [a["class"] for _, a in rects[2:5]] == ["read", "written", "output"]  # call 2
    heights = {a["class"]: float(a["height"]) for _, a in rects[2:5]}
    assert heights["written"] == pytest.approx(6 * heights["read"], rel=0.01)   # 6,000 vs 1,000
    assert [b["data-call"] for b in page.having("g", "summary-call")] == ["4"]


def test_the_marks_sit_at_the_right_calls_and_the_summary_is_readable_from_its_mark():
    summary = "Summary: planned four tasks; next, finish the data model."
    page = parsed(synthetic_record(summary=summary))
    assert [m["data-call"] for m in page.having("g", "cleared")] == ["3"]   # building call 3
    # Its tooltip names that call (it said "in 1 batches, before calls 3 to 3").
    assert any(t.startswith("layer 1, before call 3: ") for t in page.text)
    (mark,) = page.having("a", "compaction")
    assert mark["data-call"] == "4" and mark["href"] == "#compaction-1"   # by the summary call
    assert page.having("li", id="compaction-1")
    assert sum(summary in t for t in page.text) >= 2                      # tooltip and list
    assert any("COMPACT_THRESHOLD 9,000" in t for t in page.text) and page.having("polyline")


def test_a_clearing_before_a_call_that_got_no_reply_is_drawn_inside_the_chart():
    """Layer 1 cleared a batch, then the call failed: its ▲ sat past the last bar, outside the
    chart, its tooltip naming a call the page has not."""
    rec = Recorder("s06_compact")
    for _ in range(3):
        rec.call(usage(uncached=1_000, out=50))
    rec.cleared(4, 6_000)                                   # building call 4, which failed
    page = parsed(rec)
    (mark,) = page.having("g", "cleared")
    (svg,) = page.having("svg", "chart")
    right = float(svg["viewbox"].split()[2])        # a parser lowers the name
    path = next(a["d"] for t, a in page.tags if t == "path" and a.get("d", "").startswith("M"))
    x = float(path[1:].split(",")[0])
    assert mark["data-call"] == "4" and x < right - 24
    assert any("before call 4, which got no reply" in t for t in page.text)


def test_a_threshold_far_above_every_bar_is_named_instead_of_flattening_them():
    rec = Recorder()
    rec.threshold(50_000)
    rec.call(usage(uncached=1_000, out=100))
    page = parsed(rec)
    assert not page.having("polyline") and any("50,000 ↑" in t for t in page.text)
    bar = [float(a["height"]) for t, a in page.tags
           if t == "rect" and a.get("class") in ("uncached", "output")]
    assert len(bar) == 2 and sum(bar) > 200                      # most of the 280-unit plot


def long_session(calls):
    """calls model calls whose inputs rise and fall; layer 1 clears before every 8th, a
    summary every 60th compacts; one call in 100 is ten times as big (a spike)."""
    rec = Recorder("s06_compact")
    rec.threshold(50_000)
    for number in range(1, calls + 1):
        if number % 8 == 0:
            rec.cleared(3, 9_000)
        size = 1_000 * (number % 60 + 1) * (10 if number % 100 == 37 else 1)
        label = "summary call" if number % 60 == 0 else "call"
        rec.call(usage(read=size, uncached=50, out=100), label)
        if number % 60 == 0:
            rec.compacted(52_000, 700, f"summary {number}", f"t{number}.jsonl")
    return rec


def test_a_session_of_3000_calls_draws_a_bounded_chart_whose_peaks_are_true():
    """Past MAX_BARS a bar stands for a run of calls and draws the tallest: the spikes stay
    visible, and the chart's size does not grow with the session (1.7 MB and 3,050 bars of
    1.5 units in slots of 0.3, each over the next, before)."""
    from harness.session.page import MAX_BARS, render
    rec = long_session(3_000)
    page_text = render(rec.data)
    chart = page_text[page_text.index('<svg class="chart"'):page_text.index("</svg>") + 6]
    page = Elements(chart)
    bars = page.having("g", "call")
    assert MAX_BARS // 2 < len(bars) <= MAX_BARS and len(chart.encode("utf-8")) < 400_000
    drawn = [int(b["data-call"]) for b in bars]
    spikes = [n for n in range(1, 3_001) if n % 100 == 37]
    assert set(spikes) <= set(drawn)                         # each run draws its tallest call
    titles = [t for t in page.text if t.startswith("calls ")]
    assert len(titles) == len(bars) and titles[0].startswith("calls 1 to 10, the tallest drawn")
    assert len(page.having("g", "cleared")) <= len(bars) and len(page.having("text", "axis")) < 60
    assert len(page.having("a", "compaction")) == 50          # one mark a bar, none lost here
    small = parsed(long_session(12)).having("g", "call")
    assert [b["data-call"] for b in small] == [str(n) for n in range(1, 13)]   # one bar a call


def test_the_chart_scales_to_the_pages_width():
    """A viewBox and width 100%, no fixed size: the browser test checks the drawn width."""
    (svg,) = parsed(synthetic_record()).having("svg", "chart")
    assert svg["width"] == "100%" and "height" not in svg
    assert re.fullmatch(r"0 0 \d+ \d+", svg["viewbox"])         # the parser lowercases names


def test_a_compactions_sizes_say_which_is_the_apis_count_and_which_is_estimated():
    page = parsed(synthetic_record())       # before 9,400 of which the API counted 8,200
    item = next(t for t in page.text if "9,400 → ~350 tokens" in t)
    assert "before: the API's count, 8,200, + ~1,200 estimated since" in item
    assert "after: estimated" in item and "call 5 then sent 600 (the API's count)" in item
    rec = Recorder()
    rec.call(usage(uncached=100), "summary call")
    rec.compacted(5_000, 300, "s", "t.jsonl")                 # no API count given: all estimated
    assert any("~5,000 → ~300 tokens (before: estimated" in t for t in parsed(rec).text)


def test_the_legend_explains_only_the_marks_the_lesson_can_make():
    s03 = Recorder("s03_todo")
    s03.call(usage(uncached=500, out=20))
    legend = " ".join(parsed(s03).text)
    assert "read from the cache" in legend and "output" in legend
    assert not any(mark in legend for mark in ("COMPACT_THRESHOLD", "▲", "①", "summary call"))
    s06 = Recorder()
    s06.threshold(50_000)                   # s06 and s07 set it at every call
    s06.call(usage(uncached=500, out=20))
    legend = " ".join(parsed(s06).text)
    assert all(mark in legend for mark in ("COMPACT_THRESHOLD", "▲", "①", "summary call"))


def test_a_short_result_is_whole_in_the_table_of_tool_calls_as_on_the_screen():
    """A task file (13 lines: its blockedBy change, the moment the s07 demo is about) is shown
    whole, as the terminal shows it; a longer result is its first lines and a count."""
    task_file = '{\n  "id": 2,\n  "subject": "Implement the API",\n  "description": "",\n' \
        '  "status": "pending",\n  "blockedBy": [\n    1\n  ],\n  "owner": null,\n' \
        '  "created_at": "t",\n  "updated_at": "t"\n}\nend'
    rec = Recorder()
    rec.call(usage(uncached=100))
    rec.tool("bash", {"command": "cat .tasks/task_2.json"}, task_file, False)
    rec.tool("bash", {"command": "seq 1 30"}, "\n".join(map(str, range(1, 31))), False)
    (whole,) = [t for t in parsed(rec).text if '"blockedBy"' in t]
    (cut,) = [t for t in parsed(rec).text if t.startswith("1\n2")]
    assert whole == task_file and "more lines" not in whole
    assert cut.startswith("1\n2\n") and cut.endswith("… (25 more lines)")


def test_a_long_task_file_and_a_long_results_count_are_on_the_page_as_on_the_screen(capsys):
    """Cut to its preview's lines, not to a number of characters first: a task with a long
    description keeps its status, blockedBy and owner; `seq 1 5000` says 4,995 more lines."""
    from harness import terminal
    task_file = ('{\n  "id": 2,\n  "subject": "Implement the API",\n  "description": "'
                 + "Define the tables. " * 32 + '",\n  "status": "pending",\n'
                 '  "blockedBy": [\n    1\n  ],\n  "owner": "alice"\n}')
    numbers = "\n".join(map(str, range(1, 5001)))
    rec = Recorder()
    rec.call(usage(uncached=100))
    rec.tool("task_get", {"task_id": 2}, task_file, False)
    rec.tool("bash", {"command": "seq 1 5000"}, numbers, False)
    shown = parsed(rec).text
    (whole,) = [t for t in shown if '"blockedBy"' in t]
    assert whole.endswith('"owner": "alice"\n}') and '"status": "pending"' in whole
    (cut,) = [t for t in shown if t.startswith("1\n2")]
    terminal.show_tool_result(numbers, False)
    assert "… (4995 more lines)" in capsys.readouterr().err
    assert cut.endswith("… (4995 more lines)")


def test_control_characters_in_a_result_are_escapes_not_line_breaks(capsys):
    """What the model was sent, shown: a vertical tab, a form feed, a lone carriage return or a
    line separator is not a new line, on the page or the screen."""
    from harness import terminal
    output = "zq\vb\fc\rd\x85e\u2028f\ng"
    rec = Recorder()
    rec.call(usage(uncached=100))
    rec.tool("bash", {"command": "printf ..."}, output, False)
    (cell,) = [t for t in parsed(rec).text if t.startswith("zq")]
    first, last = cell.split("\n")
    assert first == "zq\\x0bb\\x0cc\\x0dd\\x85e\\u2028f" and last == "g"
    terminal.show_tool_result(output, False)
    shown = capsys.readouterr().err
    assert "\u2028" not in shown and len(shown.rstrip("\n").split("\n")) == 2


def test_many_long_summaries_keep_the_page_to_its_size_and_the_latest_whole():
    """400 compactions of 20,000-character summaries made a 10 MB page: past its share, an
    older summary is cut and says so; the transcript has it whole, and the latest is whole."""
    rec = Recorder("s06_compact")
    for number in range(400):
        rec.call(usage(uncached=1_000))
        rec.call(usage(uncached=1_000), "summary call")
        rec.compacted(60_000, 2_000, f"summary {number}: " + "a & b " * 3_000, f"t{number}.jsonl")
    page = render(rec.data)
    assert len(page.encode("utf-8")) < 5_000_000
    assert "summary 399: " + "a &amp; b " * 3_000 + "</pre>" in page        # the latest, whole
    assert "summary 0: " in page and "cut here: the page keeps to about 5 MB" in page


# ---------------------------------------------------------------- escaping

def test_hostile_text_is_shown_as_text_never_markup():
    rec = synthetic_record(subject=HOSTILE, summary=HOSTILE, output=HOSTILE)
    rec.tool(HOSTILE, {HOSTILE: HOSTILE}, HOSTILE, True)
    rec.data.lesson = HOSTILE
    page_text = render(rec.data)
    page = Elements(page_text)
    allowed = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "small", "p",
               "span", "div", "svg", "g", "rect", "text", "line", "polyline", "path", "circle",
               "a", "defs", "marker", "ol", "ul", "li", "b", "code", "pre", "table", "thead",
               "tbody", "tr", "th", "td", "details", "summary"}
    assert {t for t, _ in page.tags} <= allowed                         # no script, no img
    assert not [k for _, a in page.tags for k in a if k.startswith("on")]
    shown = "".join(page.text)
    assert shown.count("<script>alert(1)</script>\"><img src=x onerror=alert(2)>") >= 5   # text
    assert "\\x1b[31m\\x00\\u202e\\ud800" in shown                       # controls made visible
    assert not re.search("[\x00-\x08\x0b\x1b\u202e]", page_text)
    page_text.encode("utf-8")                                            # no lone surrogate left
    assert "default-src 'none'" in page_text                             # no script would run


def test_the_price_line_is_the_cost_commands_and_a_hostile_model_id_is_text():
    rec = synthetic_record()
    assert "price:" not in render(rec.data)                   # no price given, no line
    listed = config.price(config.DEFAULT_MODEL)
    shown = " ".join(Elements(render(rec.data, listed)).text)
    assert f"price: {views.money(rec.data, listed)}, {listed.said}" in shown
    page_text = render(rec.data, config.Price(None, None, "", f"none: MODEL_ID is {HOSTILE}"))
    shown = "".join(Elements(page_text).text)
    assert "price: none: MODEL_ID is <script>alert(1)</script>" in shown     # as text
    assert "<script>" not in page_text and not re.search("[\x00-\x08\x1b\u202e]", page_text)


# ---------------------------------------------------------------- writing the page

def test_pages_are_named_for_the_lesson_written_whole_and_never_overwrite_each_other(tmp_path):
    rec = synthetic_record()
    first, second = write_page(rec.data, tmp_path / "t"), write_page(rec.data, tmp_path / "t")
    assert re.fullmatch(r"session_s07_\d{8}-\d{6}_1\.html", first.name)
    assert first != second and second.name.startswith("session_s07_")
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == sorted([first.name, second.name])
    assert first.read_text(encoding="utf-8") == render(rec.data)
    rec.data.lesson = "../../etc/x y"                      # not a lesson's name: made safe
    assert re.fullmatch(r"session_etc-x-y_\d{8}-\d{6}_1\.html", write_page(rec.data, tmp_path).name)


def test_end_of_run_names_the_page_writes_none_without_calls_and_explains_a_failure(
        tmp_path, capsys):
    assert end_of_run(Recorder(), tmp_path / "none") is None and not (tmp_path / "none").exists()
    path = end_of_run(synthetic_record(), tmp_path / "pages")
    assert f"[session page: {path}" in words(capsys.readouterr().err)
    (tmp_path / "blocked").write_text("a file in the way")
    assert end_of_run(synthetic_record(), tmp_path / "blocked") is None
    err = capsys.readouterr().err
    assert len(messages(err)) == 1 and "no session page: cannot write in" in words(err)
    assert "Traceback" not in words(err)


def test_the_recorder_never_raises_into_the_lesson_and_says_what_it_missed():
    rec = Recorder()
    rec.call(SimpleNamespace(input_tokens="lots"), sent=5)   # not a list of messages
    rec.watch_board(lambda: ({1: {"subject": "no id"}}, []))
    rec.finish()                                             # a task without an id: noted
    rec.tool("bash", object(), object(), False)              # odd arguments are shown, not fatal
    rec.watch_board(lambda: 1 / 0)
    rec.compacted(10, 5, "s", "t.jsonl")
    assert len(rec.data.problems) == 3 and rec.data.tools
    assert len(rec.data.calls) == 1 and rec.data.totals["calls"] == 1   # the call is still counted
    page = Elements(render(rec.data))
    assert any("the board could not be read: ZeroDivisionError" in t for t in page.text)


def test_a_demo_whose_page_cannot_be_written_names_the_folder_from_where_you_are(run_main,
                                                                                 workdir):
    """The demo runs in demo/: the line named .transcripts/, which is not where you are."""
    import s03_todo
    (workdir / "demo").mkdir()
    (workdir / "demo" / ".transcripts").write_text("a file in the way")
    code, out, err, api = run_main(s03_todo, "--demo", key=None)
    assert "[no session page: cannot write in demo/.transcripts/ (" in words(err), err
