"""What the model saw: each call's request on the session page, and what the record keeps of it."""

import re

from harness.session import recorder as recorder_module
from harness.session import sent
from harness.session.page import render
from harness.session.recorder import Recorder
from harness.compaction import SUMMARY_OPENING
from helpers import (BOARD_TEXT, HOSTILE, SYSTEM, TOOLS, Elements, sent_result,
                     synthetic_record, usage, use)

PAGE_LIMIT = 5_000_000       # bytes: the page must open quickly in any browser


def section(page_text, number):
    """The HTML of call `number`'s <details>."""
    found = re.search(rf'<details class="request" data-call="{number}".*?</details>', page_text,
                      re.S)
    return found[0]


def test_each_call_has_a_collapsed_section_that_its_bar_links_to():
    page_text = render(synthetic_record().data)
    page = Elements(page_text)
    sections = page.having("details", "request")
    assert [s["data-call"] for s in sections] == [str(n) for n in range(1, 7)]
    # The links' target is inside its <details>, which a browser opens to show it.
    assert [o["id"] for o in page.having("ol", "blocks")] == [f"call-{n}" for n in range(1, 7)]
    assert re.findall(r'<details class="request" data-call="(\d+)"><summary>.*?</summary>'
                      r'<ol class="blocks" id="call-(\d+)">', page_text) == \
        [(str(n), str(n)) for n in range(1, 7)]
    assert not [s for s in sections if "open" in s]                   # collapsed until clicked
    assert [a["href"] for a in page.having("a") if a.get("href", "").startswith("#call-")][:6] \
        == [f"#call-{n}" for n in range(1, 7)]                        # the bars, in order
    assert "Content-Security-Policy" in page_text and "<script" not in page_text


def test_new_blocks_are_marked_and_unchanged_ones_are_one_line_linking_to_the_call_before():
    page_text = render(synthetic_record().data)
    second = Elements(section(page_text, 2))
    assert len(second.having("li", "new")) == 2                       # the call and its result
    assert any("message 1: 1 block" in t for t in second.text)        # the prompt, unchanged
    assert [a["href"] for a in second.having("a")] == ["#call-1", "#call-1"]   # and the tools
    first = Elements(section(page_text, 1))
    assert any("You are a coding agent." in t for t in first.text)   # the system prompt, whole
    assert any("the tool definitions: bash, task_list" in t for t in first.text)


def test_a_cleared_result_shows_as_the_placeholder_the_model_read():
    third = Elements(section(render(synthetic_record().data), 3))
    (cleared,) = third.having("li", "cleared")
    assert any(t == "[Previous: used bash]" for t in third.text)
    assert not any("1 2 3 1 2 3" in t for t in third.text)            # not the text it replaced
    assert any("messages 1 to 2: 2 blocks" in t for t in third.text)
    assert len(third.having("li", "new")) == 2                        # read_file and its error
    assert any("(error)" in t for t in third.text)


def test_after_a_compaction_the_summary_and_the_board_are_readable():
    summary = "Summary: the data model is designed; next, the API."
    fifth = Elements(section(render(synthetic_record(summary=summary).data), 5))
    assert fifth.having("span", "summary") and fifth.having("pre", "board-text")
    shown = "".join(fifth.text)
    assert f"{SUMMARY_OPENING} The full transcript is in t.jsonl.]\n\n{summary}" in shown
    assert BOARD_TEXT in shown


def test_only_the_summary_layer_2_sent_is_badged_the_summary_not_a_prompt_quoting_it():
    """A short summary ("Summary: done.") was found in any text holding it: a later prompt
    that quoted it was badged the summary too."""
    rec = synthetic_record(summary="Summary: done.")
    rec.call(usage(out=10), sent=[{"role": "user", "content": "Was it Summary: done. or not?"}],
             system=SYSTEM, tools=TOOLS)
    page_text = render(rec.data)
    fifth, last = section(page_text, 5), section(page_text, len(rec.data.calls))
    assert Elements(fifth).having("span", "summary")
    assert "Was it Summary: done." in last and not Elements(last).having("span", "summary")


def test_a_long_text_is_cut_to_its_head_and_tail_with_its_whole_length():
    rec = Recorder()
    text = "HEAD-MARK " + "m" * 50_000 + " MIDDLE-MARK " + "m" * 50_000 + " TAIL-MARK"
    rec.call(usage(uncached=10), sent=[{"role": "user", "content": [sent_result("t1", text)]}])
    page_text = render(rec.data)
    assert "HEAD-MARK" in page_text and "TAIL-MARK" in page_text
    assert "MIDDLE-MARK" not in page_text and f"…[{len(text):,} characters]…" in page_text


def test_hostile_text_in_a_request_is_shown_as_text():
    rec = synthetic_record(summary=HOSTILE, output=HOSTILE)
    rec.call(usage(uncached=10), sent=[{"role": HOSTILE, "content": [use(HOSTILE, HOSTILE)]}])
    page_text = render(rec.data)
    page = Elements(page_text)
    assert not page.having("script") and not page.having("img")
    assert not [k for _, a in page.tags for k in a if k.startswith("on")]
    assert sum(HOSTILE[:40] in t for t in page.text) >= 4


