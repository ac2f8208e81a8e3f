"""Every row of the "What compatible endpoints bend" table (docs/endpoints.md), played
through a loop.

The page says "Each line has a test that plays it through the stand-in". ROWS maps each row,
by the text of its first cell, to the tests that play it: the new ones here, or ones elsewhere
in the suite. A row added to the table without a test here fails test_every_row_has_a_test.
"""

import json

import pytest

import s03_todo
from helpers import ROOT, missing_test, tool_results
from harness.stand_in.script import reply, text, tool

PAGE = (ROOT / "docs" / "endpoints.md").read_text(encoding="utf-8")
TABLE_HEAD = "| what arrives | what the loop does |"


def readme_rows() -> list[str]:
    """The first cell of each row of the table, as written."""
    table = PAGE.split(TABLE_HEAD, 1)[1].split("\n\n", 1)[0]
    return [line.split(" | ")[0].removeprefix("| ") for line in table.strip().splitlines()[1:]]


def sent_assistant(api, call=1):
    """The assistant message the loop sent back in request `call` (the first turn's reply)."""
    return [m for m in api.requests[call]["messages"] if m["role"] == "assistant"][0]["content"]


# ---------------------------------------------------------------- the rows no other test played

@pytest.mark.parametrize("stop_reason", ["end_turn", None])
def test_a_complete_call_beside_end_turn_or_no_stop_reason_is_run(run_main, workdir, stop_reason):
    step = {**reply(tool("write_file", {"path": "a.txt", "content": "x"})),
            "stop_reason": stop_reason}
    code, out, err, api = run_main(s03_todo, "write a.txt", script=[step, reply(text("done"))])
    assert code == 0 and out.strip() == "done" and api.violations == []
    assert (workdir / "a.txt").read_text() == "x"
    assert not tool_results(api.requests[1])[0].get("is_error")


def test_an_empty_reply_becomes_no_text_and_the_history_stays_valid(run_main):
    code, out, err, api = run_main(s03_todo, stdin="first\nsecond\nq\n",
                                   script=[reply(), reply(text("fine"))])
    assert code == 0 and "(the model returned no text)" in out and "fine" in out
    assert api.violations == []
    # the API refuses empty content
    assert sent_assistant(api) == [{"type": "text", "text": "(no text)"}]


def test_a_whole_tool_input_sent_as_json_text_runs_as_if_sent_properly(run_main, workdir):
    as_text = json.dumps({"path": "a.txt", "content": "whole"})
    script = [reply(tool("write_file", as_text)), reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "go", script=script)
    assert code == 0 and (workdir / "a.txt").read_text() == "whole" and api.violations == []
    assert not tool_results(api.requests[1])[0].get("is_error")
    assert sent_assistant(api)[0]["input"] == {"path": "a.txt", "content": "whole"}


@pytest.mark.parametrize("bad_input", [7, "ls -la", ["ls"]])
def test_tool_input_that_is_not_an_object_is_an_error_result_and_the_history_holds_an_object(
        run_main, bad_input):
    script = [reply(tool("bash", bad_input)), reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "go", script=script)
    assert code == 0 and out.strip() == "done" and api.violations == [] and "Traceback" not in err
    (result,) = tool_results(api.requests[1])
    assert result["is_error"] and "must be a JSON object" in result["content"]
    assert sent_assistant(api)[0]["input"] == {}


def test_redacted_thinking_goes_back_to_the_api_unchanged(run_main):
    redacted = {"type": "redacted_thinking",
                "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"}
    thinking = {"type": "thinking", "thinking": "The list comes first.",
                "signature": "c2lnbmF0dXJl"}
    script = [reply(thinking, redacted, tool("bash", {"command": "echo hi"})), reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "go", script=script)
    assert code == 0 and out.strip() == "done" and api.violations == []
    assert sent_assistant(api)[:2] == [thinking, redacted]     # byte for byte, in their place
    assert "left out" not in err


@pytest.mark.parametrize("signature", [None, ""])
def test_thinking_without_its_signature_is_left_out_with_a_note(run_main, signature):
    """A compatible endpoint's reasoning, unsigned: the API refuses such a block back
    ("Invalid signature"), and every later request of the session would fail."""
    thinking = {"type": "thinking", "thinking": "The list comes first."}
    if signature is not None:
        thinking["signature"] = signature
    script = [reply(thinking, tool("bash", {"command": "echo hi"})), reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "go", script=script)
    assert code == 0 and out.strip() == "done" and api.violations == [], err
    assert [b["type"] for b in sent_assistant(api)] == ["tool_use"]
    assert err.count("a thinking block without its signature was left out") == 1


