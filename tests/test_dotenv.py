"""Where the settings come from: ./.env as a secrets manager serves it (a FIFO), a .env that is
not a file, and the repository's .env read from a scratch folder.

Each test runs a lesson as a user runs it (a subprocess against the loopback stand-in), or its
main() in process where a setting of config.py must be made short (the wait for a FIFO).
"""

import os
import threading

import pytest

import s03_todo
from harness import config
from harness.stand_in.script import reply, text
from helpers import messages, within, words

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
        proc, api = run_lesson("s03_todo", "hi", script=[reply(text("fine"))], key=None)
    finally:
        release(fifo, writer)
    assert proc.returncode == 0 and proc.stdout.strip() == "fine", proc.stderr
    assert sent_key(api) == KEY and api.requests[0]["model"] == "model-from-the-fifo"


def test_a_fifo_nobody_writes_ends_the_start_with_one_line_not_a_hang(run_main, workdir,
                                                                     monkeypatch):
    monkeypatch.setattr(config, "FIFO_WAIT", 0.5)
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
    proc, api = run_lesson("s03_todo", "hi", script=[reply(text("fine"))])
    assert proc.returncode == 0 and proc.stdout.strip() == "fine", proc.stderr
    said = (f"warning: {workdir / '.env'} is {kind}, not a file of settings (NAME=value "
            "lines): it is not read")
    assert words(proc.stderr).startswith(said + " [tokens:") and proc.stderr.count("warning") == 1
