"""The settings in .env files: which files are read, in what order, and how, safely.

Relied on by cli.py (every lesson's main(): a run reads them before anything else) and
client.make_client (the message when there is no key); it loads with the command line, so that
importing a lesson loads neither it nor python-dotenv. Without each piece:
- load_env and env_files: a key in ./.env, or in the repository's .env (where the README copies
  .env.example) when run from a scratch folder, is not found; a key put into os.environ is
  inherited by every command the agent runs (`env` shows it), so it is returned instead, for
  make_client only (run.secrets); a UTF-16 .env is a traceback.
- _read_env: a .env a secrets manager serves as a FIFO (1Password Environments does) is
  skipped, or hangs the start when nobody serves it; one that is a folder or a socket is
  passed over unsaid.
- no_key_message: the error says to put the key in ./.env, wherever it was looked for; to a
  learner who copied .env.example and left its key empty, it says to copy it.
"""

import io
import os
import select
import stat
import time
from pathlib import Path

from dotenv import dotenv_values

from harness import errors, terminal, writer
from harness.config import SECRETS, hide_from_commands
from harness.errors import SetupError

REPOSITORY = Path(__file__).resolve().parent.parent   # the lessons' folder
ENV_MOST = 1_000_000   # bytes of a .env read at most: settings, not data
FIFO_WAIT = 10         # seconds a .env served as a FIFO may take: a secrets manager may ask
                       # to be unlocked first


def load_env() -> dict:
    """Read the .env files (env_files(), the first wins); a variable set, and not empty, in
    the environment wins over both. Settings go into os.environ; the credentials (SECRETS) are
    returned instead, and hidden from commands."""
    secrets = {}
    for path in env_files():
        data = _read_env(path)
        if data is None:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:  # Notepad and PowerShell often save UTF-16
            raise SetupError(f"{path} is not UTF-8 text; save it as UTF-8 (one NAME=value per "
                             "line)") from None
        for name, value in dotenv_values(stream=io.StringIO(text)).items():
            # `export ANTHROPIC_API_KEY=` counts as unset; so does an empty value in ./.env
            if value is None or os.environ.get(name) or secrets.get(name):
                continue
            if name in SECRETS:
                secrets[name] = value
                hide_from_commands(value)
            else:
                os.environ[name] = value
    return secrets


def env_files() -> list:
    """./.env, then the repository's (unless you run there); or ENV_FILE alone, when set (the
    tests set it: a key a learner put in the repository's .env must not change what they check)."""
    chosen = os.environ.get("ENV_FILE", "").strip()
    if chosen:
        return [Path.cwd() / chosen]
    found = [Path.cwd() / ".env"]
    if Path.cwd().resolve() != REPOSITORY:
        found.append(REPOSITORY / ".env")
    return found


def no_key_message() -> str:
    """What to do without a key, naming every .env looked in, or the one that sets the key to
    nothing (a copy of .env.example not filled in)."""
    empty = _empty_key_in()
    if empty is not None:
        shown = "./.env" if empty == Path.cwd() / ".env" else str(empty)
        return (f"no model to talk to: ANTHROPIC_API_KEY in {shown} is empty: put your key after "
                "its = (any value will do for a local server at ANTHROPIC_BASE_URL), or try "
                "--demo, which needs no key")
    places = ["your environment"]
    for path in env_files():
        places.append("./.env" if path == Path.cwd() / ".env" else str(path))
    where = ", in ".join(places[:-1]) + " or in " + places[-1]
    return (f"no model to talk to: set ANTHROPIC_API_KEY in {where} (copy .env.example; any "
            "value will do for a local server at ANTHROPIC_BASE_URL), or try --demo, which "
            "needs no key")


def _empty_key_in() -> Path | None:
    """The first .env looked in whose ANTHROPIC_API_KEY is set to nothing, or None. Read again
    on this error path alone (load_env keeps only the values), and only a regular file: a
    FIFO's secrets manager serves it once."""
    for path in env_files():
        if not path.is_file():
            continue
        try:
            values = dotenv_values(path, encoding="utf-8")
        except (OSError, ValueError):           # load_env has said what is wrong with it
            continue
        if "ANTHROPIC_API_KEY" in values and not (values["ANTHROPIC_API_KEY"] or "").strip():
            return path
    return None


def _read_env(path: Path) -> bytes | None:
    """The bytes of a .env, a regular file or a FIFO; None if there is none. Anything else (a
    virtual environment named .env, say) is named in one line and not read."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:                  # none, or a link to nothing
        return None
    except OSError as exc:
        raise SetupError(f"{path} cannot be read: {errors.reason(exc)}") from None
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):   # a socket cannot even be opened
        terminal.show_note(f"warning: {path} is {writer.kind_of(mode)}, not a file of "
                           "settings (NAME=value lines): it is not read")
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)   # a FIFO: no wait here
    except OSError as exc:
        raise SetupError(f"{path} cannot be read: {errors.reason(exc)}") from None
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            data = _from_fifo(fd, path)
        else:
            data = os.fdopen(fd, "rb", closefd=False).read(ENV_MOST + 1)
    finally:
        os.close(fd)
    if len(data) > ENV_MOST:
        raise SetupError(f"{path} holds over {ENV_MOST:,} bytes: a .env holds settings, one "
                         "NAME=value per line")
    return data


def _from_fifo(fd: int, path: Path) -> bytes:
    """What a FIFO's writer sends before it closes it, within FIFO_WAIT seconds."""
    deadline = time.monotonic() + FIFO_WAIT
    data = b""
    while len(data) <= ENV_MOST:
        left = deadline - time.monotonic()
        if left <= 0:
            said = "not all of it was" if data else "nothing was"
            raise SetupError(f"{path} is a FIFO (named pipe), and {said} written to it within "
                             f"{FIFO_WAIT:g} s: start what serves it (a secrets manager), or "
                             "put a file of settings there")
        if not select.select([fd], [], [], left)[0]:
            continue
        part = os.read(fd, 1 << 16)
        if part:
            data += part
        elif data:                            # the writer closed it: that was all of it
            break
        else:                                 # no writer yet, where the system says readable
            time.sleep(0.05)
    return data
