"""What the lessons' docstrings promise, and the compaction's failures told.

Every lesson: its dispatch table has a function for every tool it offers. s06: an edit does
not hide the file it edits; a `compact` call with a bad input is an error result, and a
failed compaction is told to the model. The transcript is whole or absent. s03: the loop
runs exactly the calls it chose, and never a call a cut reply stopped inside. (s07's board
after a compaction, bounded and keeping what can start, is tested on both stores in
test_board_contract.py.)
"""

import io
import json
import types
from pathlib import Path

import pytest
from anthropic.types import Message, TextBlock, ToolUseBlock, Usage

import s03_todo as s03
import s06_compact as s06
import s07_task_system as s07
from helpers import conversation, FullDisk, tool_results
from harness.stand_in.script import reply, text, tool
from harness import model_call
from harness.run import Run
from s03_todo import run_tool_calls, schema

BIG = "y" * (4 * s06.CLEAR_AT_LEAST)   # one result worth a whole batch of layer 1


pytestmark = pytest.mark.usefixtures("fresh_layers")    # s06's layers new, in a tmp folder


def shown(view: list) -> list:
    return [m["content"][0]["content"] for m in view[2::2]]


# ---------------------------------------------------------------- s06 layer 1: what stays in sight

NEWEST = [("bash", {"command": "ls"}, "1"), ("bash", {"command": "ls"}, "2"),
          ("bash", {"command": "ls"}, "3")]


def test_an_edit_does_not_hide_the_read_of_the_file_it_edits(run):
    view = shown(s06.micro_compact(conversation(
        ("read_file", {"path": "a.txt"}, BIG),
        ("edit_file", {"path": "a.txt", "old_text": "y", "new_text": "z"},
         "Edited a.txt: replaced 1 occurrence"),
        ("bash", {"command": "cat log"}, BIG), *NEWEST), run))
    assert view[2].startswith("[Previous: used bash")   # a batch did happen
    assert view[0] == BIG                           # the read stays in sight


@pytest.mark.parametrize("later", [("read_file", {"path": "./a.txt"}, BIG),
                                   ("write_file", {"path": "a.txt", "content": "new"}, "Wrote")])
def test_a_later_read_or_write_of_the_file_does_supersede_the_read(later, run):
    view = shown(s06.micro_compact(conversation(
        ("read_file", {"path": "a.txt"}, BIG * 3),    # worth more than all that follows it
        ("edit_file", {"path": "a.txt", "old_text": "y", "new_text": "z"}, "Edited a.txt"),
        later, *NEWEST), run))
    assert view[0] == "[Previous: read a.txt; a later read or write of it follows]"
    assert view[2] == later[2]                      # the newer one stays


# ---------------------------------------------------------------- every lesson

LESSONS = [s03, s06, s07]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda m: m.__name__)
def test_every_tool_offered_has_a_handler_and_every_handler_is_offered(lesson):
    offered = [tool["name"] for tool in lesson.TOOLS]
    assert len(offered) == len(set(offered)), offered
    assert sorted(offered) == sorted(lesson.TOOL_HANDLERS)


# ---------------------------------------------------------------- s06 layer 3: the compact call

def last_user_blocks(request: dict) -> list:
    return request["messages"][-1]["content"]


@pytest.mark.parametrize("bad_input", [["focus", "x"], 5])
def test_a_compact_call_with_a_list_or_number_input_is_an_error_result(run_main, bad_input):
    code, out, err, api = run_main(s06, "tidy up", script=[
        reply(tool("compact", bad_input)), reply(text("Done."))], summary="Summary.")
    assert code == 0 and "Traceback" not in err, err
    assert "Done." in out
    result = last_user_blocks(api.requests[1])[0]
    assert result["type"] == "tool_result" and result.get("is_error") is True
    assert "[compacted" not in err and not list(Path(".transcripts").glob("transcript_*"))
    assert len(api.requests) == 2                   # no summary call


def test_a_compact_call_whose_input_is_json_text_compacts_with_its_focus(run_main):
    code, out, err, api = run_main(s06, "tidy up", script=[
        reply(tool("compact", '{"focus": "the notes file"}')), reply(text("Done."))],
        summary="Summary: notes written.")
    assert code == 0 and "Traceback" not in err, err
    asks = [b["text"] for r in api.requests for b in last_user_blocks(r)
            if isinstance(b, dict) and "<summary-request>" in b.get("text", "")]
    assert len(asks) == 1 and "Above all, preserve: the notes file" in asks[0]
    assert "[compacted:" in err
    assert "Summary: notes written." in api.requests[-1]["messages"][0]["content"]


def test_a_failed_compaction_after_a_compact_call_is_told_to_the_model(run_main):
    Path(".transcripts").write_text("a file where the transcripts folder belongs\n")
    code, out, err, api = run_main(s06, "tidy up", script=[
        reply(tool("compact", {"focus": "notes"})), reply(text("Done."))], summary="Summary.")
    assert code == 0 and "compaction skipped" in err, err
    blocks = last_user_blocks(api.requests[-1])
    assert blocks[0]["type"] == "tool_result"
    told = [b["text"] for b in blocks[1:] if b["type"] == "text"]
    assert any("compaction did not happen" in t for t in told), blocks


# ---------------------------------------------------------------- s06 layer 2: the transcript

class NoCalls:
    """A client that must not be used: without its transcript, no summary is asked for."""

    def __getattr__(self, name):
        raise AssertionError(f"the client was used ({name}) though the transcript failed")


