"""The history keeper (harness/pairing.py) and its repair (harness/session/repair.py): every
tool_use gets exactly one tool_result.

Each history it makes is judged by the stand-in's own check of the API's rules (check_request),
written separately on purpose: a check of pairing.py by pairing.py would catch nothing.
"""


import pytest

from harness import pairing
from harness.session import repair
from harness.stand_in.rules import check_request
from helpers import call, interrupted, result, session, valid


# ---------------------------------------------------------------- a saved history repaired

def test_the_last_batch_without_results_marks_its_first_call_interrupted_and_drops_the_rest():
    history = session(2)[:-1] + [{"role": "assistant", "content": [
        {"type": "text", "text": "Running two more."}, call("a"), call("b")]}]
    repaired, dropped = repair.repair(history)
    assert dropped == 1 and valid(repaired) is None
    assert repaired[:-2] == history[:-1]                       # t0 and t1 ran: kept with results
    assert repaired[-2]["content"] == [{"type": "text", "text": "Running two more."}, call("a")]
    assert repaired[-1] == {"role": "user", "content": [interrupted("a")]}   # a may have run


def test_of_two_calls_in_one_message_only_the_answered_one_stays():
    history = [{"role": "user", "content": "go"},
               {"role": "assistant", "content": [call("a"), call("b")]},
               {"role": "user", "content": [result("a"), result("a", "again")]},  # b lost, a twice
               {"role": "user", "content": [result("zzz"), {"type": "text", "text": "more"}]}]
    repaired, dropped = repair.repair(history)
    assert dropped == 1 and valid(repaired) is None
    assert repaired[1]["content"] == [call("a")]
    assert repaired[2]["content"] == [result("a")]             # one result per id
    assert repaired[3]["content"] == [{"type": "text", "text": "more"}]   # an orphan result goes


def test_the_first_message_is_the_users_and_empty_text_is_left_out():
    history = [{"role": "assistant", "content": [call("x")]},
               {"role": "user", "content": [result("x")]},
               {"role": "user", "content": "  "}, {"role": "user", "content": "start here"},
               {"role": "assistant", "content": [{"type": "text", "text": ""}, call("y")]},
               {"role": "user", "content": [result("y")]}]
    repaired, _ = repair.repair(history)
    assert valid(repaired) is None
    assert repaired[0] == {"role": "user", "content": "start here"}
    assert repaired[1]["content"] == [call("y")]


def test_a_history_that_opens_with_the_apis_summary_keeps_it():
    """A session the API compacted goes on from its compaction block: the API takes a first
    message that opens with one, and repair must not drop the summary as a stray reply."""
    summary = {"type": "compaction", "content": "Summary: the work so far."}
    history = [{"role": "assistant", "content": [summary, call("x")]},
               {"role": "user", "content": [result("x")]}]
    repaired, dropped = repair.repair(history)
    assert dropped == 0 and repaired == history
    # The API takes it with the compaction edit (no other request can hold the block).
    edit = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
    body = {"model": "m", "max_tokens": 1, "messages": repaired,
            "context_management": {"edits": [edit]}}
    assert check_request(body, context_window=10 ** 9, betas=["compact-2026-01-12"]) is None


def test_a_tool_input_saved_as_json_text_is_decoded_and_an_undecodable_one_left_out():
    history = [{"role": "user", "content": "go"},
               {"role": "assistant", "content": [
                   {"type": "tool_use", "id": "a", "name": "bash", "input": '{"command": "ls"}'},
                   {"type": "tool_use", "id": "b", "name": "bash", "input": "ls -l"},
                   {"type": "tool_use", "id": "c", "name": "bash", "input": ["ls"]}]},
               {"role": "user", "content": [result("a"), result("b", "Error"),
                                            result("c", "Error")]}]
    repaired, dropped = repair.repair(history)
    assert dropped == 2 and valid(repaired) is None
    assert repaired[1:] == [{"role": "assistant", "content": [call("a")]},
                            {"role": "user", "content": [result("a")]}]


