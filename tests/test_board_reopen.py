"""A task another agent completed is theirs, as one they have in progress is: a model that
starts it (two agents raced for it, one finished first) is told so and changes nothing; a
person reopens it on purpose (/task start), and the answer says whose work was reopened."""

import json

import pytest

import s07_task_system
from harness.stand_in.script import reply, text, tool
from helpers import listing, tool_results, words
from s07_task_system import TaskManager


def done_by_bob(board):
    """bob started #1 and completed it, which freed #2."""
    bob = TaskManager(board, agent="bob")
    bob.create("Design the data model")
    bob.create("Implement the API", blocked_by=[1])
    bob.update(1, status="in_progress")
    assert "Unblocked: #2 Implement the API" in bob.update(1, status="completed")
    return bob


@pytest.mark.parametrize("status", ["in_progress", "pending"])
def test_a_model_cannot_reopen_a_task_another_agent_completed(board, status):
    done_by_bob(board)
    before = listing(TaskManager(board))
    with pytest.raises(ValueError) as refused:
        TaskManager(board, agent="alice").update(1, status=status)
    message = str(refused.value)
    assert message.startswith("#1 was completed by bob;"), message
    assert "create a new task" in message and "/task start 1" in message
    assert listing(TaskManager(board)) == before                 # nothing changed
    assert TaskManager(board).store.load(1)["unblocked"] == [2]  # bob's record kept


@pytest.mark.parametrize("change", [{"owner": "alice"}, {"owner": ""}, {"status": "deleted"}])
def test_a_model_cannot_take_or_delete_a_task_another_agent_completed(board, change):
    """Taking its owner first would make it the taker's to reopen; deleting it undoes bob's
    work as surely as reopening it."""
    done_by_bob(board)
    before = listing(TaskManager(board))
    with pytest.raises(ValueError) as refused:
        TaskManager(board, agent="alice").update(1, **change)
    assert str(refused.value).startswith("#1 was completed by bob;")
    assert listing(TaskManager(board)) == before


def test_a_task_completed_without_being_started_is_its_completers(board):
    """Models often complete a task straight from pending: it is still their work."""
    carol = TaskManager(board, agent="carol")
    carol.create("Write the docs")
    out = carol.update(1, status="completed")
    assert out.startswith("Updated [x] #1: Write the docs (owner: carol)")
    with pytest.raises(ValueError, match="^#1 was completed by carol;"):
        TaskManager(board, agent="alice").update(1, status="in_progress")


def test_the_agent_that_completed_it_may_reopen_it(board):
    bob = done_by_bob(board)
    out = bob.update(1, status="in_progress")
    assert out.startswith("Updated [>] #1: Design the data model (owner: bob)")
    assert "was completed by" not in out and "#2 stopped waiting for it" in out


def test_a_person_reopens_it_and_the_answer_says_whose_work_it_was(board):
    done_by_bob(board)
    out = TaskManager(board, agent="pat").update(1, status="in_progress", force=True)
    lines = out.splitlines()
    assert lines[0] == "Updated [>] #1: Design the data model (owner: pat)"
    assert "#1 was completed by bob; reopened" in lines[1:]
    assert any(x.startswith("Reopened #1: #2 stopped waiting for it") for x in lines)


def test_the_models_start_of_a_task_bob_completed_comes_back_as_an_error(run_main, workdir):
    done_by_bob(workdir / ".tasks")
    code, out, err, api = run_main(s07_task_system, "--name", "alice", "take #1", script=[
        reply(tool("task_update", {"task_id": 1, "status": "in_progress"})),
        reply(text("it is done already"))])
    refused = tool_results(api.requests[1])[0]
    assert refused["is_error"] is True
    assert "#1 was completed by bob; to do more on it, create a new task" in refused["content"]
    task = json.loads((workdir / ".tasks" / "task_1.json").read_text())
    assert (task["status"], task["owner"], task["unblocked"]) == ("completed", "bob", [2])


def test_a_persons_task_start_in_the_repl_reopens_bobs_finished_task_and_says_so(run_main,
                                                                                workdir):
    done_by_bob(workdir / ".tasks")
    code, out, err, api = run_main(s07_task_system, "--name", "pat", key=None,
                                   stdin="/task start 1\n/tasks\nq\n")
    assert code == 0 and api.requests == [], err
    shown = words(out + err)
    assert "#1 was completed by bob; reopened" in shown
    assert "[>] #1: Design the data model (owner: pat)" in shown