def test_a_transcript_cut_by_a_full_disk_leaves_no_file_and_the_compaction_is_skipped(
        monkeypatch, capsys):
    real_open = io.open

    def open_on_full_disk(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        return FullDisk(f) if "w" in mode or "x" in mode else f
    monkeypatch.setattr(io, "open", open_on_full_disk)
    messages = conversation(*[("bash", {"command": f"step {n}"}, BIG) for n in range(6)])
    before = json.dumps(messages)
    assert s06.auto_compact(messages, Run(NoCalls())) is False
    assert json.dumps(messages) == before               # the history is kept as it was
    assert [p.name for p in Path(".transcripts").iterdir()] == []   # no half file, no empty one
    assert "compaction skipped" in capsys.readouterr().err


# ---------------------------------------------------------------- s03: the calls the loop chose

def call(n: int) -> ToolUseBlock:
    return ToolUseBlock(id=f"toolu_{n}", name="probe", input={"n": n}, type="tool_use")


def response(content: list, stop_reason: str) -> Message:
    return Message(id="msg_1", type="message", role="assistant", model="m", content=content,
                   stop_reason=stop_reason, stop_sequence=None,
                   usage=Usage(input_tokens=1, output_tokens=1))


PROBE = [{"name": "probe", "input_schema": schema(["n"], n={"type": "integer"})}]


def test_run_tool_calls_runs_exactly_the_calls_it_is_given(capsys, run):
    ran = []
    calls = [{"type": "tool_use", "id": f"toolu_{n}", "name": "probe", "input": {"n": n}}
             for n in (1, 3)]
    results = run_tool_calls(run, model_call.Response(calls, "tool_use", tool_uses=calls),
                             {"probe": lambda n: ran.append(n) or "ok"}, PROBE)
    assert ran == [1, 3]
    assert [r["tool_use_id"] for r in results] == ["toolu_1", "toolu_3"]


@pytest.mark.parametrize("content, stop_reason, kept", [
    ([call(1), call(2)], "max_tokens", [1]),                     # the last call was cut
    ([call(1)], "model_context_window_exceeded", []),
    ([call(1), TextBlock(text="and", type="text")], "max_tokens", [1]),  # a cut text, no cut call
    ([TextBlock(text="ok", type="text"), call(1)], "end_turn", [1]),     # end_turn beside a call
    ([call(1), call(2)], "tool_use", [1, 2])])
def test_only_a_cut_last_call_is_left_out_of_the_reply(content, stop_reason, kept, run):
    run.client = types.SimpleNamespace(base_url="http://127.0.0.1:9")
    guard = model_call.Guard(run)
    guard.ended = True                        # the stream reached message_delta
    request = {"messages": [], "system": "s", "tools": PROBE}
    checked = guard.checked(response(content, stop_reason), request)
    assert [b["input"]["n"] for b in checked.tool_uses] == kept
    assert (checked.stop_reason == "tool_use") == bool(kept)


def test_a_compact_call_refused_by_its_schema_does_not_compact(run_main):
    """The model was told its call failed (focus must be a string): no compaction may follow."""
    script = [reply(tool("compact", {"focus": 5})), reply(text("ok"))]
    code, out, err, api = run_main(s06, "go", script=script, summary="SUMMARY")
    assert code == 0 and "compacted" not in err and api.violations == []
    assert not any("<summary-request>" in json.dumps(r["messages"]) for r in api.requests)
    (told,) = tool_results(api.requests[1])           # what the model and the user were told
    said = "ValueError: argument 'focus' must be string, got integer"
    assert told["is_error"] and told["content"] == said
    assert f"! {said}" in err and out == "ok\n"


# ---------------------------------------------------------------- s06: the layers agree

def test_layer_2_does_not_compact_what_layer_1_has_just_cleared(capsys, run):
    """The API's count for the last call still holds the results a batch has just cleared:
    layer 2 measures the view, so it must not see them and summarise for nothing."""
    messages = conversation(("bash", {"command": "big"}, BIG), *NEWEST)
    s06.CONTEXT.threshold = 10_000
    s06.CONTEXT.record(Usage(input_tokens=11_000, output_tokens=10), messages)
    view = s06.micro_compact(messages, run)
    assert shown(view)[0].startswith("[Previous: used bash")        # layer 1 cleared it
    assert not s06.needs_compaction(view)
    assert s06.CONTEXT.estimate(view) < 10_000


def test_a_new_result_under_an_old_cleared_id_is_shown_whole(run):
    """An endpoint that numbers its ids afresh (after a compaction, or /clear) reuses an id
    layer 1 cleared: the new result is not the old one, and the model must see it."""
    old = conversation(("bash", {"command": "big"}, BIG), *NEWEST)
    s06.micro_compact(old, run)
    assert shown(s06.micro_compact(old, run))[0].startswith("[Previous:")
    new = conversation(("bash", {"command": "again"}, "NEW OUTPUT"), *NEWEST)     # the same ids
    assert shown(s06.micro_compact(new, run))[0] == "NEW OUTPUT"


def test_a_summary_cut_at_its_limit_says_so(run_main):
    script = [reply(tool("compact", {})),
              reply(text("Summary: the first half"), stop_reason="max_tokens"),   # the summary
              reply(text("after"))]
    code, out, err, api = run_main(s06, "go", script=script)
    assert code == 0 and api.violations == [], err
    first = api.requests[-1]["messages"][0]["content"]
    assert "Summary: the first half\n[this summary was cut before its end]" in first