def test_reused_tool_use_ids_in_a_saved_session_are_renamed_call_and_result_together():
    history = [{"role": "user", "content": "go"},
               {"role": "assistant", "content": [call("toolu_01"), call("toolu_02")]},
               {"role": "user", "content": [result("toolu_01", "1"), result("toolu_02", "2")]},
               {"role": "assistant", "content": [call("toolu_01", command="pwd")]},  # from 1 again
               {"role": "user", "content": [result("toolu_01", "3")]},
               {"role": "assistant", "content": [call("toolu_05"), call("toolu_05")]},  # in one
               {"role": "user", "content": [result("toolu_05", "4"), result("toolu_05", "5")]}]
    repaired, dropped = repair.repair(history)
    assert dropped == 0 and valid(repaired) is None
    assert repaired[:3] == history[:3]
    again = repaired[3]["content"][0]
    assert again["id"] != "toolu_01" and again["input"] == {"command": "pwd"}
    assert repaired[4]["content"] == [result(again["id"], "3")]      # the result follows its call
    first, second = (b["id"] for b in repaired[5]["content"])
    assert first == "toolu_05" and second != first
    assert repaired[6]["content"] == [result(first, "4"), result(second, "5")]


def test_ids_the_api_refuses_in_a_saved_session_are_renamed_call_and_result_together():
    """A session a local server numbered "call 1", "call 2", resumed with --continue against
    the API (a log saved before the harness renamed such ids)."""
    history = [{"role": "user", "content": "go"},
               {"role": "assistant", "content": [call("call 1"), call("call_1")]},
               {"role": "user", "content": [result("call 1", "1"), result("call_1", "2")]}]
    repaired, dropped = repair.repair(history)
    assert dropped == 0 and valid(repaired) is None
    first, second = (b["id"] for b in repaired[1]["content"])
    assert first != second and "call 1" not in (first, second)
    assert repaired[2]["content"] == [result(first, "1"), result(second, "2")]


def test_a_new_reply_reusing_an_earlier_id_gets_a_fresh_one_and_others_are_left_alone():
    history = session(2)                                    # t0 and t1 are taken
    fresh = {"role": "assistant", "content": [call("t9")]}
    assert pairing.unique_ids(history, fresh) is fresh and fresh["content"] == [call("t9")]
    reused = {"role": "assistant", "content": [{"type": "text", "text": "Again."}, call("t1"),
                                               call("t5"), call("t5")]}
    renamed = pairing.unique_ids(history, reused)
    ids = [b["id"] for b in renamed["content"][1:]]
    assert ids[1] == "t5" and len(set(ids + ["t0", "t1"])) == 5
    answered = history + [renamed, {"role": "user", "content": [result(id) for id in ids]}]
    assert valid(answered) is None


# ---------------------------------------------------------------- a failed turn

def test_a_failed_turn_keeps_the_calls_that_ran_and_marks_the_one_that_was_running():
    summary = "[This conversation was compacted.]\n\nSummary: two files written."
    messages = [{"role": "user", "content": summary},           # a compaction happened this turn
                {"role": "assistant", "content": [call("a"), call("b"), call("c")]}]
    ran = [result("a", "wrote a")]                              # what the log was given
    repaired, dropped = repair.repair(messages, ran)          # b was running when it failed
    assert dropped == 1 and valid(repaired) is None
    assert repaired == [{"role": "user", "content": summary},   # a plain string stays one
                        {"role": "assistant", "content": [call("a"), call("b")]},
                        {"role": "user", "content": [result("a", "wrote a"), interrupted("b")]}]


def test_a_failed_turn_with_no_result_marks_its_first_call_and_drops_the_calls_never_run():
    messages = [{"role": "user", "content": "Summary so far."},
                {"role": "assistant", "content": [call("a"), call("b")]}]
    repaired, dropped = repair.repair(messages)              # nothing known to have run
    assert dropped == 1 and valid(repaired) is None
    assert repaired[1:] == [{"role": "assistant", "content": [call("a")]},
                            {"role": "user", "content": [interrupted("a")]}]


