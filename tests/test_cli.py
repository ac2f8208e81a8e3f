"""The CLI and the REPL under hostile conditions: set-up mistakes, odd endpoints, a person at the
keyboard."""

import errno
import importlib.util
import io
import json
import os
import pathlib
import re
import signal
import socket
import struct
import subprocess
import sys
import threading

import pytest

from harness import cli, terminal
from harness.run import Run
import s03_todo
import s06_compact
import s07_task_system
from helpers import (lesson_command, ROOT, batch_of_three, clean_env, group_ends, on_a_terminal,
                     popen_taking_ctrl_c, running_command, tool_results)
from harness.pairing import INTERRUPTED, NOT_RUN
from harness.stand_in import StandInAPI
from harness.stand_in.script import error, message, raw, reply, text, tool
from helpers import Elements, messages, words


class Terminal(io.StringIO):
    def isatty(self):
        return True


# ---------------------------------------------------------------- set-up

def test_help_imports_no_sdk(workdir):
    """--help is quick because it never imports the SDK (anthropic and what it pulls in take
    most of a lesson's start): -X importtime lists every module the process imported, so the
    cause is checked, not a clock that a busy machine would stop."""
    proc = subprocess.run(lesson_command("s07_task_system", "--help", python=("-X", "importtime")),
                          cwd=workdir, env=clean_env(workdir.parent / "home"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "/task add TITLE" in proc.stdout and "API_TIMEOUT" in proc.stdout
    imported = {line.rpartition("|")[2].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "harness.cli" in imported            # the list is the lesson's own
    assert not {name for name in imported if name.split(".")[0] == "anthropic"}


@pytest.mark.parametrize("lesson, args, message", [
    (s03_todo, [" "], "the prompt is empty"),
    (s03_todo, ["--demo", "hello"], "--demo plays its own scripted prompt"),
    # The demo played its whole script, as agent "demo", whatever these said, and said nothing.
    (s03_todo, ["--demo", "--max-steps", "2"],
     "--demo plays its script to its end; drop --max-steps"),
    (s07_task_system, ["--demo", "--name", "bob"],
     "--demo's agent is always demo, on its own board; drop --name"),
])
def test_an_empty_prompt_or_what_the_demo_would_ignore_is_refused_locally(run_main, lesson,
                                                                          args, message):
    code, out, err, api = run_main(lesson, *args, key=None)
    assert code == 2 and message in words(err) and api.requests == [], err
    assert "Traceback" not in err and not pathlib.Path("demo").exists()


@pytest.mark.parametrize("in_the_way", ["a file", "a FIFO", "a dangling link",
                                        "a link to a folder"])
def test_demo_where_demo_cannot_be_its_folder_is_one_line_and_exit_1(run_lesson, workdir,
                                                                     in_the_way):
    elsewhere = workdir.parent / "elsewhere"
    elsewhere.mkdir()
    if in_the_way == "a file":
        (workdir / "demo").write_text("my notes on the demo")
    elif in_the_way == "a FIFO":
        os.mkfifo(workdir / "demo")
    elif in_the_way == "a dangling link":
        (workdir / "demo").symlink_to(workdir.parent / "nowhere")
    else:
        (workdir / "demo").symlink_to(elsewhere)
    before = in_the_way_now(workdir / "demo")
    proc, api = run_lesson("s03_todo", "--demo", key=None, in_process=True)
    assert proc.returncode == 1 and api.requests == [] and proc.stdout == ""
    assert len(messages(proc.stderr)) == 1 and proc.stderr.startswith("error: --demo "), proc.stderr
    said = {"a file": "demo is a file, not a folder",
            "a FIFO": "demo is a FIFO (named pipe), not a folder",
            "a dangling link": "demo is a symbolic link",
            "a link to a folder": "demo is a symbolic link"}[in_the_way]
    assert said in proc.stderr
    assert sorted(p.name for p in workdir.iterdir()) == ["demo"]      # nothing else written
    assert list(elsewhere.iterdir()) == []
    assert in_the_way_now(workdir / "demo") == before                  # left as it was


def in_the_way_now(demo):
    """What is at demo/: a link's target, a FIFO's kind, or a file's text."""
    if demo.is_symlink():
        return os.readlink(demo)
    if demo.is_fifo():
        return "a FIFO"                   # read_text would wait for a writer
    return demo.read_text()


def test_demo_in_a_folder_where_nothing_can_be_made_is_one_line_and_exit_1(run_main, workdir,
                                                                          monkeypatch):
    """A read-only folder (the permission is faked: the tests may run as root, who may write
    anywhere). Path.mkdir is what is refused: on Python 3.10 it holds its own reference to
    os.mkdir, so refusing os.mkdir alone faked nothing there."""
    def refuse(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))
    monkeypatch.setattr(os, "mkdir", refuse)
    monkeypatch.setattr(pathlib.Path, "mkdir", refuse)
    code, out, err, api = run_main(s03_todo, "--demo", key=None)
    assert code == 1 and api.requests == [] and len(messages(err)) == 1
    assert err == "error: --demo cannot run in demo/: permission denied\n"


def test_an_endpoint_error_message_of_several_lines_is_one_line(run_main):
    """An endpoint's own message may hold newlines (a stack trace from a proxy, say): the user
    still gets one line, and the words of it."""
    code, out, err, api = run_main(s03_todo, "hi",
                                   script=[error(400, "bad request\n  at proxy.js:12\nend")])
    assert code == 1 and len(messages(err)) == 1
    assert "bad request at proxy.js:12 end" in words(err)


def test_a_dotenv_that_is_not_utf8_is_one_line(run_main, workdir):
    (workdir / ".env").write_bytes("ANTHROPIC_API_KEY=x\n".encode("utf-16"))
    code, out, err, api = run_main(s03_todo, "hi", key=None)
    assert code == 1 and len(messages(err)) == 1
    assert "is not UTF-8 text; save it as UTF-8" in words(err)     # wrapped, with a long path


def test_an_empty_variable_does_not_hide_the_dotenv_value(run_main, workdir):
    (workdir / ".env").write_text("ANTHROPIC_API_KEY=from-dotenv\nMODEL_ID=model-from-dotenv\n")
    code, out, err, api = run_main(s03_todo, "hi", script=[reply(text("ok"))], key=None,
                                   env={"ANTHROPIC_API_KEY": "", "MODEL_ID": ""})
    headers = api.headers[0]
    credential = (headers.get("x-api-key")
                  or headers.get("authorization", "").removeprefix("Bearer "))
    assert code == 0 and credential == "from-dotenv"
    assert api.requests[0]["model"] == "model-from-dotenv"


@pytest.mark.slow
def test_a_proxy_in_the_environment_never_carries_loopback_traffic(run_lesson):
    dead = "http://127.0.0.1:9"   # nothing listens there: any request through it fails
    proxies = {k: dead for k in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy",
                                 "ALL_PROXY", "all_proxy")}
    proc, _ = run_lesson("s03_todo", "--demo", key=None, env=proxies, in_process=True)
    assert proc.returncode == 0, proc.stderr
    proc, api = run_lesson("s03_todo", "hi", script=[reply(text("through no proxy"))], env=proxies,
                           in_process=True)
    assert proc.returncode == 0 and "through no proxy" in proc.stdout, proc.stderr


@pytest.mark.parametrize("variable, value", [
    ("SSL_CERT_FILE", "/nonexistent/cacert.pem"),         # a venv moved with its settings
    ("NO_PROXY", "[::1]"),                                # an entry httpx cannot parse
])
def test_a_setting_the_http_client_cannot_use_is_one_line_naming_it(workdir, variable, value):
    """A process of its own: the HTTP library reads SSL_CERT_FILE once a process, and a run
    that did not refuse it would try the real API's address."""
    env = clean_env(workdir.parent / "home", ANTHROPIC_API_KEY="k", API_TIMEOUT="2",
                    **{variable: value})
    proc = subprocess.run(lesson_command("s03_todo", "hi"), cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert len(messages(proc.stderr)) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{variable}={value}" in words(proc.stderr) and "proxy in :" not in proc.stderr


@pytest.mark.parametrize("variable, proxy", [
    ("HTTPS_PROXY", "ftp://alice:PW@127.0.0.1:1"),       # a scheme no HTTP client speaks
    ("ALL_PROXY", "socks5://alice:PW@127.0.0.1:1"),      # SOCKS needs socksio, an extra
])
def test_a_proxy_the_client_cannot_use_is_one_line_naming_it(workdir, variable, proxy):
    """A proxy in the environment (ssh -D, Clash) that the SDK's HTTP client cannot use ended in
    a traceback, and another from the client's __del__. Nothing is sent anywhere: the client
    is refused before its first request."""
    if proxy.startswith("socks5") and importlib.util.find_spec("socksio"):
        pytest.skip("socksio is installed here, so SOCKS proxies work: nothing to refuse")
    env = clean_env(workdir.parent / "home", ANTHROPIC_API_KEY="k", API_TIMEOUT="2",
                    **{variable: proxy})
    proc = subprocess.run(lesson_command("s03_todo", "hi"), cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert len(messages(proc.stderr)) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"the proxy in {variable}" in words(proc.stderr)
    assert "PW" not in proc.stderr                            # the proxy's password stays hidden


# ---------------------------------------------------------------- endpoints that bend the rules

@pytest.mark.parametrize("step, said", [
    (raw(200, "<html><body>Please log in to the proxy</body></html>", "text/html"),
     "did not answer like the Messages API"),
    (raw(200, '{"choices": [{"message": {"content": "hi"}}]}'),
     "did not answer like the Messages API"),
    (message(content=None), "without content"),
])
def test_a_live_endpoint_that_is_not_the_messages_api_is_one_line(run_main, step, said):
    code, out, err, api = run_main(s03_todo, "hi", script=[step])
    assert code == 1 and said in words(err) and api.url in words(err), err
    assert len(messages(err)) == 1 and "Traceback" not in words(err)


def test_usage_that_is_missing_or_null_never_crashes(run_main):
    script = [reply(tool("bash", {"command": "echo hi"}),
                    usage={"input_tokens": None, "output_tokens": None}),
              reply(text("done"), usage={"output_tokens": 3})]
    code, out, err, api = run_main(s03_todo, "hi", script=script)
    assert code == 0 and out.strip() == "done" and "0 in · 0 from cache" in err


@pytest.mark.parametrize("lesson", [s03_todo, s07_task_system])
def test_an_endpoint_that_dropped_the_tools_is_named_once(run_main, lesson):
    """llama-server with a chat template that has no tools counts only the prompt (132 tokens
    for s07)."""
    dropped = {"input_tokens": 132, "output_tokens": 9}
    script = [reply(text("I would create a task."), usage=dropped)]
    code, out, err, api = run_main(lesson, "make a task", script=script)
    assert code == 0 and out.strip() == "I would create a task."
    assert err.count("it seems to have dropped the tools") == 1 and "--chat-template-file" in err
    # counted in full
    code, out, err, api = run_main(lesson, "make a task", script=[reply(text("fine"))])
    assert code == 0 and "dropped the tools" not in err


@pytest.mark.usefixtures("quick_retries")
def test_a_hung_endpoint_ends_after_api_timeout_with_one_line(run_main):
    """Each reply comes after 5 s: a client that waited longer than API_TIMEOUT would get one
    and exit 0. (No clock here: a loaded machine may take longer, and the suite's bound against
    hanging, conftest.HANG_LIMIT, ends a run that never returns.)"""
    code, out, err, api = run_main(s03_todo, "hi", script=[reply(text("late"), delay=5)] * 3,
                                   env={"API_TIMEOUT": "0.5"})
    assert code == 1 and "did not answer within API_TIMEOUT=0.5s" in err and api.url in err
    assert "late" not in out and len(messages(err)) == 1


def test_empty_content_or_text_after_a_call_keeps_the_history_valid(
        run_main, workdir):
    script = [reply(tool("write_file", {"path": "a.txt", "content": "x"}), text("and now I wait")),
              reply(text("   ")), reply(text("fine"))]
    code, out, err, api = run_main(s03_todo, stdin="go\nagain\nq\n", script=script)
    assert code == 0 and "(the model returned no text)" in out and "fine" in out
    assert api.violations == []


def test_thinking_is_kept_and_unknown_blocks_are_left_out_with_a_note(run_main):
    thinking = {"type": "thinking", "thinking": "I should list files.", "signature": "sig"}
    odd = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
           "input": {"query": "x"}}
    script = [reply(thinking, odd, tool("bash", {"command": "echo hi"})), reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "hi", script=script)
    assert code == 0 and out.strip() == "done" and api.violations == []
    sent = [b["type"] for b in api.requests[1]["messages"][1]["content"]]
    assert sent == ["thinking", "tool_use"]
    assert "'server_tool_use' block in the reply was left out" in err


# ---------------------------------------------------------------- the streaming display

def test_a_terminal_sees_the_wait_the_text_live_and_a_tool_call_growing(monkeypatch):
    import anthropic
    from harness.stand_in import StandInAPI
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    big = tool("write_file", {"path": "app.py", "content": "print('hello')\n" * 200})
    with StandInAPI([reply(text("Writing the app now."), big, delay=1.5)]) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        client = anthropic.Anthropic(api_key="k", base_url=api.url)
        reply_ = s03_todo.ask_model(Run(client), "s", [], [{"role": "user", "content": "hi"}], 9)
    shown = re.sub(r"\x1b\[[0-9;]*[mK]", "", screen.getvalue())      # colours and line clearing
    assert "waiting for the model at 127.0.0.1" in shown and "· 1 s" in shown
    assert "Writing the app now." in shown and re.search(r"> write_file … 3\.\d kB so far", shown)
    assert [b["type"] for b in reply_.content] == ["text", "tool_use"]


def live_reply_on(monkeypatch, delay=1.5, **env) -> str:
    """What a terminal (stderr) shows of a reply that takes `delay` seconds to start, then
    text and a growing tool call, with these variables set."""
    import anthropic
    from harness.stand_in import StandInAPI
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    big = tool("write_file", {"path": "app.py", "content": "print('hello')\n" * 200})
    with StandInAPI([reply(text("Writing the app now."), big, delay=delay)]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url)
        s03_todo.ask_model(Run(client), "s", [], [{"role": "user", "content": "hi"}], 9)
    return screen.getvalue()


def test_on_a_narrow_terminal_each_line_redrawn_in_place_fits_one_line(monkeypatch):
    """A redraw clears only the line the cursor is on: a waiting line or a growing tool call
    wider than the terminal left a stale line behind every second."""
    shown = live_reply_on(monkeypatch, delay=1.1, COLUMNS="20", TERM="xterm")   # one wait line
    parts = [re.sub(r"\x1b\[[0-9;]*m", "", part) for part in shown.split("\r\x1b[K")]
    redrawn = [part for part in parts if "waiting" in part or "write_file" in part]
    assert any("waiting" in line for line in redrawn), shown
    assert any("write_file" in line for line in redrawn), shown
    assert max(len(line) for line in redrawn) <= 19, redrawn


def test_a_dumb_terminal_gets_no_codes_and_no_redrawn_lines(monkeypatch):
    """TERM=dumb (Emacs' shell) shows ESC[K and colour codes as ^[[K, and cannot redraw."""
    shown = live_reply_on(monkeypatch, delay=0, TERM="dumb")
    assert "\x1b" not in shown and "\r" not in shown, shown
    # The words beside the call, not streamed, are printed once the reply is whole.
    assert shown.count("Writing the app now.") == 1, shown


def test_nothing_of_the_stream_goes_to_a_pipe_and_the_answer_is_printed_once(run_main):
    code, out, err, api = run_main(s03_todo, "hi", script=[reply(text("the answer"))])
    assert out == "the answer\n" and "the answer" not in err and "waiting" not in err
    assert "[session: 1 call · " in err and "from cache" in err


def test_a_second_run_in_one_process_keeps_its_own_count_log_and_page(run_main, workdir):
    """Each main() makes its own Run: nothing of the first run is counted, logged or drawn in
    the second's (a test suite, or a program calling main() twice)."""
    first = run_main(s03_todo, "one", script=[reply(tool("bash", {"command": "echo 1"})),
                                              reply(text("first"))])
    code, out, err, api = run_main(s03_todo, "two", script=[reply(text("second"))])
    assert first[0] == code == 0 and "[session: 2 calls · " in first[2]
    assert "[session: 1 call · " in err
    folder = workdir / ".transcripts"
    logs = sorted(folder.glob("session_*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    pages = sorted(folder.glob("session_s03_*.html"), key=lambda p: p.stat().st_mtime_ns)
    header, *lines = [json.loads(line) for line in logs[-1].read_text().splitlines()]
    assert header == {"session": {"lesson": "s03_todo"}}        # whose it is, for --continue
    assert [line["content"] for line in lines] == ["two", [{"type": "text", "text": "second"}]]
    assert len(logs) == len(pages) == 2 and "echo 1" not in pages[-1].read_text()


# ---------------------------------------------------------------- the REPL

class KeyboardAtPrompt(io.StringIO):
    """stdin where the person presses Ctrl-C once, halfway through typing."""
    pressed = False

    def readline(self, *args):
        if not self.pressed:
            self.pressed = True
            raise KeyboardInterrupt
        return super().readline(*args)


def test_ctrl_c_at_the_prompt_clears_the_line_and_the_repl_goes_on(run_main):
    code, out, err, api = run_main(s03_todo, script=[reply(text("still here"))],
                                   stdin=KeyboardAtPrompt("hello\nq\n"))
    assert code == 0 and "still here" in out
    assert api.requests[0]["messages"] == [{"role": "user", "content": "hello"}]


def test_the_call_ctrl_c_stopped_is_on_the_session_page_as_interrupted(run_main, workdir,
                                                                        monkeypatch):
    """It may have acted: the page a user checks afterwards must show it, marked."""
    def bash(command):
        if command == "sleep 30":
            raise KeyboardInterrupt                 # Ctrl-C while it runs
        return "before"
    monkeypatch.setitem(s03_todo.TOOL_HANDLERS, "bash", bash)
    script = [reply(tool("bash", {"command": "echo before"}), tool("bash", {"command": "sleep 30"}),
                    tool("bash", {"command": "echo after"}))]
    code, out, err, api = run_main(s03_todo, script=script, stdin="go\nq\n")
    assert code == 0 and "turn abandoned after 2 tool calls" in words(err), err
    (page,) = (workdir / ".transcripts").glob("session_s03_*.html")
    rows = Elements(page.read_text(encoding="utf-8")).having("tr", "error")
    assert len(rows) == 1                           # the stopped call; the next never ran
    shown = page.read_text(encoding="utf-8")
    assert "sleep 30" in shown and "echo after" not in shown
    assert "interrupted by the user while it ran" in shown


def test_a_multi_line_prompt_between_triple_quotes_is_one_model_call(run_main):
    code, out, err, api = run_main(s03_todo, script=[reply(text("one answer"))],
                                   stdin='"""\nfirst line\nsecond line\n"""\nq\n')
    assert code == 0 and len(api.requests) == 1
    assert api.requests[0]["messages"] == [{"role": "user", "content": "first line\nsecond line"}]


def test_unknown_slash_commands_are_answered_locally(run_main):
    code, out, err, api = run_main(s07_task_system,
                                   stdin="/help\n/taks\n/nope\n/\n//\n/etc/hosts is odd?\n"
                                         "// why does this fail?\nq\n",
                                   script=[reply(text("a path is a prompt")),
                                           reply(text("a comment is a prompt"))])
    assert code == 0 and len(api.requests) == 2 and "a path is a prompt" in out
    assert api.requests[1]["messages"][-1]["content"] == "// why does this fail?"
    assert "commands: /help, /tasks, /task, /compact, /context, /cost, /clear" in words(out)
    assert "unknown command /taks; did you mean /tasks?" in words(err)
    assert "unknown command /nope (" in err
    # A slash alone is a typo, not a question: it cost a model call.
    assert "unknown command / (" in err and "unknown command // (" in err


@pytest.mark.parametrize("lesson", [s06_compact, s07_task_system])
def test_help_says_what_api_context_does_and_what_layer_2_still_does(run_main, lesson):
    """--help is where a user meets --api-context first: its two choices, what each asks the
    API for, and that layer 2 stays as the window's guard (it said layers 1 and 2 step aside)."""
    code, out, err, api = run_main(lesson, "--help")
    said = words(out)
    assert code == 0 and api.requests == [] and "--api-context {clear,compact}" in said
    assert ("let the API manage the context: clear old tool results (context editing), or "
            "compact (a summary it writes), instead of layer 1 and layer 2's threshold; layer 2 "
            "still guards the window; docs/cost.md") in said


def test_help_names_where_the_task_commands_are_listed_in_s07_only(run_main):
    code, out, err, api = run_main(s07_task_system, stdin="/help\nq\n")
    assert code == 0 and "/task help lists what /task does" in out and api.requests == []
    code, out, err, api = run_main(s06_compact, stdin="/help\nq\n")
    assert code == 0 and "/task" not in out and "commands: /help, /compact" in words(out)


@pytest.mark.parametrize("typed, meant", [("--demoo", "--demo"), ("--contineu", "--continue"),
                                          ("--bord", "--board")])
def test_a_mistyped_flag_is_refused_with_the_nearest_one(run_main, typed, meant):
    """argparse says "unrecognized arguments" on Python 3.10 to 3.13; the nearest flag is
    ours, said once on every version."""
    code, out, err, api = run_main(s07_task_system, typed, "plan it",
                                   script=[reply(text("planned"))])
    assert code == 2 and api.requests == [] and "Traceback" not in err
    assert f"unrecognized arguments: {typed}; did you mean {meant}?" in words(err)
    assert words(err).count("did you mean") == 1
    code, out, err, api = run_main(s07_task_system, "--zzz", "plan it")
    assert code == 2 and "unrecognized arguments: --zzz" in err and "did you mean" not in err


@pytest.mark.parametrize("typed, hint", [
    (["write", "hello.py"], "a prompt of several words goes in quotes: python s03_todo.py "
                            "'write hello.py'"),
    # The flags typed are kept: without --continue the suggestion would start afresh.
    (["--continue", "go", "on"], "quotes: python s03_todo.py --continue 'go on'"),
    (["--max-steps", "3", "write", "it"], "quotes: python s03_todo.py --max-steps 3 'write it'"),
    # A REPL command is no prompt: quoted, it would be sent to the model, and cost a call.
    (["/todo", "list"], "/todo is typed in the REPL: run python s03_todo.py, then type /todo "
                        "list"),
])
def test_a_prompt_of_several_words_without_quotes_is_refused_with_the_command_to_type(
        run_main, typed, hint):
    """A newcomer's first command: argparse said only "unrecognized arguments: hello.py"."""
    code, out, err, api = run_main(s03_todo, *typed)
    assert code == 2 and api.requests == [] and "Traceback" not in err
    assert f"unrecognized arguments: {typed[-1]}; " in words(err) and hint in words(err)


def test_an_unknown_flag_with_an_escape_code_is_shown_escaped(run_main):
    code, out, err, api = run_main(s03_todo, "--\x1b[2Jx")
    assert code == 2 and "\x1b" not in err and "unrecognized arguments: --\\x1b[2Jx" in err


def test_words_after_clear_refuse_it_and_the_conversation_stays(run_main):
    """`/clear the build cache then rerun the tests` wiped the conversation, the rest unread."""
    script = [reply(text("ok")), reply(text("42, as you said"))]
    code, out, err, api = run_main(s03_todo, script=script, stdin="remember 42\n"
                                   "/clear the build cache then rerun the tests\nwhat number?\nq\n")
    assert code == 0 and "/clear takes no words after it; nothing was cleared" in words(err)
    assert len(api.requests[1]["messages"]) == 3          # the first exchange, then the question


def test_a_huge_columns_is_a_wide_terminal_not_a_hang(run_main, monkeypatch):
    """COLUMNS=100000000 drew /context's bar for minutes, 50 MB of it."""
    code, out, err, api = run_main(s03_todo, stdin="/context\nq\n",
                                   env={"COLUMNS": "100000000"})
    assert code == 0 and len(out) + len(err) < 50_000, err[-300:]
    # Undone at once: pytest lays out its own progress line by COLUMNS too.
    with monkeypatch.context() as patched:
        patched.setenv("COLUMNS", "100000000")
        width = terminal.width()
    assert width == terminal.WIDEST


def test_a_closed_stdin_reads_as_the_end_of_input(monkeypatch):
    """`python s07_task_system.py <&-` ended in an AttributeError traceback."""
    monkeypatch.setattr(sys, "stdin", None)
    cli._closed_streams_to_devnull()
    assert sys.stdin.readline() == ""


def test_an_abbreviated_flag_argparse_accepts_is_no_typo(run_main):
    code, out, err, api = run_main(s07_task_system, "--max-step=3", "plan it",
                                   script=[reply(text("planned"))])
    assert code == 0 and "planned" in out and "did you mean" not in err, err


def test_without_the_sdk_the_line_to_paste_works_from_any_folder(workdir):
    """The SDK missing (a sitecustomize hides it), run from a folder that is not the repo's:
    the line names this Python and requirements.txt from here, with single spaces."""
    shim = workdir.parent / "no-sdk"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['anthropic'] = None\n")
    env = clean_env(workdir.parent / "home", ANTHROPIC_API_KEY="k")
    env["PYTHONPATH"] = f"{shim}:{ROOT}"
    proc = subprocess.run(lesson_command("s03_todo", "hi"), cwd=workdir,
                          env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1 and len(messages(proc.stderr)) == 1, proc.stderr
    (said,) = messages(proc.stderr)
    found = re.fullmatch(r"error: the anthropic package is not installed for this Python: run "
                         r"(\S+) -m pip install -r (\S+)", said)
    assert found and found[1] == sys.executable, said
    assert (workdir / found[2]).resolve() == ROOT / "requirements.txt"
    assert not (workdir / "requirements.txt").exists()


def test_a_turn_that_fails_after_tool_calls_keeps_them_so_a_retry_does_not_duplicate(
        run_main, workdir):
    script = [reply(tool("write_file", {"path": "a.txt", "content": "x"})), error(400, "boom"),
              reply(text("I see a.txt was already written"))]
    code, out, err, api = run_main(s03_todo, stdin="write a.txt\nwhat did you do?\nq\n",
                                   script=script)
    assert code == 0 and "turn failed after 1 tool call: they are kept" in err
    assert api.violations == []
    roles = [m["role"] for m in api.requests[-1]["messages"]]
    assert roles == ["user", "assistant", "user", "user"]
    assert tool_results(api.requests[-1], 2)[0]["content"].startswith("Wrote 1 byte to")


def test_a_paste_of_several_lines_into_a_terminal_is_one_prompt(workdir):
    """A real pseudo-terminal: the lines arrive together, as a paste does, and make one model
    call."""
    lesson = lesson_command("s03_todo")
    with StandInAPI([reply(text("one prompt")), reply(text("second prompt"))]) as api:
        env = clean_env(workdir.parent / "home", ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="k")
        with on_a_terminal(lesson, workdir, env) as (proc, terminal):
            assert b">> " in terminal.read_until(b">> ")
            terminal.type(b"first line of the paste\nsecond line of the paste\n")
            assert b"one prompt" in terminal.read_until(b"one prompt")
            assert b">> " in terminal.read_until(b">> ")
            # a line typed on its own is its own prompt
            terminal.type(b"typed alone\n")
            assert b"second prompt" in terminal.read_until(b"second prompt")
            terminal.type(b"q\n")
            assert proc.wait(60) == 0
    prompts = [r["messages"][-1]["content"] for r in api.requests]
    assert prompts == ["first line of the paste\nsecond line of the paste", "typed alone"]


# ---------------------------------------------------------------- a connection that drops mid-reply

def _sse(event: dict) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


REPLY_EVENTS = [_sse(e) for e in (
    {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                          "model": "m", "content": [], "stop_reason": None,
                                          "stop_sequence": None,
                                          "usage": {"input_tokens": 10, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0,
     "delta": {"type": "text_delta", "text": "Hello there"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
     "usage": {"output_tokens": 3}},
    {"type": "message_stop"})]


class DroppingEndpoint:
    """A raw loopback server; each request gets the next answer of `plan`:
    "ok" a whole reply; "close" headers and part of the body, then the socket closed (the
    content-length promised more); "reset" the same ended by a TCP reset; "stall" the same,
    then silence; "whole-then-close" the whole reply, then the socket closed (a proxy that
    promised more); "delta-then-close" the same without message_stop."""

    def __init__(self, plan):
        self.plan, self.requests, self.closing = list(plan), [], threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.closing.set()
        self.listener.close()
        self.thread.join(10)

    def _serve(self):
        while self.plan:
            try:
                conn, _ = self.listener.accept()
            except OSError:            # closed by __exit__
                return
            with conn:
                self._answer(conn, self.plan.pop(0))

    def _answer(self, conn, how):
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"content-length: *(\d+)", head, re.I).group(1))
        while len(body) < length:
            body += conn.recv(65536)
        self.requests.append(json.loads(body))
        whole = b"".join(REPLY_EVENTS)
        promised = len(whole) if how == "ok" else 100_000
        sent = whole if how in ("ok", "whole-then-close") else b"".join(REPLY_EVENTS[:3])
        if how == "delta-then-close":
            sent = b"".join(REPLY_EVENTS[:-1])
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
                     b"content-length: %d\r\n\r\n" % promised + sent)
        if how == "stall":
            self.closing.wait(10)
        if how == "reset":             # SO_LINGER 0: close() sends RST, the client reads ECONNRESET
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@pytest.mark.parametrize("how, said", [
    ("close", "dropped in the middle of the reply (RemoteProtocolError"),
    ("reset", "dropped in the middle of the reply (ReadError"),
    ("stall", "went silent in the middle of its reply for API_TIMEOUT=0.5s"),
])
def test_a_stream_that_drops_mid_reply_is_one_error_line_after_what_it_cost(run_main, how, said):
    """The reply had begun: the API bills the input it read (message_start's count), so the
    run's total counts the call, and the error is the one line after it."""
    with DroppingEndpoint([how]) as endpoint:
        code, out, err, api = run_main(s03_todo, "hi", env={"ANTHROPIC_BASE_URL": endpoint.url,
                                                            "API_TIMEOUT": "0.5"})
    assert code == 1 and said in words(err) and endpoint.url in words(err), err
    total, page, error = messages(err)
    assert total == "[session: 1 call · 10 input tokens, 0% from cache · 1 out]", err
    assert page.startswith("[session page: ") and error.startswith("error: the ")
    assert "Traceback" not in words(err)


def test_the_dropped_tools_warning_comes_with_the_first_reply_that_came_whole(run_main):
    """The warning that a local server dropped the tool definitions is judged on the first
    call's count: a first reply abandoned part way (now counted for /cost) took its place,
    and the warning never came for the user who needed it."""
    with DroppingEndpoint(["reset", "ok"]) as endpoint:
        code, out, err, api = run_main(s03_todo, stdin="first\nsecond\nq\n",
                                       env={"ANTHROPIC_BASE_URL": endpoint.url})
    assert code == 0 and "dropped in the middle of the reply" in words(err), err
    assert "fewer than the tool definitions alone" in words(err), err


@pytest.mark.parametrize("how", ["whole-then-close", "delta-then-close"])
def test_a_connection_closed_after_the_whole_reply_keeps_the_reply(run_main, how):
    """message_delta (and message_stop) had come, then the connection closed before the length
    the headers promised: the reply was whole, yet it was called dropped and thrown away."""
    with DroppingEndpoint([how]) as endpoint:
        code, out, err, api = run_main(s03_todo, "hi", env={"ANTHROPIC_BASE_URL": endpoint.url})
    assert code == 0 and out.strip() == "Hello there", err
    assert "in the middle of the reply" not in words(err) and "error:" not in err, err


def test_after_a_dropped_stream_the_repl_keeps_the_conversation_and_the_next_prompt_works(run_main):
    with DroppingEndpoint(["ok", "reset", "ok"]) as endpoint:
        code, out, err, api = run_main(s03_todo, stdin="first\nsecond\nthird\nq\n",
                                       env={"ANTHROPIC_BASE_URL": endpoint.url})
    assert code == 0 and out.count("Hello there") == 2 and "Traceback" not in words(err)
    assert "dropped in the middle of the reply" in words(err)
    assert "[turn failed; the conversation is as it was" in words(err)
    third = endpoint.requests[2]["messages"]
    assert [m["role"] for m in third] == ["user", "assistant", "user"]
    assert third[0]["content"] == "first" and third[2]["content"] == "third"


# ---------------------------------------------------------------- text that cannot be encoded

@pytest.mark.parametrize("how", ["one-shot", "repl"])
def test_an_answer_a_narrow_terminal_cannot_encode_is_shown_and_the_turn_kept(run_lesson, how):
    """A terminal whose encoding lacks a character (ASCII, Latin-1) shows a stand-in for it;
    the finished turn is not undone, so --continue has it."""
    ascii_only = {"PYTHONIOENCODING": "ascii"}
    args, stdin = ["go"], None
    if how == "repl":
        args, stdin = [], "go\nq\n"
    proc, api = run_lesson("s06_compact", *args, stdin=stdin, env=ascii_only,
                           script=[reply(text("Done \u2713 \u2014 all of it."))])
    assert proc.returncode == 0, proc.stderr
    assert "Done ? ? all of it." in proc.stdout
    assert "turn failed" not in proc.stderr
    # What --continue sends is the log's, not the terminal's: in process.
    proc, api = run_lesson("s06_compact", "--continue", "more", env=ascii_only,
                           script=[reply(text("ok"))], in_process=True)
    sent = api.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]


def test_a_prompt_with_a_stray_byte_is_sent_with_a_replacement_character(run_main):
    """argv, and stdin read with surrogateescape, carry a stray Latin-1 é as the lone surrogate
    \\udce9."""
    code, out, err, api = run_main(s03_todo, "caf\udce9?", script=[reply(text("ok"))])
    assert code == 0 and api.requests[0]["messages"][0]["content"] == "caf\ufffd?", err
    assert "not UTF-8" in err
    code, out, err, api = run_main(s03_todo, stdin="caf\udce9?\nq\n", script=[reply(text("ok"))])
    assert code == 0 and api.requests[0]["messages"][0]["content"] == "caf\ufffd?", err


def test_a_typed_latin1_byte_does_not_end_the_repl(workdir):
    from harness.stand_in import StandInAPI
    with StandInAPI([reply(text("understood"))]) as api:
        env = clean_env(workdir.parent / "home", ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="k")
        proc = subprocess.run(lesson_command("s03_todo"), cwd=workdir, env=env,
                              input=b"caf\xe9?\nq\n", capture_output=True, timeout=60)
    assert proc.returncode == 0 and b"understood" in proc.stdout, proc.stderr.decode()
    assert api.requests[0]["messages"][0]["content"] == "caf\ufffd?"


def test_half_an_emoji_from_the_model_does_not_break_the_session(run_main, workdir):
    script = [reply(text("Writing it \ud83d"),
                    tool("write_file", {"path": "a.txt", "content": "x"})),
              reply(text("done")), reply(text("still here"))]
    code, out, err, api = run_main(s03_todo, stdin="go\nagain\nq\n", script=script)
    assert code == 0 and "did not answer like the Messages API" not in err and api.violations == []
    last = api.requests[-1]["messages"]
    assert last[-1]["content"] == "again" and last[1]["content"][0]["text"] == "Writing it \ufffd"


def test_a_request_that_cannot_be_encoded_names_the_real_cause():
    import anthropic
    from harness.errors import EndpointError
    from harness.stand_in import StandInAPI
    with StandInAPI([reply(text("never"))]) as api:
        run = Run(anthropic.Anthropic(api_key="k", base_url=api.url))
        with pytest.raises(EndpointError, match="not valid Unicode") as raised:
            half = [{"role": "user", "content": "half an emoji \ud83d"}]
            s03_todo.ask_model(run, "s", [], half, 9)
    assert "'\\ud83d'" in str(raised.value) and "did not answer like" not in str(raised.value)
    assert api.requests == []


# ---------------------------------------------------------------- minor set-up mistakes

def test_an_answer_piped_into_a_reader_that_has_gone_ends_quietly(workdir):
    """`python s03_todo.py "go" | head -1`: head leaves after one line; the rest cannot be
    written."""
    from harness.stand_in import StandInAPI
    with StandInAPI([reply(text("line\n" * 2000))]) as api:
        env = clean_env(workdir.parent / "home", ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="k")
        reader, writer = os.pipe()
        os.close(reader)            # the reader is gone before the answer comes
        try:
            proc = subprocess.run(lesson_command("s03_todo", "go"), cwd=workdir,
                                  env=env, stdout=writer, stderr=subprocess.PIPE, text=True,
                                  timeout=60)
        finally:
            os.close(writer)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("url", ["127.0.0.1:8080", "localhost:8080"])
def test_a_base_url_without_a_scheme_is_named_before_any_request(run_main, url):
    code, out, err, api = run_main(s03_todo, "hi", env={"ANTHROPIC_BASE_URL": url})
    assert code == 1 and "has no scheme" in err and f"http://{url}" in err, err
    assert len(messages(err)) == 1


@pytest.mark.parametrize("url, said", [
    ("http://[::1:8080/", "is not a valid URL (Invalid IPv6 URL)"),
    ("http://127.0.0.1:99999", "is not a valid URL (Port out of range"),
    ("ftp://127.0.0.1:8080", "must be http:// or https://"),
    # Pasted with its line end, or a tab in a quoted .env value: the HTTP library's traceback.
    ("http://127.0.0.1:8080\n", "holds a space, a tab, a line break or another character"),
    ("http://127.0.0.1:8080/\tv", "holds a space, a tab, a line break or another character"),
])
def test_a_malformed_base_url_is_one_line_naming_what_is_wrong(run_main, url, said):
    code, out, err, api = run_main(s03_todo, "hi", env={"ANTHROPIC_BASE_URL": url})
    assert code == 1 and f"ANTHROPIC_BASE_URL={url!r} {said}" in words(err), err
    assert len(messages(err)) == 1 and "Traceback" not in words(err)


def test_a_base_url_ending_in_v1_is_named_on_its_404(run_main):
    from harness.stand_in import StandInAPI
    with StandInAPI([reply(text("never"))]) as real:
        code, out, err, api = run_main(s03_todo, "hi",
                                       env={"ANTHROPIC_BASE_URL": real.url + "/v1/"})
    assert code == 1 and "ends in /v1" in err and "drop the /v1" in err, err
    assert "MODEL_ID" not in err, err


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "1e999", "1e10", "86401"])
def test_an_api_timeout_that_is_not_a_number_of_seconds_up_to_a_day_is_refused(run_main, value):
    """1e10 was taken, then blamed on the network: the clock overflowed on the first call."""
    code, out, err, api = run_main(s03_todo, "hi", env={"API_TIMEOUT": value})
    assert code == 1 and api.requests == [] and len(messages(err)) == 1, err
    assert "API_TIMEOUT must be a positive number of seconds up to 86,400" in words(err)


def test_a_triple_quoted_block_cut_off_by_the_end_of_input_is_sent_with_a_note(run_main):
    code, out, err, api = run_main(s03_todo, script=[reply(text("got it"))],
                                   stdin='"""\nfirst line\nsecond line\n')
    assert code == 0 and "got it" in out and "the input ended inside a \"\"\" block" in err
    assert api.requests[0]["messages"] == [{"role": "user", "content": "first line\nsecond line"}]


# ---------------------------------------------------------------- Ctrl-C in a batch of tool calls

def repl_stopped_mid_batch(workdir, running):
    """s03's REPL, given a prompt whose reply runs three bash calls, takes a real Ctrl-C
    (SIGINT) while call number `running` runs, then a second prompt: (stdout, stderr, the
    request of the second prompt)."""
    script = [batch_of_three(running), reply(text("after interrupt"))]
    with StandInAPI(script) as api:
        env = clean_env(workdir.parent / "home", ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=api.url)
        proc = popen_taking_ctrl_c(lesson_command("s03_todo"), cwd=workdir,
                                   env=env, text=True, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdin.write("make three files\n")
        proc.stdin.flush()
        group = running_command(workdir, proc)
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate("next prompt\nq\n", timeout=60)
    assert proc.returncode == 0 and api.violations == [], err
    assert group_ends(group)                      # Ctrl-C stopped the command too
    return out, err, api.requests[1]


@pytest.mark.slow
@pytest.mark.parametrize("running", [0, 1])
def test_ctrl_c_in_a_batch_keeps_the_calls_that_ran_and_marks_the_one_running(workdir,
                                                                             run_lesson, running):
    """A real Ctrl-C while call `running` of three runs: the calls before it keep their
    results, it is marked interrupted (it may have acted: the model checks before redoing
    it), the rest are marked not run; the next prompt's request and the log hold the same."""
    out, err, request = repl_stopped_mid_batch(workdir, running)
    calls = "1 tool call" if running == 0 else f"{running + 1} tool calls"
    assert f"turn abandoned after {calls}: they are kept in the conversation" in err
    assert "after interrupt" in out
    assert [(workdir / f"{n}.txt").exists() for n in ("one", "two", "three")] == [
        n < running for n in range(3)]
    prompt, batch, results, next_prompt = request["messages"]
    assert prompt == {"role": "user", "content": "make three files"}
    assert [b["type"] for b in batch["content"]] == ["tool_use"] * 3
    ran = results["content"][:running]
    assert [r["content"] for r in ran] == ["wrote one", "wrote two"][:running]
    assert not any(r.get("is_error") for r in ran)
    stopped = results["content"][running:]
    assert [(r["content"], r["is_error"]) for r in stopped] == (
        [(INTERRUPTED, True)] + [(NOT_RUN, True)] * (2 - running))
    assert next_prompt == {"role": "user", "content": "next prompt"}
    # The log holds the same: --continue sends what the REPL sent, and the answer after it.
    proc, api = run_lesson("s03_todo", "--continue", "go on", script=[reply(text("resumed"))],
                           in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    assert api.requests[0]["messages"] == request["messages"] + [
        {"role": "assistant", "content": [text("after interrupt")]},
        {"role": "user", "content": "go on"}]


# ---------------------------------------------------------------- the key stays with the client

def test_the_key_from_dotenv_never_reaches_a_command(run_main, workdir):
    (workdir / ".env").write_text("ANTHROPIC_API_KEY=sk-from-dotenv\n"
                                  "ANTHROPIC_AUTH_TOKEN=tok-from-dotenv\n")
    command = "echo key=${ANTHROPIC_API_KEY:-none} token=${ANTHROPIC_AUTH_TOKEN:-none}"
    script = [reply(tool("bash", {"command": command})), reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "hi", script=script, key=None)
    headers = api.headers[0]
    sent = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
    assert code == 0 and sent == "sk-from-dotenv"
    assert tool_results(api.requests[1])[0]["content"].strip() == "key=none token=none"


def test_the_key_in_the_real_environment_never_reaches_a_command(run_lesson):
    """The lesson needs the key for its client; the commands the model runs do not, and one
    that echoed it (or a script that uploaded it) would hand it to the model."""
    command = "echo key=${ANTHROPIC_API_KEY:-none} token=${ANTHROPIC_AUTH_TOKEN:-none}"
    script = [reply(tool("bash", {"command": command})), reply(text("done"))]
    proc, api = run_lesson("s03_todo", "hi", script=script, key="sk-from-env",
                           env={"ANTHROPIC_AUTH_TOKEN": "tok-from-env"}, in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    assert tool_results(api.requests[1])[0]["content"] == "key=none token=none"
    assert "sk-from-env" not in json.dumps(api.requests) and "sk-from-env" not in proc.stderr


def test_a_copy_of_the_dotenv_key_under_another_name_never_reaches_a_command(run_main,
                                                                              workdir):
    key = "sk-ant-from-dotenv-" + "k" * 20
    (workdir / ".env").write_text(f"ANTHROPIC_API_KEY={key}\n")
    command = "echo old=${MY_OLD_KEY:-none}"
    script = [reply(tool("bash", {"command": command})), reply(text("done"))]
    code, out, err, api = run_main(s03_todo, "hi", script=script, key=None,
                                   env={"MY_OLD_KEY": key})
    headers = api.headers[0]
    sent = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
    assert code == 0 and sent == key                        # the client has it
    assert tool_results(api.requests[1])[0]["content"].strip() == "old=none"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here (it is Linux's)")
@pytest.mark.parametrize("lesson, args, stdin", [("s03_todo", ["--demo"], ""),
                                                 ("s07_task_system", [], "/tasks\n")],
                         ids=["demo", "repl"])
def test_output_to_a_full_disk_is_one_line_not_a_traceback(workdir, lesson, args, stdin):
    """`python s03_todo.py --demo > /dev/full`: every write to stdout fails (ENOSPC)."""
    env = clean_env(workdir.parent / "home")
    with open("/dev/full", "w") as full:
        proc = subprocess.run(lesson_command(lesson, *args), cwd=workdir, env=env, stdout=full,
                              stderr=subprocess.PIPE, input=stdin, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    assert messages(proc.stderr)[-1] == ("error: the output could not be written: the disk is "
                                         "full"), proc.stderr


def test_a_connection_that_never_opens_is_not_blamed_on_api_timeout(run_main):
    """https:// to a server that accepts and never answers the TLS handshake: the connect
    timeout fires, which a bigger API_TIMEOUT (past 10 s) would not change."""
    import socket
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"https://127.0.0.1:{silent.getsockname()[1]}"
        code, out, err, api = run_main(s03_todo, "hi", env={"ANTHROPIC_BASE_URL": url,
                                                            "API_TIMEOUT": "0.3"})
    assert code == 1 and api.requests == [], err
    assert messages(err) == [f"error: could not connect to the API at {url} within 0.3s, even "
                             "after retries: check ANTHROPIC_BASE_URL (http or https?) and "
                             "your network"], err
