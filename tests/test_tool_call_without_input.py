"""A tool call whose input is null, or missing: what a weak model sends for a tool that takes
no arguments (task_list), and what the SDK's stream makes of an input of "null".

The call runs with no arguments: a tool that needs none runs, one that needs some is refused
in an is_error result that names what is missing. The history keeps the call with an empty
object as its input (the API takes nothing else there), and the turn goes on."""

import s03_todo
import s07_task_system
from harness.stand_in.script import reply, text, tool
from helpers import tool_results


def test_a_bash_call_with_a_null_or_missing_input_is_an_error_the_model_can_act_on(run_main):
    missing = {"type": "tool_use", "id": "toolu_missing", "name": "bash"}
    script = [reply(tool("bash", None), missing), reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "go", script=script)
    assert code == 0 and "Traceback" not in err, err
    assert api.violations == [] and out.strip().endswith("done")
    null, absent = tool_results(api.requests[1])
    for result in (null, absent):
        assert result["is_error"] and "missing required argument 'command'" in result["content"]
    calls = api.requests[1]["messages"][1]["content"]
    assert [call["input"] for call in calls] == [{}, {}]


def test_task_list_with_a_null_input_shows_the_board_and_the_repl_goes_on(run_main):
    script = [reply(tool("task_list", None)), reply(text("done")), reply(text("again"))]
    code, out, err, api = run_main(s07_task_system, "--name", "alice", script=script,
                                   stdin="list the board\nonce more\n")
    assert code == 0 and "Traceback" not in err and "turn failed" not in err, err
    [result] = tool_results(api.requests[1])
    assert not result.get("is_error") and "No tasks" in result["content"]
    assert "again" in out