def test_a_turn_that_failed_before_any_reply_keeps_its_prompt_and_every_message_object():
    messages = session(2) + [{"role": "user", "content": "and now the docs"}]
    repaired, dropped = repair.repair(messages)
    assert dropped == 0 and repaired == messages
    assert all(a is b for a, b in zip(repaired, messages, strict=True))   # the log: no rewrite


def test_a_turn_that_failed_before_its_first_reply_is_undone():
    before = session(1)
    prompt = {"role": "user", "content": "write two files"}
    messages = before + [prompt]
    compacted, done = repair.keep_completed(messages, len(before), prompt, None, [])
    assert (compacted, done) == (False, 0) and messages == before


def test_a_turn_that_failed_in_a_batch_keeps_the_calls_that_ran_and_the_one_running():
    before = session(1)
    prompt = {"role": "user", "content": "write three files"}
    reply = {"role": "assistant", "content": [call("a"), call("b"), call("c")]}
    messages = before + [prompt, reply]
    compacted, done = repair.keep_completed(messages, len(before), prompt, None,
                                             [result("a", "wrote a")])
    assert (compacted, done) == (False, 2) and valid(messages) is None
    assert messages[len(before):] == [prompt, {"role": "assistant", "content": [call("a"),
                                                                                call("b")]},
                                      {"role": "user", "content": [result("a", "wrote a"),
                                                                   interrupted("b")]}]


def test_a_batch_stopped_by_ctrl_c_is_kept_with_a_result_for_every_call():
    before = session(1)
    prompt = {"role": "user", "content": "write three files"}
    reply = {"role": "assistant", "content": [call("a"), call("b"), call("c")]}
    messages = before + [prompt, reply]
    calls = [{"id": id} for id in "abc"]
    results = pairing.after_ctrl_c(calls, [result("a", "wrote a")])
    compacted, done = repair.keep_completed(messages, len(before), prompt, results, [])
    assert (compacted, done) == (False, 2) and valid(messages) is None   # c never ran
    assert messages[len(before):] == [prompt, reply, {"role": "user", "content": results}]


def test_after_a_compaction_in_the_failed_turn_the_history_goes_on_from_the_summary():
    prompt = {"role": "user", "content": "go"}
    summary = {"role": "user", "content": "Summary: a written."}
    messages = [summary, {"role": "assistant", "content": [call("a")]}]   # the prompt is gone
    compacted, done = repair.keep_completed(messages, 3, prompt, None, [result("a")])
    assert compacted and done == 1 and valid(messages) is None
    assert messages == [summary, {"role": "assistant", "content": [call("a")]},
                        {"role": "user", "content": [result("a")]}]


def test_ctrl_c_in_a_batch_answers_every_call_and_only_the_ones_that_ran_count():
    calls = [{"id": f"t{n}"} for n in range(4)]
    results = pairing.after_ctrl_c(calls, [result("t0", "done")])
    assert [r["tool_use_id"] for r in results] == ["t0", "t1", "t2", "t3"]
    assert [r["content"] for r in results] == ["done", pairing.INTERRUPTED, pairing.NOT_RUN,
                                               pairing.NOT_RUN]
    assert all(r.get("is_error") for r in results[1:])
    messages = [{"role": "user", "content": results}]
    assert repair.ran_calls(messages) == 2             # t0 ran; t1 was running: it may have acted


# ---------------------------------------------------------------- a new reply

@pytest.mark.parametrize("given, expected", [
    ({"command": "ls"}, {"command": "ls"}), ('{"command": "ls"}', {"command": "ls"}),
    ("ls -l", None), (["ls"], None), ('["ls"]', None), (None, None), ("[" * 5000, None)])
def test_a_tool_input_is_taken_back_as_an_object_or_not_at_all(given, expected):
    assert pairing.input_object(given) == expected
