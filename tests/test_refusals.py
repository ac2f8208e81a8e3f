"""A reply the API refused (stop_reason "refusal") is taken out of the conversation.

The API's documentation: after a refusal, remove or change the refused turn before going on;
a conversation that still holds it is refused again. So the refused turn goes, as a failed
turn does (cli's _keep_completed): a turn that ran no tool is undone whole, and one that ran
tools keeps those calls and their results, so that the model knows what was done, but never
the refused reply. The user is told, with the API's explanation when it gives one.
"""

import json

import s03_todo
from harness.stand_in.script import reply, text, tool


def sent_texts(request) -> str:
    """Everything a request's messages hold, as one string to search."""
    return json.dumps(request["messages"])


def test_a_refused_turn_is_not_sent_again_with_the_next_prompt(run_main):
    script = [reply(text("Sure, here is how"), stop_reason="refusal"), reply(text("Hello!"))]
    code, out, err, api = run_main(s03_todo, stdin="the refused ask\nsay hi\nq\n",
                                   script=script)
    assert code == 0 and api.violations == [], err
    assert len(api.requests) == 2
    second = api.requests[1]["messages"]
    assert second == [{"role": "user", "content": "say hi"}]
    assert "[the model refused to continue with this request]" in out + err
    assert "[turn refused; the conversation is as it was before it]" in err
    assert "Hello!" in out


def test_a_refused_turn_keeps_the_tool_calls_that_ran_before_it(run_main, workdir):
    write = tool("write_file", {"path": "notes.txt", "content": "kept"})
    script = [reply(write), reply(text("And now"), stop_reason="refusal"), reply(text("ok"))]
    code, out, err, api = run_main(s03_todo, stdin="write notes, then more\nwhat next?\nq\n",
                                   script=script)
    assert code == 0 and api.violations == [], err
    assert (workdir / "notes.txt").read_text() == "kept"
    sent = sent_texts(api.requests[2])
    assert "write_file" in sent and "notes.txt" in sent      # the call that ran, and its result
    assert "And now" not in sent                             # never the refused reply
    assert api.requests[2]["messages"][-1] == {"role": "user", "content": "what next?"}
    assert "[turn refused after 1 tool call: they are kept in the conversation" in err


def test_a_one_shot_refusal_is_not_in_the_session_that_continue_resumes(run_main):
    code, out, err, api = run_main(s03_todo, "hello", script=[reply(text("Hi there"))])
    assert code == 0, err
    refused = reply(text("Sure, here is how"), stop_reason="refusal")
    code, out, err, api = run_main(s03_todo, "--continue", "the refused ask", script=[refused])
    # Not done: a script that ran the turn can tell (status 1, as an API error is).
    assert code == 1 and "[the model refused to continue with this request]" in out + err
    code, out, err, api = run_main(s03_todo, "--continue", "say hi",
                                   script=[reply(text("Hello!"))])
    assert code == 0 and api.violations == [], err
    sent = sent_texts(api.requests[0])
    assert "Hi there" in sent                                # the session before it goes on
    assert "the refused ask" not in sent and "Sure, here is how" not in sent
    assert api.requests[0]["messages"][-1] == {"role": "user", "content": "say hi"}


def test_the_apis_explanation_of_a_refusal_is_shown_as_text_never_as_codes(run_main):
    details = {"type": "refusal", "category": "cyber",
               "explanation": "This request was declined: cyber harm.\x1b[2J"}
    refused = reply(text("Sure"), stop_reason="refusal", stop_details=details)
    code, out, err, api = run_main(s03_todo, "the refused ask", script=[refused])
    assert code == 1, err
    assert "[refused: This request was declined: cyber harm." in out + err
    assert "\x1b" not in out + err                         # the endpoint's codes, escaped