def long_session(calls, result_chars, clear_every=10, compact_every=50):
    """A session of `calls` calls, each adding a tool call and a result of result_chars; layer 1
    clears the older results every clear_every calls; a compaction every compact_every calls."""
    rec = Recorder("s06_compact")
    rec.threshold(50_000)
    history, cleared = [{"role": "user", "content": "work through the backlog"}], 0
    for n in range(1, calls + 1):
        if n % compact_every == 0:
            rec.call(usage(read=9_000, out=300), "summary call",
                     sent=[*history, {"role": "user", "content": "Summarize."}], system=SYSTEM)
            rec.compacted(50_000, 800, f"Summary {n}: backlog half done.", f"t{n}.jsonl")
            history, cleared = [{"role": "user", "content": f"[compacted] Summary {n}."}], 0
        if n % clear_every == 0:
            cleared = len(history) - 4
            rec.cleared(cleared // 2, 5_000)
        view = [{**m, "content": [sent_result(m["content"][0]["tool_use_id"],
                                              "[Previous: used bash]")]}
                if i < cleared and m["role"] == "user" and isinstance(m["content"], list) else m
                for i, m in enumerate(history)]
        rec.call(usage(read=8_000, written=900, out=120), sent=view, system=SYSTEM, tools=TOOLS)
        body = f"result of call {n}: " + f"{n} " * (result_chars // (len(str(n)) + 1))
        history += [{"role": "assistant", "content": [use(f"t{n}", "bash", command=f"step {n}")]},
                    {"role": "user", "content": [sent_result(f"t{n}", body)]}]
        rec.tool("bash", {"command": f"step {n}"}, body, False)
    return rec


def test_a_200_call_session_page_stays_under_5_mb_and_shows_every_call():
    rec = long_session(200, 6_000)
    page_text = render(rec.data)
    assert len(page_text.encode("utf-8")) < PAGE_LIMIT
    assert len(rec.data.calls) == 204                         # 200, and 4 summary calls
    assert page_text.count('<details class="request"') == len(rec.data.calls)
    assert "result of call 199: 199 199" in section(page_text, 203)   # the last summary call


def test_a_long_session_keeps_memory_bounded_and_the_page_says_what_it_left_out(monkeypatch):
    """Each request keeps only the messages that differ from the one before; the text kept over
    the run stops at SENT_CHARS (here made small, to keep this test quick)."""
    monkeypatch.setattr(recorder_module, "SENT_CHARS", 200_000)
    rec = long_session(200, 3_000)
    requests = [c.request for c in rec.data.calls if c.request]
    stored = sum(len(keys) for r in requests for _, keys in r.messages)
    whole = sum(sum(len(keys) for _, keys in r.messages) + r.same for r in requests)
    assert stored < whole / 5                                # a request is not kept whole
    assert rec.data.sent_chars <= 200_000
    assert any(not b.kept for b in rec.data.blocks.values())
    page_text = render(rec.data)
    assert "was not kept: a run keeps" in page_text
    assert len(page_text.encode("utf-8")) < PAGE_LIMIT


def test_a_bar_links_only_to_a_request_the_page_shows(monkeypatch):
    """Past SECTION_BYTES the page stops showing requests; the later calls' bars still linked to
    #call-N, an anchor that was not on the page, and a click did nothing."""
    monkeypatch.setattr(sent, "SECTION_BYTES", 150_000)
    rec = long_session(60, 3_000)
    page = Elements(render(rec.data))
    anchors = {o["id"] for o in page.having("ol", "blocks")}
    links = {a["href"][1:] for a in page.having("a") if a.get("href", "").startswith("#call-")}
    assert 5 < len(anchors) < len(rec.data.calls)          # the section was cut
    assert links and links <= anchors
    assert "their requests are not shown" in " ".join(page.text)


def test_after_a_summary_call_without_tools_the_tools_are_as_before_not_new():
    """The summary call sends no tool definitions; the call after it sent them unchanged, and
    the page marked them new, shown again, as if the lesson had changed its tools."""
    rec = Recorder("s06_compact")
    prompt = [{"role": "user", "content": "go"}]
    rec.call(usage(out=10), sent=prompt, system=SYSTEM, tools=TOOLS)
    rec.call(usage(out=10), "summary call", sent=prompt + [{"role": "user", "content": "Sum."}],
             system=SYSTEM)
    rec.call(usage(out=10), sent=[{"role": "user", "content": "Summary: went."}], system=SYSTEM,
             tools=TOOLS)
    third = section(render(rec.data), 3)
    assert "the tool definitions" in third and '<span class="badge new">new</span> <b>the tool' \
        not in third
    assert re.search(r'the tool definitions \(~[\d,]+ tokens\)[^<]*: as in <a href="#call-1">',
                     third), third
