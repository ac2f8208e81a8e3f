"""A user's set-up as it is found. Where the settings come from: ./.env as a secrets manager
serves it (a FIFO), a .env that is not a file, and the repository's .env read from a scratch
folder (the environment wins, then ./.env, then the repository's), and the message without a
key naming where it looked. And an endpoint that is not the Messages API at all.

The repository's .env is read as a user's run reads it, by a subprocess of a copy of the
lessons (config.py finds the repository from where it is); the other tests run the lesson's
main() in process, against the loopback stand-in or a server that is not the API.
"""

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from contextlib import contextmanager
from http import HTTPStatus
from types import SimpleNamespace

import pytest

import s03_todo
from harness import client, env_file
from harness.errors import NoKey
from harness.stand_in import StandInAPI
from harness.stand_in.script import reply, text, tool
from helpers import lesson_command, ROOT, clean_env, messages, tool_results, within, words

KEY = "sk-from-a-secrets-manager"


def sent_key(api) -> str:
    """The key the client sent with the first request."""
    headers = api.headers[0]
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")


# ---------------------------------------------------------------- ./.env that is not a file

def serve(fifo, content: str) -> threading.Thread:
    """A secrets manager serving ./.env as a FIFO (1Password Environments does): it writes the
    settings once a reader opens it, then closes it."""
    def write():
        with open(fifo, "w", encoding="utf-8") as f:      # waits for a reader
            f.write(content)
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


def release(fifo, writer: threading.Thread) -> None:
    """A writer still waiting for a reader (the lesson never opened the FIFO) is let go."""
    if writer.is_alive():
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
    writer.join(5)


def test_a_dotenv_served_as_a_fifo_is_read(run_lesson, workdir):
    fifo = workdir / ".env"
    os.mkfifo(fifo)
    writer = serve(fifo, f"ANTHROPIC_API_KEY={KEY}\nMODEL_ID=model-from-the-fifo\n")
    try:
        proc, api = run_lesson("s03_todo", "hi", script=[reply(text("fine"))], key=None,
                               in_process=True)
    finally:
        release(fifo, writer)
    assert proc.returncode == 0 and proc.stdout.strip() == "fine", proc.stderr
    assert sent_key(api) == KEY and api.requests[0]["model"] == "model-from-the-fifo"


def test_a_fifo_nobody_writes_ends_the_start_with_one_line_not_a_hang(run_main, workdir,
                                                                     monkeypatch):
    monkeypatch.setattr(env_file, "FIFO_WAIT", 0.5)
    os.mkfifo(workdir / ".env")
    code, out, err, api = within(30, lambda: run_main(s03_todo, "hi", key=None))
    assert code == 1 and api.requests == [] and len(messages(err)) == 1, err
    assert f"error: {workdir / '.env'} is a FIFO (named pipe), and nothing was written to it " \
           "within 0.5 s" in words(err)


