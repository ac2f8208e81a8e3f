"""/context and /cost on synthetic sessions: what a learner reads there must be true."""

import re
from types import SimpleNamespace

import pytest

import s06_compact as s06
from harness import config
from harness.errors import SetupError
from harness.run import Run
from harness.session import views
from harness.session.recorder import Recorder
from harness.session.views import context_report, cost_report
from helpers import synthetic_record, usage


def compacted_history():
    board = ("<task-board>\nThe task board (.tasks/), just read:\n"
             + "[ ] #1: Design the data model\n" * 20 + "</task-board>")
    return [{"role": "user", "content": f"[compacted] Summary: work so far.\n\n{board}"},
            {"role": "assistant", "content": [{"type": "text", "text": "Reading."},
                                              {"type": "tool_use", "id": "t1", "name": "bash",
                                               "input": {"command": "cat big.txt"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": "x" * 4000},
                                         {"type": "tool_result", "tool_use_id": "t0",
                                          "content": "[Previous: used bash]"}]}]


def row(report, name):
    line = next(line for line in report.splitlines() if f" {name} " in line)
    return int(re.search(r"~([\d,]+)", line)[1].replace(",", ""))


def total(report):
    """The total /context gives, and whether it is marked as an estimate."""
    found = re.search(r"context now: (~?)([\d,]+) tokens", report)
    return int(found[2].replace(",", "")), found[1] == "~"


# ---------------------------------------------------------------- /context

def test_context_shows_each_kind_the_threshold_and_marks_estimates():
    history = compacted_history()
    tools = [{"name": "bash", "description": "Run a shell command. " * 20}]   # ~110 tokens
    report = context_report("You are a coding agent. " * 10, tools, history, 1_000, None, None)
    assert "(estimated: no API count" in report and total(report)[1]
    assert 1_000 <= row(report, "tool results") <= 1_050                     # 4,000 characters
    assert 0 < row(report, "cleared placeholders") < 40
    assert 150 < row(report, "the board") < 200                    # ~620 characters of board
    assert row(report, "text") < 40                                          # the board is not text
    assert "over it by" in report and "in the cache   unknown" in report
    bar = re.search(r"what fills it  \[(.*)\]", report)[1]
    assert bar.index("T") < bar.index("S") < bar.index("b") < bar.index("r")  # request's order
    assert bar.count("r") > 30 * bar.count("p")


def test_context_has_no_row_for_what_the_lesson_never_sends():
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    s03 = context_report("", [{"name": "bash"}], history, None, None, None)
    assert " cleared placeholders " not in s03 and " the board " not in s03
    assert " tool results " in s03
    s06 = context_report("", [{"name": "bash"}], history, 50_000, None, None)
    assert row(s06, "cleared placeholders") == 0 and " the board " not in s06
    s07 = context_report("", [{"name": "bash"}, {"name": "task_list"}], history, 50_000, None, None)
    assert row(s07, "cleared placeholders") == 0 and row(s07, "the board") == 0


def test_context_counts_a_cleared_write_as_a_placeholder_not_as_a_call(monkeypatch):
    call = {"type": "tool_use", "id": "t0", "name": "write_file",
            "input": {"path": "a.py", "content": "x" * 4000}}
    history = [{"role": "user", "content": "go"}, {"role": "assistant", "content": [call]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0",
                                             "content": "ok"}]}]
    monkeypatch.setattr(s06, "CLEARED", s06.Cleared())
    s06.CLEARED.placeholders[id(call)] = (call, s06.placeholder(call, call, Run()))
    cleared = s06.micro_compact(history, Run(), clear=False)
    report = context_report("", [], cleared, 50_000, None, None)
    assert row(report, "cleared placeholders") > 10 and row(report, "tool calls") == 0
    assert row(context_report("", [], history, 50_000, None, None), "tool calls") > 1_000


def test_context_uses_the_apis_count_where_known_and_shows_the_cached_prefix():
    history = compacted_history()
    report = context_report("", [], history, 50_000, 1_500, 2_000, reported_covers=2)
    since = re.search(r"context now: ([\d,]+) tokens \(the API's count for the last call "
                      r"\+ ~([\d,]+) since", report)
    assert since and int(since[1].replace(",", "")) == 2_000 + int(since[2].replace(",", ""))
    assert f"{50_000 - int(since[1].replace(',', '')):,} to go" in report
    cache = re.search(r"in the cache   \[(\^*) *\]\n +1,500 tokens", report)
    bar = 80 - views.LABEL - 2                      # the bar at 80 columns, as a pipe is laid out
    assert cache and abs(len(cache[1]) - round(bar * 1_500 / int(since[1].replace(",", "")))) <= 1
    assert "none: this lesson does not compact" in context_report("", [], history, None, None, None)


@pytest.mark.parametrize("columns", [80, 120])
def test_context_fills_the_terminals_width_and_never_breaks_a_bar(columns):
    """Each bar ends at the last column (an 80-column terminal broke the 60-column bars and
    their words mid-bar); its words are on the lines below it, wrapped under its label."""
    history = compacted_history()
    report = context_report("s" * 400, [], history, 2_500, 1_500, 2_000, reported_covers=2,
                            window=200_000, columns=columns)
    lines = report.splitlines()
    assert max(map(len, lines)) <= columns
    bars = [line for line in lines if line.endswith("]") and "  [" in line]
    assert [b[:17].strip() for b in bars] == ["what fills it", "in the cache", "threshold",
                                             "window"]
    assert {len(b) for b in bars} == {columns}                  # one width: ^ under the letters
    threshold = lines[lines.index(bars[2]) + 1]
    assert threshold.startswith(" " * 17 + "COMPACT_THRESHOLD 2,500: over it by")


