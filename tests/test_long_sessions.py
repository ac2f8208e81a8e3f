"""Long sessions (issue 21): a turn's budget, --continue, and big results read back whole."""

import json
import re
import shlex

import pytest

import s03_todo
import s07_task_system
from harness import cli, terminal
from harness.stand_in.script import error, reply, text, tool
from helpers import messages, tool_results, words


@pytest.mark.slow
def test_a_200_call_turn_runs_to_its_end_by_default_in_s07(run_main):
    script = [reply(tool("bash", {"command": f"echo {n}"})) for n in range(199)]
    script.append(reply(text("all done")))
    code, out, err, api = run_main(s07_task_system, "a long job", script=script)
    assert code == 0 and len(api.requests) == 200 and api.violations == []
    assert out.strip() == "all done"


@pytest.mark.slow
def test_a_stopped_one_shot_run_says_how_to_go_on_and_continue_loses_nothing(run_lesson, workdir):
    first = [reply(tool("bash", {"command": f"echo step {n}"})) for n in range(5)]
    proc, api = run_lesson("s07_task_system", "a job of many steps", "--max-steps", "3",
                           script=first, in_process=True)
    # main() returns 3; that the process exits 3 is test_docs.py's budget test.
    assert proc.returncode == 3 and len(api.requests) == 3
    assert "[stopped: 3 model calls in this turn" in proc.stdout
    assert 'python s07_task_system.py --continue "go on"' in proc.stderr
    proc, api = run_lesson("s07_task_system", "--continue", "go on",
                           script=[reply(text("finished"))], in_process=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "finished" and api.violations == []
    sent = api.requests[0]["messages"]
    assert sent[0]["content"] == "a job of many steps"
    # The prompt: a message of its own, or after the results of the calls that ran.
    last = sent[-1]["content"]
    assert last == "go on" or last[-1] == {"type": "text", "text": "go on"}
    ran = [r["content"] for m in sent if isinstance(m["content"], list) for r in m["content"]
           if r.get("type") == "tool_result"]
    assert ran == ["step 0", "step 1", "step 2"]       # every call that ran, and its result


@pytest.mark.parametrize("typed", [["--board", "myboard", "--name", "alice"],
                                   ["--board=myboard", "--name=alice"]])    # as parsed
def test_the_advice_to_go_on_keeps_the_board_and_the_name_given(run_lesson, workdir, typed):
    """The advice named only --continue: followed, it went on on ./.tasks as another agent,
    where the task the stopped run made is not ("no task #1")."""
    first = [reply(tool("task_create", {"subject": "Ship it"})),
             reply(tool("bash", {"command": "echo 1"}))]
    proc, api = run_lesson("s07_task_system", *typed, "--max-steps", "1", "work", script=first,
                           in_process=True)
    go_on = 'python s07_task_system.py --board myboard --name alice --continue "go on"'
    assert proc.returncode == 3 and f"[to go on: {go_on}, or raise --max-steps]" in words(
        proc.stderr), proc.stderr
    # Followed word for word, it finds the task on the board the run used.
    script = [reply(tool("task_update", {"task_id": 1, "status": "completed"})),
              reply(text("done"))]
    proc, api = run_lesson("s07_task_system", *shlex.split(go_on)[2:], script=script,
                           in_process=True)
    assert proc.returncode == 0 and "Updated [x] #1: Ship it" in tool_results(api.requests[1])[0][
        "content"], proc.stderr


def test_a_budget_of_one_call_is_said_in_the_singular(run_lesson):
    proc, api = run_lesson("s03_todo", "a job", "--max-steps", "1",
                           script=[reply(tool("bash", {"command": "echo 1"}))], in_process=True)
    assert proc.returncode == 3 and len(api.requests) == 1
    assert "[stopped: 1 model call in this turn without finishing]" in proc.stdout


@pytest.mark.slow
def test_a_resumed_session_is_measured_after_layer_1_not_compacted_for_its_raw_history(run_lesson):
    """A new process starts with layer 1's memory empty: before layer 2 measures the resumed
    history, layer 1 clears what the old process had cleared, so no needless summary is asked
    for (a summary call that would send the whole raw history)."""
    script = [reply(tool("bash", {"command": f"seq -s ' ' 1 {8_000 + n}"})) for n in range(6)]
    # In process: each main() starts with layer 1's memory empty, as a new process does.
    proc, _ = run_lesson("s06_compact", "print numbers", script=script + [reply(text("printed"))],
                         env={"COMPACT_THRESHOLD": "200000"}, in_process=True)
    assert proc.returncode == 0, proc.stderr
    proc, api = run_lesson("s06_compact", "--continue", "go on", script=[reply(text("finished"))],
                           env={"COMPACT_THRESHOLD": "40000"}, in_process=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "finished", proc.stderr
    assert api.violations == [] and len(api.requests) == 1            # no summary call
    # the view, not the raw history
    assert len(json.dumps(api.requests[0]["messages"])) // 4 < 40_000
    # /context in a resumed REPL measures what layer 2 will: it does not promise a compaction.
    proc, api = run_lesson("s06_compact", "--continue", stdin="/context\nq\n",
                           env={"COMPACT_THRESHOLD": "40000"}, in_process=True)
    assert proc.returncode == 0 and api.requests == [], proc.stderr
    assert "to go before layer 2 compacts" in proc.stdout and "over it by" not in proc.stdout


def test_a_one_shot_turn_the_api_refused_is_not_kept_for_continue(run_lesson):
    """As in the REPL, a turn that failed before any tool ran is undone: --continue must not
    send its prompt again, beside the next one, as if the model had ignored it."""
    proc, api = run_lesson("s06_compact", "hello", script=[reply(text("Hi."))], in_process=True)
    assert proc.returncode == 0, proc.stderr
    proc, api = run_lesson("s06_compact", "--continue", "refused prompt",
                           script=[error(400, "messages: something the API refuses")],
                           in_process=True)
    assert proc.returncode == 1
    assert [m for m in messages(proc.stderr) if m.startswith("error")] == [
        "error: the API refused the request (400 messages: something the API refuses)"]
    proc, api = run_lesson("s06_compact", "--continue", "next prompt",
                           script=[reply(text("Still here."))], in_process=True)
    assert proc.returncode == 0, proc.stderr
    sent = api.requests[0]["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["hello", "next prompt"]


def test_a_one_shot_turn_that_finished_is_kept_when_printing_its_answer_fails(in_tmp, run,
                                                                                monkeypatch):
    """Only a failed loop is undone: a turn the model finished stays, for --continue, even if
    the answer could not be printed."""
    def loop(history, run, max_steps):
        history.append({"role": "assistant", "content": [{"type": "text", "text": "Hi."}]})
        return "Hi."

    def unprintable(answer, screen):
        raise UnicodeEncodeError("ascii", answer, 0, 1, "the terminal takes ASCII only")

    monkeypatch.setattr(terminal, "print_answer", unprintable)
    lesson = cli.Lesson("s06_compact", "", loop)
    history = []
    with pytest.raises(UnicodeEncodeError):
        cli._one_shot(lesson, run, history, {"max_steps": 5}, "hello", "python s06.py")
    assert [m["role"] for m in history] == ["user", "assistant"]


def test_continue_with_no_saved_session_is_one_line(run_lesson):
    proc, api = run_lesson("s06_compact", "--continue", "go on", in_process=True)
    assert proc.returncode == 1 and api.requests == [] and len(messages(proc.stderr)) == 1
    assert "no saved session" in proc.stderr


def test_a_300000_character_output_is_read_back_whole_after_layer_1_clears_it(run_lesson, workdir):
    big = "python3 -c \"print('\\n'.join(f'line {n:06d} ' + 'x' * 40 for n in range(6000)))\""
    script = [reply(tool("bash", {"command": big}))]
    script += [reply(tool("bash", {"command": f"echo {n}" + " " * 500})) for n in range(4)]
    script += [lambda body: reply(text(json.dumps(body["messages"])))]
    proc, api = run_lesson("s06_compact", "make a big log", script=script,
                           env={"COMPACT_THRESHOLD": "20000"},   # 8,000 tokens in a batch
                           in_process=True)
    assert proc.returncode == 0, proc.stderr
    first = tool_results(api.requests[1], -1)[0]["content"]
    saved = re.search(r"is saved in (\S+\.txt);", first)[1]
    whole = (workdir / saved).read_text(encoding="utf-8").splitlines()
    assert len(whole) == 6000 and whole[3000].startswith("line 003000 ")   # the middle too
    last = api.requests[-1]["messages"]                   # by now layer 1 has cleared it
    placeholder = tool_results({"messages": last[:3]}, -1)[0]["content"]
    assert placeholder.startswith("[Previous: used bash") and saved in placeholder


@pytest.mark.slow
def test_continue_without_a_prompt_opens_the_repl_on_the_saved_conversation(run_lesson):
    proc, _ = run_lesson("s03_todo", "remember the word tangerine",
                         script=[reply(tool("bash", {"command": "echo noted"})),
                                 reply(text("noted"))], in_process=True)
    assert proc.returncode == 0
    proc, api = run_lesson("s03_todo", "--continue", stdin="what was the word?\nq\n",
                           script=[reply(text("tangerine"))], in_process=True)
    assert proc.returncode == 0 and "tangerine" in proc.stdout and api.violations == []
    sent = api.requests[0]["messages"]
    assert sent[0]["content"] == "remember the word tangerine" and len(sent) == 5  # all of it, then
    assert sent[-1]["content"] == "what was the word?"                             # the new prompt


def test_continue_renames_tool_use_ids_an_endpoint_used_twice(run_main):
    """An endpoint that numbers its ids from 1 in each process reuses them after --continue; the
    saved session then holds one id twice, which the API refuses on every later request."""
    code, out, err, _ = run_main(s03_todo, "say one", script=[
        reply(tool("bash", {"command": "echo one"}, id="toolu_01")), reply(text("said one"))])
    assert code == 0, err
    run_main(s03_todo, "--continue", "say two", script=[
        reply(tool("bash", {"command": "echo two"}, id="toolu_01")), reply(text("said two"))])
    code, out, err, api = run_main(s03_todo, "--continue", "go on", script=[reply(text("resumed"))])
    assert code == 0 and api.violations == [], err
    sent = api.requests[0]["messages"]
    ids = [b["id"] for m in sent if m["role"] == "assistant" for b in m["content"]
           if b["type"] == "tool_use"]
    answers = [(r["tool_use_id"], r["content"]) for m in sent if isinstance(m["content"], list)
               for r in m["content"] if r.get("type") == "tool_result"]
    assert len(set(ids)) == len(ids) == 2
    assert answers == [(ids[0], "one"), (ids[1], "two")]


@pytest.mark.slow
def test_a_reply_that_reuses_an_earlier_tool_use_id_is_run_and_answered(run_lesson):
    proc, _ = run_lesson("s06_compact", "say one", script=[
        reply(tool("bash", {"command": "echo one"}, id="toolu_01")), reply(text("said one"))],
        in_process=True)
    assert proc.returncode == 0, proc.stderr
    proc, api = run_lesson("s06_compact", "--continue", "say two", script=[
        reply(tool("bash", {"command": "echo two"}, id="toolu_01")), reply(text("said two"))],
        in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    assert proc.stdout.strip() == "said two"
    assert tool_results(api.requests[1])[0]["content"] == "two"    # not "[Previous: used bash]"
