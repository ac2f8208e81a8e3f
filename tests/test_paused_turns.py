"""A turn the server paused (stop_reason pause_turn): the harness sends the reply back and the
model goes on, at most MAX_RESUMES times a call. Two odd shapes from compatible servers:
a paused reply that already holds a call of ours, and a turn that never stops pausing."""

import s03_todo
from harness import model_call
from harness.stand_in.script import reply, text, tool
from helpers import tool_results, words


def test_a_paused_reply_holding_a_tool_call_runs_the_call_instead_of_resuming(run_main, workdir):
    """Resumed as it was, the call would go back without its result, which the API refuses
    (400: tool_use ids without tool_result). Its call runs, as for any reply with calls."""
    script = [reply(text("Writing it."), tool("write_file", {"path": "a.txt", "content": "x"}),
                    stop_reason="pause_turn"),
              reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "write a.txt", script=script)
    assert code == 0 and api.violations == [], err
    assert (workdir / "a.txt").read_text() == "x"
    assert not tool_results(api.requests[1])[0].get("is_error")
    assert out.strip().endswith("done")


def test_a_turn_that_never_stops_pausing_says_so_and_can_go_on(run_main):
    paused = [reply(text(f"p{n}"), stop_reason="pause_turn")
              for n in range(model_call.MAX_RESUMES + 1)]
    script = paused + [reply(text("finished"))]
    code, out, err, api = run_main(s03_todo, stdin="work\ngo on\nq\n", script=script)
    assert code == 0 and api.violations == [], err
    assert len(api.requests) == model_call.MAX_RESUMES + 2
    assert "[the server paused this turn" in out
    # The next prompt goes on from where it paused: the API takes the history as it is.
    last = api.requests[-1]["messages"]
    assert last[-1] == {"role": "user", "content": "go on"} and last[-2]["role"] == "assistant"
    assert "s03 >> finished" in out


def test_a_resumed_reply_with_a_call_without_an_id_is_one_line_as_a_first_one_is(run_main):
    """The part of a turn that comes after a pause is checked as the first part is: a call
    without an id joined the history, and every later request was refused."""
    script = [reply(text("Thinking it over."), stop_reason="pause_turn"),
              reply({"type": "tool_use", "id": "", "name": "bash", "input": {"command": "ls"}})]
    code, out, err, api = run_main(s03_todo, "work", script=script)
    assert code == 1 and "Traceback" not in err, err
    assert f"error: the endpoint at {api.url} did not answer like the Messages API: it sent " \
           'a tool_use block whose id is ""' in words(err)