def test_context_in_s03_counts_with_the_last_call_and_estimates_only_what_came_after(
        capsys):
    """s03 has no ContextSize: the record's last call says what the API counted, and how many
    messages that count covers (those it sent, and its reply)."""
    record = Recorder()
    sent = [{"role": "user", "content": "read big.txt"}]
    record.call(usage(uncached=900, out=100), sent=sent, system="s", tools=[])
    after = [*sent, {"role": "assistant", "content": [{"type": "tool_use", "id": "t1",
                                                        "name": "read_file", "input": {}}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                           "content": "x" * 4_000}]}]
    views.print_context(record, "s", [], after)
    report = capsys.readouterr().out
    tokens, estimated = total(report)
    assert not estimated and 1_000 + 1_000 <= tokens <= 1_000 + 1_030   # the result is ~1,000
    assert "the API's count for the last call + ~" in report
    assert "none: this lesson does not compact" in report


def test_context_in_s06_takes_the_threshold_and_count_from_the_lessons_context(
        capsys):
    history = compacted_history()
    context = SimpleNamespace(threshold=5_000, reported=3_000, seen=len(history))
    views.print_context(Recorder(), "", [], history, context)
    report = capsys.readouterr().out
    assert total(report) == (3_000, False)
    assert "COMPACT_THRESHOLD 5,000: 2,000 to go" in report



def test_context_gives_the_size_layer_2_compares_with_its_threshold(monkeypatch, capsys):
    """With or without the API's count, /context's total is s06's ContextSize.estimate of the
    same view: the number layer 2 compacts on, and the one `[compacted: A → ~B]` gives."""
    import s06_compact as s06
    run = Run()
    monkeypatch.setattr(s06, "CONTEXT", s06.ContextSize())
    system, tools = "You are a coding agent. " * 10, s06.TOOLS
    args = SimpleNamespace(api_context=None, demo=False)    # as a run's, with no flags
    s06.start(run, args, system, tools)      # the system prompt and tools, as a run counts them
    history = compacted_history()
    for reported, seen in ((None, 0), (2_000, 1), (2_000, len(history))):
        s06.CONTEXT.reported, s06.CONTEXT.seen = reported, seen
        views.print_context(run.recorder, system, tools, history, s06.CONTEXT)
        shown, estimated = total(capsys.readouterr().out)
        assert shown == s06.CONTEXT.estimate(history) and estimated == (reported is None)


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
    assert not re.search(r"\d\.\d{4}", report) and "price:" not in report
    priced = cost_report(rec.data, config.Price(3.0, 15.0, "", "at the price given"))
    out = sum(c.output for c in calls)
    assert (f"  price: {(billed * 3 + out * 15) / 1e6:,.4f} = input {billed * 3 / 1e6:,.4f} "
            f"(without caching {sent * 3 / 1e6:,.4f}) + output {out * 15 / 1e6:,.4f}\n"
            "    at the price given") in priced
    unpriced = cost_report(rec.data, config.Price(None, None, "", "none: set one"))
    assert unpriced.endswith("\n  price: none: set one")


@pytest.mark.parametrize("value", ["three", "-1", "nan", "inf", "1e999"])
def test_a_bad_price_is_one_clear_line(monkeypatch, value):
    monkeypatch.setenv("PRICE_PER_MTOK", value)
    with pytest.raises(SetupError, match="PRICE_PER_MTOK must be a price per million input tokens"):
        config.price()


def test_your_output_price_alone_replaces_the_list_price_and_empty_is_unset(monkeypatch):
    monkeypatch.setenv("PRICE_PER_MTOK", " ")
    monkeypatch.setenv("PRICE_PER_MTOK_OUT", " 15 ")
    price = config.price(config.DEFAULT_MODEL)
    assert (price.input, price.output, price.unit) == (None, 15.0, "")
    assert price.said == ("at your PRICE_PER_MTOK_OUT=15 per million output tokens; set "
                          "PRICE_PER_MTOK to price the input")


def test_the_cost_matches_what_the_stand_in_api_bills():
    """The same usage, read by the real client: /cost adds it up as the API's prices do."""
    import anthropic                        # a requirement: the lessons need it
    from harness.stand_in import StandInAPI
    from harness.stand_in.script import reply, text
    rec = Recorder()
    big = "notes " * 1_500                   # above the caching minimum, so the cache is used
    with StandInAPI([reply(text("one")), reply(text("two")), reply(text("three"))]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        messages = [{"role": "user", "content": big}]
        for _ in range(3):
            answer = client.messages.create(model="m", max_tokens=50, messages=messages,
                                            cache_control={"type": "ephemeral"})
            rec.call(answer.usage, sent=messages)
            messages += [{"role": "assistant", "content": answer.content[0].text},
                         {"role": "user", "content": "go on"}]
    bill = api.billing()
    assert bill["cache_read"] > 0            # the comparison covers all three kinds of input
    report = cost_report(rec.data)
    assert (f"billed as {bill['billed_input']:,.0f} input tokens; "
            f"without caching {bill['input_sent']:,}") in report
    assert re.search(r"output +([\d,]+) tokens", report)[1] == f"{bill['output']:,}"
    assert rec.data.totals == {"calls": 3, "fresh": bill["uncached"], "read": bill["cache_read"],
                            "written": bill["cache_write"], "out": bill["output"]}
