"""s03 run as a user runs it, against the loopback stand-in: what a run does, through its main()
in process (the same client and code, without the SDK's import paid for each run); what only a
process shows (Ctrl-C, a closed terminal, SIGTERM) as `python s03_todo.py ...`."""

import importlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import s03_todo
from helpers import (ROOT, lesson_command, clean_env, command_ended, group_ends,
                     popen_taking_ctrl_c, tool_results)
from harness.stand_in import StandInAPI
from harness.stand_in.script import error, reply, text, tool
from helpers import Pinging, messages, refusing_port, words


def todo(*statuses):
    return tool("todo", {"items": [{"id": str(n), "text": f"step {n}", "status": s}
                                   for n, s in enumerate(statuses, 1)]})


def test_todo_rendering_reminder_and_refused_second_in_progress(run_lesson, workdir):
    script = [
        reply(text("Planning."), todo("in_progress", "pending")),
        reply(todo("in_progress", "in_progress")),                       # breaks a rule
        reply(tool("write_file", {"path": "hello.py", "content": "print('hi')\n"})),
        reply(tool("bash", {"command": "cat hello.py"})),
        reply(tool("read_file", {"path": "hello.py"}), tool("read_file", {"path": "missing.py"})),
        reply(todo("completed", "completed")),
        reply(text("All done.")),
    ]
    proc, api = run_lesson("s03_todo", "write hello.py and track your steps", script=script,
                           in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "All done."
    assert api.violations == [] and len(api.requests) == 7
    reqs = api.requests
    assert tool_results(reqs[1])[0]["content"] == "[>] #1: step 1\n[ ] #2: step 2\n(0/2 completed)"
    refused = tool_results(reqs[2])[0]
    assert refused["is_error"] is True and "only one may be in_progress" in refused["content"]
    # Three rounds without todo (write, bash, read): the reminder follows the results, once
    # they are all there.
    for n in (3, 4):
        assert all(b["type"] == "tool_result" for b in reqs[n]["messages"][-1]["content"])
    last = reqs[5]["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    assert "<reminder>" in last[2]["text"] and last[1]["is_error"] is True
    # todo used: no nag
    assert all(b["type"] == "tool_result" for b in reqs[6]["messages"][-1]["content"])
    assert (workdir / "hello.py").read_text() == "print('hi')\n"
    assert "> todo\n  items=[\n    {\"id\": \"1\"" in proc.stderr and "[tokens:" in proc.stderr
    assert "Traceback" not in proc.stderr
    # Each request carries the base tools and todo; the system prompt; the configured model.
    assert [t["name"] for t in reqs[0]["tools"]] == ["bash", "read_file", "write_file",
                                                      "edit_file", "todo"]
    assert reqs[0]["model"] == "claude-sonnet-5-5"


# The edge cases below run main() in-process too.

def test_a_tool_call_cut_by_max_tokens_is_not_run(run_main, workdir):
    cut = reply(text("Writing the file"), tool("write_file", {"path": "x.txt", "content": "par"}),
                stop_reason="max_tokens")
    code, out, err, api = run_main(s03_todo, "go", script=[cut])
    assert code == 0
    assert "Writing the file" in out and "[answer cut: the model reached max_tokens" in out
    assert not (workdir / "x.txt").exists()


def test_complete_tool_calls_before_the_cut_one_run_and_the_cut_one_does_not(run_main, workdir):
    """llama-server, asked for tools, returned five parsed calls with stop_reason max_tokens:
    only the last block can be half-written, so the calls before it run and the model is told
    about the last."""
    cut = reply(tool("write_file", {"path": "a.txt", "content": "whole"}),
                tool("write_file", {"path": "b.txt", "content": "par"}), stop_reason="max_tokens")
    code, out, err, api = run_main(s03_todo, "go", script=[cut, reply(text("done"))])
    assert code == 0 and out.strip() == "done" and api.violations == []
    assert (workdir / "a.txt").read_text() == "whole" and not (workdir / "b.txt").exists()
    sent = api.requests[1]["messages"]
    assert [b["input"]["path"] for b in sent[-2]["content"] if b["type"] == "tool_use"] == ["a.txt"]
    assert "write_file call was cut off by max_tokens" in json.dumps(sent[-1]["content"])
    assert "cut off by max_tokens" in err


def test_pause_turn_continues_and_refusal_is_reported(run_main):
    script = [reply(text("Working"), stop_reason="pause_turn"), reply(stop_reason="refusal")]
    code, out, err, api = run_main(s03_todo, "go", script=script)
    assert code == 1 and api.violations == [] and len(api.requests) == 2
    assert "the model refused" in out
    assert api.requests[1]["messages"][-1] == {"role": "assistant", "content": [text("Working")]}


def test_the_step_limit_ends_the_turn_with_a_clear_message(run_main):
    script = [reply(tool("bash", {"command": "true"})) for _ in range(50)]
    code, out, err, api = run_main(s03_todo, "loop forever", script=script)
    assert code == 3 and len(api.requests) == 50 and api.violations == []   # 3: not finished
    assert "[stopped: 50 model calls in this turn" in out
    assert 'python s03_todo.py --continue "go on"' in err


def test_no_key_is_one_line_and_makes_no_request(run_lesson):
    proc, api = run_lesson("s03_todo", "hi", key=None, in_process=True)
    assert proc.returncode == 1 and api.requests == []
    assert len(messages(proc.stderr)) == 1 and "ANTHROPIC_API_KEY" in words(proc.stderr)
    assert ".env.example" in words(proc.stderr)


def test_a_bad_key_is_one_line_and_exit_1(run_lesson):
    proc, api = run_lesson("s03_todo", "hi", script=[error(401, "invalid x-api-key")],
                           in_process=True)
    assert proc.returncode == 1 and proc.stdout == ""
    assert messages(proc.stderr) == ["error: the API rejected the key (401 invalid x-api-key): "
                                     "check ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)"]


def test_api_failures_are_one_line_and_exit_1(run_main):
    for script, expected in [([error(400, "max_tokens too large")],
                              "refused the request (400 max_tokens too large)"),
                             ([error(429, "slow down")] * 3,
                              "rate limited (429 slow down) even after retries"),
                             ([error(529, "Overloaded")] * 3,
                              "failed (529 Overloaded) even after retries"),
                             ([error(404, "model: x")],
                              "not found (404 model: x): check MODEL_ID")]:
        code, out, err, api = run_main(s03_todo, "hi", script=script)
        assert code == 1 and expected in err, (expected, err)
        assert len(messages(err)) == 1 and "Traceback" not in err


def test_transient_failures_are_retried_and_the_turn_completes(run_main):
    script = [error(529), error(500), reply(text("fine"))]
    code, out, err, api = run_main(s03_todo, "hi", script=script)
    assert code == 0 and out.strip() == "fine" and len(api.requests) == 3


@pytest.mark.usefixtures("quick_retries")
def test_an_unreachable_endpoint_is_one_line(run_main):
    with refusing_port() as port:
        url = f"http://127.0.0.1:{port}"
        code, out, err, api = run_main(s03_todo, "hi", env={"ANTHROPIC_BASE_URL": url})
    assert code == 1 and len(messages(err)) == 1
    assert f"cannot reach the API at http://127.0.0.1:{port}" in err


def test_dotenv_is_read_and_the_real_environment_wins(run_main, workdir):
    (workdir / ".env").write_text("ANTHROPIC_API_KEY=from-dotenv\nMODEL_ID=model-from-dotenv\n")
    code, out, err, api = run_main(s03_todo, "hi", script=[reply(text("a"))], key=None)
    assert code == 0 and api.requests[0]["model"] == "model-from-dotenv"
    code, out, err, api = run_main(s03_todo, "hi", script=[reply(text("a"))],
                                   env={"MODEL_ID": "model-from-env"})
    assert api.requests[0]["model"] == "model-from-env"


@pytest.mark.parametrize("lesson, commands", [
    ("s03_todo", "/help, /context, /cost, /clear"),
    ("s06_compact", "/help, /compact, /context, /cost, /clear"),
    ("s07_task_system", "/help, /tasks, /task, /compact, /context, /cost, /clear")])
def test_every_lesson_has_help_and_the_no_key_line(run_main, lesson, commands):
    module = importlib.import_module(lesson)
    code, out, err, api = run_main(module, "--help")
    assert code == 0 and f"python {lesson}.py" in out and "open a REPL" in " ".join(out.split())
    assert "--demo" in out
    assert "ANTHROPIC_API_KEY" in out
    assert (f"In the REPL: {commands}." in " ".join(out.split())) == bool(commands)
    code, out, err, api = run_main(module, "hi", key=None)
    assert code == 1 and api.requests == [] and len(messages(err)) == 1
    assert "ANTHROPIC_API_KEY" in err


@pytest.mark.slow
def test_the_repl_keeps_the_conversation_and_quits(run_lesson):
    script = [reply(text("first answer")), reply(tool("bash", {"command": "echo hi"})),
              reply(text("second"))]
    proc, api = run_lesson("s03_todo", script=script, stdin="one\n\ntwo\nq\n", in_process=True)
    assert proc.returncode == 0 and api.violations == []
    assert "s03 >> " in proc.stdout and "first answer" in proc.stdout and "second" in proc.stdout
    roles = [m["role"] for m in api.requests[2]["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    proc, _ = run_lesson("s03_todo", script=[], stdin="", in_process=True)  # EOF quits too
    assert proc.returncode == 0


def test_the_repl_survives_an_api_error_and_keeps_a_valid_history(run_main):
    script = [error(400, "nope"), reply(text("recovered"))]
    code, out, err, api = run_main(s03_todo, script=script, stdin="one\ntwo\nexit\n")
    assert code == 0 and "refused the request (400 nope)" in err and "recovered" in out
    assert api.requests[1]["messages"] == [{"role": "user", "content": "two"}]


def ctrl_c_in_the_first_turn(workdir, api, prompt: str, settle: float,
                             then: str = "next prompt\nq\n") -> tuple:
    """s03's REPL, given `prompt`, gets Ctrl-C `settle` seconds after its first request reached
    `api`; then `then` is typed ("next prompt" and q). (exit code, stdout, stderr)."""
    env = clean_env(workdir.parent / "home", ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=api.url)
    proc = popen_taking_ctrl_c(lesson_command("s03_todo"), cwd=workdir,
                               env=env, text=True, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdin.write(prompt + "\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    while not api.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(settle)
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(then, timeout=60)
    return proc.returncode, out, err


@pytest.mark.slow
def test_ctrl_c_during_a_turn_abandons_it_and_the_next_prompt_works(workdir):
    script = [reply(tool("bash", {"command": "sleep 600"})), reply(text("after interrupt"))]
    with StandInAPI(script) as api:
        code, out, err = ctrl_c_in_the_first_turn(workdir, api, "start a long job",
                                                  settle=0.5)   # let the bash tool start
    assert code == 0, err
    assert "turn abandoned" in err and "after interrupt" in out and api.violations == []
    # The command was running: it may have acted, so the model is told, not left to guess.
    sent = api.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "user"]
    (result,) = sent[2]["content"]
    assert result["is_error"] and "interrupted by the user while it ran: it may have acted" \
        in result["content"]
    assert sent[3] == {"role": "user", "content": "next prompt"}


def test_the_key_or_an_auth_token_reaches_the_api(run_main):
    def credential(headers):  # SDK versions differ in the header they use for a key
        return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
    code, out, err, api = run_main(s03_todo, "hi", script=[reply(text("a"))], key="sk-test")
    assert code == 0 and credential(api.headers[0]) == "sk-test"
    code, out, err, api = run_main(s03_todo, "hi", script=[reply(text("a"))], key=None,
                                   env={"ANTHROPIC_AUTH_TOKEN": "tok-test"})
    assert code == 0 and credential(api.headers[0]) == "tok-test"


def test_the_repl_survives_every_kind_of_api_failure(run_main):
    script = [error(401, "invalid x-api-key"), error(429, "slow down"), error(429), error(429),
              error(529), error(529), error(529), reply(text("still here"))]
    code, out, err, api = run_main(s03_todo, script=script, stdin="a\nb\nc\nd\nq\n")
    assert code == 0 and "still here" in out and "Traceback" not in err
    assert "rejected the key (401" in err and "rate limited (429" in err and "failed (529" in err
    # The failed turns left nothing behind.
    assert api.requests[-1]["messages"] == [{"role": "user", "content": "d"}]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_closed_terminal_or_sigterm_kills_the_running_command_too(workdir, signum):
    script = [reply(tool("bash", {"command": "echo $$ > shell.pid; sleep 600"}))]
    with StandInAPI(script) as api:
        env = clean_env(workdir.parent / "home", ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=api.url)
        proc = subprocess.Popen(lesson_command("s03_todo", "start a long job"),
                                cwd=workdir, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        pid_file, deadline = workdir / "shell.pid", time.monotonic() + 60
        while (not (pid_file.exists() and pid_file.read_text().strip())
               and time.monotonic() < deadline):
            time.sleep(0.05)
        group = int(pid_file.read_text())      # the command's shell leads its own process group
        os.kill(proc.pid, signum)
        proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert group_ends(group), "the command outlived the harness"


# s03 as a user runs it, but the signal comes while Python is still inside Popen, the bash
# tool's shell already running: on a busy machine, a Ctrl-C as the command starts.
SIGNALLED_AS_IT_STARTS = """
import os, runpy, signal, subprocess, sys
from pathlib import Path
real, signum = subprocess.Popen, int(sys.argv[2])
def popen(*args, **kwargs):
    proc = real(*args, **kwargs)
    if kwargs.get("start_new_session"):              # the bash tool's command
        while not Path("shell.pid").exists():
            pass
        os.kill(os.getpid(), signum)
    return proc
subprocess.Popen = popen
sys.argv = [sys.argv[1], "start a long job"]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_a_signal_as_the_command_starts_kills_it_in_a_lesson_run(workdir, signum):
    """The outer handlers (the run's) are in place too: the command's own block must still
    defer the signal until it has the pid, and kill the command."""
    command = "echo $$ > shell.pid.tmp; mv shell.pid.tmp shell.pid; sleep 600"
    with StandInAPI([reply(tool("bash", {"command": command}))]) as api:
        env = clean_env(workdir.parent / "home", ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=api.url)
        proc = popen_taking_ctrl_c(
            [sys.executable, "-c", SIGNALLED_AS_IT_STARTS, str(ROOT / "s03_todo.py"),
             str(int(signum))], cwd=workdir, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=60)
    group = int((workdir / "shell.pid").read_text())
    command_ended(group)
    assert proc.returncode in (130, 128 + signal.SIGTERM) and "Traceback" not in err, err


def test_a_complete_tool_call_is_run_even_when_stop_reason_says_end_turn(run_main, workdir):
    script = [reply(tool("write_file", {"path": "a.txt", "content": "x"}), stop_reason="end_turn"),
              reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "write a.txt", script=script)
    assert code == 0 and (workdir / "a.txt").read_text() == "x" and "done" in out
    assert not tool_results(api.requests[1])[0].get("is_error") and api.violations == []



def test_tool_input_as_json_text_or_a_list_keeps_the_history_valid(
        run_main, workdir):
    # an array sent as a string
    items = '[{"id": "1", "text": "write a.txt", "status": "in_progress"}]'
    script = [reply(tool("todo", {"items": items}), tool("bash", ["ls"])), reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "go", script=script)
    assert code == 0 and "Traceback" not in err and api.violations == []
    ok, bad = tool_results(api.requests[1])
    assert not ok.get("is_error") and "[>] #1: write a.txt" in ok["content"]
    assert bad["is_error"] and "must be a JSON object" in bad["content"]
    sent = api.requests[1]["messages"][1]["content"]
    assert sent[1]["input"] == {}                   # the API accepts only an object in the history


@pytest.mark.slow
def test_ctrl_c_while_the_model_is_still_answering_abandons_the_turn(workdir):
    script = [reply(text("a slow model"), delay=20), reply(text("after interrupt"))]
    with StandInAPI(script) as api:
        # the request is out; no token has come back
        code, out, err = ctrl_c_in_the_first_turn(workdir, api, "a question", settle=0.3)
    assert code == 0, err
    assert "turn abandoned; the conversation is as it was before it" in err
    assert "after interrupt" in out
    assert api.requests[1]["messages"] == [{"role": "user", "content": "next prompt"}]


@pytest.mark.slow
def test_ctrl_c_after_the_reply_began_is_counted_for_what_the_api_read(workdir):
    """The API bills a reply abandoned after message_start for the input it read (5,000
    tokens here): /cost left it out, as if the request had never been sent."""
    with Pinging({"type": "ping"}) as endpoint:
        code, out, err = ctrl_c_in_the_first_turn(workdir, endpoint, "a question", settle=0.5,
                                                  then="/cost\nq\n")
    assert code == 0 and "turn abandoned" in err, err
    said = words(out)
    assert "session so far: 1 model call " in said and "uncached 5,000 x1" in said, out


def test_a_round_with_todo_among_other_calls_resets_the_nag(run_lesson):
    """Any todo call in a round counts: a plan updated beside other work needs no reminder.
    Three rounds without todo after it bring the reminder back, at the third."""
    work = reply(tool("bash", {"command": "true"}))
    script = [work, work, reply(tool("bash", {"command": "true"}), todo("in_progress")),
              work, work, work, reply(text("done"))]
    proc, api = run_lesson("s03_todo", "work on it", script=script, in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    reminded = [n for n, request in enumerate(api.requests)
                if s03_todo.REMINDER in json.dumps(request["messages"][-1]["content"])]
    assert reminded == [6]
    assert proc.stderr.count(f"[harness adds: {s03_todo.REMINDER}]") == 1


def test_a_sibling_folder_whose_name_starts_with_the_workspaces_is_outside_it(run_lesson,
                                                                            workdir):
    """`work-evil` beside `work` shares its name's first letters, not its inside: every file
    tool refuses it, and the model is told why."""
    evil = workdir.parent / f"{workdir.name}-evil"
    evil.mkdir()
    (evil / "secret.txt").write_text("TOP SECRET\n")
    tries = [tool("read_file", {"path": "../work-evil/secret.txt"}),
             tool("read_file", {"path": str(evil / "secret.txt")}),
             tool("write_file", {"path": "../work-evil/planted.txt", "content": "x"}),
             tool("edit_file", {"path": "../work-evil/secret.txt", "old_text": "TOP",
                                "new_text": "NO"})]
    proc, api = run_lesson("s03_todo", "look next door", script=[reply(*tries), reply(text("ok"))],
                           in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    results = tool_results(api.requests[1])
    assert len(results) == 4
    for result in results:
        assert result["is_error"] is True and "outside the workspace" in result["content"]
        assert "TOP SECRET" not in result["content"]
    assert (evil / "secret.txt").read_text() == "TOP SECRET\n"
    assert sorted(p.name for p in evil.iterdir()) == ["secret.txt"]


def test_the_user_and_the_history_get_the_whole_of_a_paused_turn(run_lesson):
    """A server that pauses a long turn (pause_turn) sends the rest in a second reply: the user
    reads both parts, and the next prompt's request holds both as one assistant message."""
    first, second = text("The first half of the answer."), text("The second half.")
    script = [reply(first, stop_reason="pause_turn"), reply(second), reply(text("Yes."))]
    proc, api = run_lesson("s03_todo", script=script, stdin="explain\nis that all?\nq\n",
                           in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    assert "The first half of the answer.\nThe second half." in proc.stdout
    assert api.requests[1]["messages"][-1] == {"role": "assistant", "content": [first]}
    assert api.requests[2]["messages"] == [
        {"role": "user", "content": "explain"},
        {"role": "assistant", "content": [first, second]},
        {"role": "user", "content": "is that all?"}]