def test_tool_use_ids_the_api_would_refuse_are_renamed_with_their_results(run_main):
    """A local server's ids such as "call 1" or "fc:7": kept, the history would be refused by
    the API (an id is letters, digits, _ and - only) once the session goes there, with
    --continue, say. Each is renamed, and its result answers it under the new name."""
    script = [reply(tool("bash", {"command": "echo a"}, id="call 1"),
                    tool("bash", {"command": "echo b"}, id="fc:7")),
              reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "go", script=script)
    assert code == 0 and out.strip() == "done" and api.violations == [], err
    calls = [b for b in sent_assistant(api) if b["type"] == "tool_use"]
    assert [c["id"] for c in calls] == ["call_1", "fc_7"]
    results = tool_results(api.requests[1])
    assert [r["tool_use_id"] for r in results] == ["call_1", "fc_7"]
    assert [r["content"].strip() for r in results] == ["a", "b"]


def test_a_block_of_a_type_nobody_knows_is_left_out_with_a_note(run_main):
    unknown = {"type": "hologram_2031", "payload": {"frames": 3}}
    script = [reply(text("Look:"), unknown, tool("bash", {"command": "echo hi"})),
              reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "go", script=script)
    assert code == 0 and out.strip() == "done" and api.violations == [] and "Traceback" not in err
    assert [b["type"] for b in sent_assistant(api)] == ["text", "tool_use"]
    assert err.count("'hologram_2031' block in the reply was left out") == 1


def test_text_after_a_tool_call_keeps_its_place_and_the_results_still_come_first(run_main):
    script = [reply(tool("bash", {"command": "echo one"}), text("and now I wait"),
                    tool("bash", {"command": "echo two"})), reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "go", script=script)
    assert code == 0 and api.violations == []
    assert [b["type"] for b in sent_assistant(api)] == ["tool_use", "text", "tool_use"]
    answer = api.requests[1]["messages"][-1]["content"]
    assert [b["type"] for b in answer[:2]] == ["tool_result", "tool_result"]
    assert [b["content"] for b in answer[:2]] == ["one", "two"]    # in the order of the calls


# ---------------------------------------------------------------- rows -> tests

