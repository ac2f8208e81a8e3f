"""Every text that joins the history can be sent to the API again: a model's tool input with
half an emoji, and tool results holding bytes that are not UTF-8.

A lone surrogate (half an emoji "\\ud83d", or a stray byte read with surrogateescape) cannot be
encoded as UTF-8: once it is in the history, every later request of the session fails. The
stand-in receives only what the real client could encode, so "the next request arrived" is the
check.
"""

import json
import os

import s03_todo
import s07_task_system
from helpers import tool_results, words
from harness.stand_in.script import reply, text, tool

HALF_AN_EMOJI = "Party \ud83d"


def sent_inputs(api, request: int) -> list:
    """The tool_use inputs of the assistant messages the loop sent in request `request`."""
    messages = api.requests[request]["messages"]
    return [b["input"] for m in messages if m["role"] == "assistant" for b in m["content"]
            if b["type"] == "tool_use"]


def test_half_an_emoji_in_a_tool_input_sent_as_json_text_is_mended(
        run_main, workdir):
    """Some endpoints send the input as JSON text; json.loads turns its escape into a lone
    surrogate."""
    as_text = json.dumps({"path": "party.txt", "content": HALF_AN_EMOJI})
    script = [reply(tool("write_file", as_text)), reply(text("done")), reply(text("still here"))]
    code, out, err, api = run_main(s03_todo, stdin="go\nagain\nq\n", script=script)
    assert code == 0 and "still here" in out and api.violations == [], err
    assert len(api.requests) == 3 and "could not be sent" not in err
    assert sent_inputs(api, 2) == [{"path": "party.txt", "content": "Party \ufffd"}]
    assert (workdir / "party.txt").read_text(encoding="utf-8") == "Party \ufffd"


def test_half_an_emoji_in_a_streamed_tool_input_is_one_line_and_the_repl_goes_on(run_main,
                                                                                 workdir):
    """The stand-in streams the input as JSON, where half an emoji is the escape \\ud83d. The
    SDK's parser (jiter) refuses it: the turn fails in one line naming the endpoint, nothing
    half-made joins the history, and the next prompt is sent as if the turn had not been."""
    script = [reply(tool("write_file", {"path": "party.txt", "content": HALF_AN_EMOJI})),
              reply(text("fine"))]
    code, out, err, api = run_main(s03_todo, stdin="go\nagain\nq\n", script=script)
    assert code == 0 and "fine" in out and api.violations == [], err
    assert f"the endpoint at {api.url} did not answer like the Messages API" in words(err)
    assert [m["content"] for m in api.requests[1]["messages"]] == ["again"]
    assert not (workdir / "party.txt").exists()


def test_a_task_file_name_that_is_not_utf8_leaves_the_session_working(run_main, workdir):
    tasks = workdir / ".tasks"
    tasks.mkdir()
    (tasks / os.fsdecode(b"task_9\xff.json")).write_text("{}")
    script = [reply(tool("task_list", {})), reply(text("listed")), reply(text("still here"))]
    code, out, err, api = run_main(s07_task_system, stdin="list\nagain\nq\n", script=script)
    assert code == 0 and "still here" in out and api.violations == [], err
    assert len(api.requests) == 3 and "could not be sent" not in err
    listed = tool_results(api.requests[1])[0]["content"]
    assert "task_9\ufffd.json" in listed


def test_bash_output_with_bytes_that_are_not_utf8_leaves_the_session_working(run_main, workdir):
    (workdir / os.fsdecode(b"caf\xe9.txt")).write_text("x")
    command = "ls; printf 'half an emoji: \\360\\237\\n'"
    script = [reply(tool("bash", {"command": command})), reply(text("done")),
              reply(text("still here"))]
    code, out, err, api = run_main(s03_todo, stdin="go\nagain\nq\n", script=script)
    assert code == 0 and "still here" in out and api.violations == [], err
    listed = tool_results(api.requests[1])[0]["content"]
    assert "caf\ufffd.txt" in listed and "half an emoji: \ufffd" in listed