@pytest.mark.parametrize("kind", ["a folder", "a socket"])
def test_a_dotenv_that_is_neither_a_file_nor_a_fifo_is_named_in_one_line(run_lesson, workdir,
                                                                         kind):
    """A virtual environment named .env, say: the run goes on with the environment's
    settings, and one line says that .env was not read."""
    if kind == "a folder":
        (workdir / ".env").mkdir()
    else:
        import socket
        with socket.socket(socket.AF_UNIX) as bound:
            bound.bind(str(workdir / ".env"))
    proc, api = run_lesson("s03_todo", "hi", script=[reply(text("fine"))], in_process=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "fine", proc.stderr
    said = (f"warning: {workdir / '.env'} is {kind}, not a file of settings (NAME=value "
            "lines): it is not read")
    assert words(proc.stderr).startswith(said + " [tokens:") and proc.stderr.count("warning") == 1


# ---------------------------------------------------------------- the repository's .env

@pytest.fixture
def lessons(tmp_path):
    """A copy of the repository (the lessons and harness/) of the test's own: its .env is the
    repository's .env, which a test may write without touching the real one."""
    made = tmp_path / "lessons"
    shutil.copytree(ROOT / "harness", made / "harness",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "s03_todo.py", made)
    return made


FINE = [reply(text("fine"))]


def run_from_scratch(lessons, workdir, env=None, script=FINE):
    """s03 of the copy run from a scratch folder, as the README says to work, with no key in
    the environment."""
    with StandInAPI(list(script)) as api:
        # ENV_FILE unset: the repository's .env is read, as in a learner's own run.
        extra = {"ANTHROPIC_BASE_URL": api.url, "ENV_FILE": "", **(env or {})}
        proc = subprocess.run(lesson_command("s03_todo", "hi", root=lessons), cwd=workdir,
                              env=clean_env(workdir.parent / "home", **extra),
                              capture_output=True, text=True, encoding="utf-8", timeout=60)
    return proc, api


def test_a_key_in_the_repositorys_dotenv_is_used_from_a_scratch_folder(lessons, workdir):
    """The README: `cp .env.example .env` in the repository, then work in a scratch folder."""
    (lessons / ".env").write_text(f"ANTHROPIC_API_KEY={KEY}\n", encoding="utf-8")
    proc, api = run_from_scratch(lessons, workdir)
    assert proc.returncode == 0 and proc.stdout.strip() == "fine", proc.stderr
    assert sent_key(api) == KEY


def test_the_environment_wins_then_the_scratch_folders_dotenv_then_the_repositorys(lessons,
                                                                                   workdir):
    (lessons / ".env").write_text("ANTHROPIC_API_KEY=sk-repository\nMODEL_ID=model-repository\n"
                                  "MAX_STEPS=7\n", encoding="utf-8")
    (workdir / ".env").write_text("ANTHROPIC_API_KEY=sk-scratch\nMODEL_ID=model-scratch\n",
                                  encoding="utf-8")
    command = "echo steps=${MAX_STEPS:-none} key=${ANTHROPIC_API_KEY:-none}"
    script = [reply(tool("bash", {"command": command})), reply(text("fine"))]
    proc, api = run_from_scratch(lessons, workdir, env={"MODEL_ID": "model-environment"},
                                 script=script)
    assert proc.returncode == 0 and proc.stdout.strip() == "fine", proc.stderr
    assert sent_key(api) == "sk-scratch"                           # ./.env before the repo's
    assert api.requests[0]["model"] == "model-environment"         # the environment first
    shown = tool_results(api.requests[1])[0]["content"]
    assert shown.strip() == "steps=7 key=none"     # a setting only the repository's .env has;
                                                   # its key, like any key, kept from commands
    assert "sk-repository" not in json.dumps(api.requests)


def test_without_a_key_the_message_names_every_dotenv_it_looked_in(lessons, monkeypatch,
                                                                    tmp_path):
    monkeypatch.setattr(env_file, "REPOSITORY", lessons)    # not the real one: it may hold a key
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.chdir(scratch)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("ENV_FILE", raising=False)
    said = env_file.no_key_message()
    assert said == ("no model to talk to: set ANTHROPIC_API_KEY in your environment, in ./.env "
                    f"or in {lessons / '.env'} (copy .env.example; any value will do for a local "
                    "server at ANTHROPIC_BASE_URL), or try --demo, which needs no key")
    with pytest.raises(NoKey) as caught:
        client.make_client(secrets=env_file.load_env())
    assert str(caught.value) == said
    monkeypatch.chdir(lessons)                      # run in the repository: one .env, ./.env
    assert "in your environment or in ./.env (copy" in env_file.no_key_message()


# ---------------------------------------------------------------- a server that is not the API

@contextmanager
def serving(handler):
    """An HTTP server on 127.0.0.1 with this request handler (a class, or a partial of one);
    yields its URL. Its log is quiet: it runs in the process the lesson runs in."""
    getattr(handler, "func", handler).log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # shutdown() waits for the serve loop's next poll: half a second by default, for each test.
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                     daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def answering(status: int, body: str, content_type: str):
    """A request handler that answers every POST with this status and body."""
    class Answer(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            data = body.encode()
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
    return Answer


def run_against(url: str, run_lesson):
    """s03 with ANTHROPIC_BASE_URL at url, in process: what it says of the endpoint."""
    proc, api = run_lesson("s03_todo", "hi", env={"ANTHROPIC_BASE_URL": url}, in_process=True)
    return proc


def not_the_api(url: str, status: int, what: str) -> str:
    return (f"error: the endpoint at {url} answered {status} {HTTPStatus(status).phrase} and "
            f"{what} to POST /v1/messages: check ANTHROPIC_BASE_URL; it must point at an "
            "Anthropic-compatible Messages API")


@pytest.mark.usefixtures("quick_retries")
def test_python_m_http_server_is_one_line_naming_it_and_what_it_sent(run_lesson, tmp_path):
    """`python -m http.server` (its handler, here in process) answers a POST with 501 and an
    HTML page: retrying will not help, and the page is not the news."""
    (tmp_path / "site").mkdir()
    # A class of its own: serving() quiets its log, which would land in the lesson's stderr.
    site = type("Site", (http.server.SimpleHTTPRequestHandler,), {})
    handler = functools.partial(site, directory=str(tmp_path / "site"))
    with serving(handler) as url:
        proc = run_against(url, run_lesson)
    assert proc.returncode == 1 and len(messages(proc.stderr)) == 1, proc.stderr
    assert words(proc.stderr) == not_the_api(url, 501, "an HTML page")


@pytest.mark.parametrize("status, body, content_type, what", [
    (404, "<!DOCTYPE html><html><body>Not Found</body></html>", "text/html; charset=utf-8",
     "an HTML page"),
    (405, "Method Not Allowed", "text/plain", "'Method Not Allowed'"),
])
def test_a_status_the_messages_api_never_sends_is_named_with_what_came(run_lesson, status, body,
                                                                       content_type, what):
    with serving(answering(status, body, content_type)) as url:
        proc = run_against(url, run_lesson)
    assert proc.returncode == 1 and len(messages(proc.stderr)) == 1, proc.stderr
    assert words(proc.stderr) == not_the_api(url, status, what)
    assert "MODEL_ID" not in proc.stderr and "try again" not in proc.stderr


def test_a_rate_limit_asking_to_wait_a_day_is_waited_briefly_then_one_line(run_lesson,
                                                                           monkeypatch):
    """A 429 (or 529) with Retry-After: 99999: the SDK would wait 28 hours before each retry,
    with no word and API_TIMEOUT ignored. The harness waits at most client.RETRY_WAIT_MAX."""
    from harness.sdk import anthropic
    waits = []
    monkeypatch.setattr(anthropic._base_client.time, "sleep", waits.append)

    class RateLimited(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            data = json.dumps({"type": "error", "error": {"type": "rate_limit_error",
                                                          "message": "slow down"}}).encode()
            self.send_response(429)
            self.send_header("content-type", "application/json")
            self.send_header("retry-after", "99999")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
    with serving(RateLimited) as url:
        proc = run_against(url, run_lesson)
    assert waits and max(waits) <= client.RETRY_WAIT_MAX
    assert proc.returncode == 1 and len(messages(proc.stderr)) == 1, proc.stderr
    assert "rate" in words(proc.stderr).lower()


@pytest.mark.parametrize("name, asked, left", [
    ("retry-after", "5", "5"), ("retry-after", "99999", "60"), ("retry-after", "nan", "60"),
    ("retry-after-ms", "1e9", "60000"), ("retry-after", "Wed, 21 Oct 2099 07:28:00 GMT", None)])
def test_the_wait_a_server_asks_before_a_retry_is_what_the_sdk_then_reads(name, asked, left):
    response = SimpleNamespace(headers={name: asked})      # what the hook uses of httpx's reply
    client._capped_retry_wait(response)
    assert response.headers.get(name) == left


@pytest.mark.usefixtures("quick_retries")
def test_an_endpoint_that_redirects_in_a_loop_is_named_so_not_unreachable(run_lesson):
    class Loop(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(307)
            self.send_header("location", self.path)
            self.send_header("content-length", "0")
            self.end_headers()
    with serving(Loop) as url:
        proc = run_against(url, run_lesson)
    assert proc.returncode == 1 and len(messages(proc.stderr)) == 1, proc.stderr
    assert words(proc.stderr).startswith(f"error: the endpoint at {url} redirects in a loop")
    assert "your network" not in proc.stderr


def test_the_sdks_own_http_library_is_the_one_told_apart_when_classic_httpx_is_there_too(
        tmp_path):
    """The SDK speaks httpx2; many packages also install classic httpx. The harness must tell
    apart the SDK's errors (a redirect loop, a dropped connection) by the SDK's library."""
    (tmp_path / "httpx").mkdir()
    (tmp_path / "httpx" / "__init__.py").write_text("class TooManyRedirects(Exception): pass\n")
    proc = subprocess.run([sys.executable, "-c", "from harness import sdk\n"
                           "from harness.sdk import anthropic\n"
                           "print(sdk.httpx is anthropic._base_client.httpx2)"],
                          env={**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"},
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "True", proc.stderr


def test_a_dotenv_copied_from_the_example_and_not_filled_in_is_named_as_empty(lessons, workdir):
    """`cp .env.example .env`, as the README says, leaves ANTHROPIC_API_KEY= empty: the error
    told the learner to copy the file they had just copied."""
    shutil.copy(ROOT / ".env.example", lessons / ".env")
    proc, api = run_from_scratch(lessons, workdir)
    assert proc.returncode == 1 and api.requests == [], proc.stderr
    assert words(proc.stderr) == (
        f"error: no model to talk to: ANTHROPIC_API_KEY in {lessons / '.env'} is empty: put "
        "your key after its = (any value will do for a local server at ANTHROPIC_BASE_URL), or "
        "try --demo, which needs no key")