# Each row's tests, as file::name (named, not imported: a test file imports no other).
E, C, S = "test_s03_e2e.py::", "test_cli.py::", "test_stream_shapes.py::"
X, H, U = "test_sendable_text.py::", "test_endpoint_table.py::", "test_setup.py::"
ROWS = {
    '`stop_reason: "end_turn"` (or none) beside complete `tool_use` blocks':
        [H + "test_a_complete_call_beside_end_turn_or_no_stop_reason_is_run",
         E + "test_a_complete_tool_call_is_run_even_when_stop_reason_says_end_turn"],
    "a reply cut by `max_tokens` that ends in a tool call "
    "(llama-server returns several parsed calls so)":
        [E + "test_complete_tool_calls_before_the_cut_one_run_and_the_cut_one_does_not",
         E + "test_a_tool_call_cut_by_max_tokens_is_not_run"],
    "fewer than half the input tokens counted that the tool definitions hold "
    "(a local chat template without tools)":
        [C + "test_an_endpoint_that_dropped_the_tools_is_named_once"],
    "content empty, only whitespace, or `null`":
        [H + "test_an_empty_reply_becomes_no_text_and_the_history_stays_valid",
         C + "test_empty_content_or_text_after_a_call_keeps_the_history_valid",
         C + "test_a_live_endpoint_that_is_not_the_messages_api_is_one_line"],
    "`usage` missing, or fields `null`":
        [C + "test_usage_that_is_missing_or_null_never_crashes"],
    'tool arguments JSON-encoded as a string (`"items": "[...]"`, or the whole input)':
        [E + "test_tool_input_as_json_text_or_a_list_keeps_the_history_valid",
         H + "test_a_whole_tool_input_sent_as_json_text_runs_as_if_sent_properly"],
    "tool input that is a list, a number, or text that is not JSON":
        [H + "test_tool_input_that_is_not_an_object_is_an_error_result_and_the_history_holds_"
             "an_object"],
    "tool input `null`, or none at all (a tool that takes no arguments, such as `task_list`)":
        ["test_tool_call_without_input.py::test_a_bash_call_with_a_null_or_missing_input_is_an_"
         "error_the_model_can_act_on",
         "test_tool_call_without_input.py::test_task_list_with_a_null_input_shows_the_board_and_"
         "the_repl_goes_on"],
    "`tool_use` ids the API would refuse (a local server's `call 1`, `fc:7`), or an id used "
    "before (numbered from 1 again)":
        [H + "test_tool_use_ids_the_api_would_refuse_are_renamed_with_their_results",
         "test_long_sessions.py::test_a_reply_that_reuses_an_earlier_tool_use_id_is_run_and_"
         "answered",
         "test_pairing.py::test_ids_the_api_refuses_in_a_saved_session_are_renamed_call_and_"
         "result_together"],
    "`thinking`, `redacted_thinking` blocks":
        [C + "test_thinking_is_kept_and_unknown_blocks_are_left_out_with_a_note",
         H + "test_redacted_thinking_goes_back_to_the_api_unchanged",
         H + "test_thinking_without_its_signature_is_left_out_with_a_note"],
    "server tool blocks and unknown block types":
        [C + "test_thinking_is_kept_and_unknown_blocks_are_left_out_with_a_note",
         H + "test_a_block_of_a_type_nobody_knows_is_left_out_with_a_note"],
    "text after a tool call":
        [H + "test_text_after_a_tool_call_keeps_its_place_and_the_results_still_come_first"],
    "an endpoint that redirects in a loop (a `307` to itself)":
        [U + "test_an_endpoint_that_redirects_in_a_loop_is_named_so_not_unreachable"],
    "a 429 or 529 whose `Retry-After` asks for a long wait (`99999`)":
        [U + "test_a_rate_limit_asking_to_wait_a_day_is_waited_briefly_then_one_line"],
    "a hung endpoint, or one that sends `message_start` and then only pings":
        [C + "test_a_hung_endpoint_ends_after_api_timeout_with_one_line",
         S + "test_pings_do_not_keep_a_reply_that_never_comes_waiting_past_api_timeout",
         C + "test_a_terminal_sees_the_wait_the_text_live_and_a_tool_call_growing",
         E + "test_ctrl_c_while_the_model_is_still_answering_abandons_the_turn"],
    "a stream that closes cleanly before its `message_delta` (in the middle of a tool call's "
    "input, say)":
        [S + "test_a_task_update_cut_off_inside_its_input_is_not_run",
         S + "test_the_calls_before_a_cut_one_run_and_the_model_is_told_which_was_cut",
         S + "test_a_call_runs_only_from_a_reply_that_reached_its_end",
         S + "test_a_text_reply_cut_off_keeps_what_arrived_and_says_it_was_cut",
         S + "test_whatever_block_a_stream_ended_in_the_next_request_is_accepted"],
    "a stream that breaks the rules: a delta before its block, blocks that share an index (a "
    "gateway's every `0`), a `tool_use` without an id, a `null` text or one that is not a "
    "string, data that is not JSON, tool input whose JSON the SDK cannot parse "
    "(`{'command': 'ls'}`, a weak model's passed on by a gateway), an `error` event, a "
    "`stop_reason` that is not a word":
        [S + "test_a_stream_that_breaks_the_rules_is_one_line_naming_what_it_sent",
         S + "test_data_not_json_an_error_event_or_no_event_at_all_is_one_line",
         S + "test_after_a_malformed_stream_the_repl_keeps_the_conversation",
         S + "test_a_stop_reason_sent_as_an_object_is_one_line_naming_the_endpoint",
         S + "test_blocks_that_share_an_index_are_one_line_not_a_call_run_without_its_input",
         S + "test_a_text_block_whose_text_is_not_a_string_is_one_line_naming_the_endpoint"],
    "a delta for another kind of block, a `null` text with no delta":
        [S + "test_a_delta_the_sdk_skips_or_a_null_text_alone_costs_nothing_but_the_cut"],
    "event and delta types nobody knows, a `message_delta` without `usage`, an `event: done` "
    "holding `data: [DONE]` after `message_stop` (OpenAI's end marker, under a name of the "
    "gateway's)":
        [S + "test_unknown_types_and_a_message_delta_without_usage_do_no_harm",
         S + "test_a_done_sentinel_after_a_whole_reply_is_ignored"],
    "an answer that is not the Messages API at all (`python -m http.server`: 501 and an HTML "
    "page; a 405; a 404 that is not the API's JSON)":
        [U + "test_python_m_http_server_is_one_line_naming_it_and_what_it_sent",
         U + "test_a_status_the_messages_api_never_sends_is_named_with_what_came"],
    "half an emoji (`\\ud83d`) escaped in a whole tool input sent as JSON text":
        [X + "test_half_an_emoji_in_a_tool_input_sent_as_json_text_is_mended"],
    "half an emoji escaped in a streamed tool input's JSON":
        [X + "test_half_an_emoji_in_a_streamed_tool_input_is_one_line_and_the_repl_goes_on"],
}


def test_every_row_has_a_test_and_every_test_a_row():
    rows = readme_rows()
    assert len(rows) >= 10, rows                     # the table was found and read
    untested = [row for row in rows if row not in ROWS]
    assert untested == [], "a row has no test: add one to ROWS"
    gone = [row for row in ROWS if row not in rows]
    assert gone == [], "ROWS names a row the table no longer has"
    assert "Each line has a test that plays it through the stand-in" in " ".join(PAGE.split())


def test_the_rows_tests_are_collected_by_pytest():
    """A test named here must be one pytest runs: a test_ function of a test_*.py file."""
    named = [test for tests in ROWS.values() for test in tests]
    assert [missing_test(test) for test in named if missing_test(test)] == []
