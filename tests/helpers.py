"""Helpers shared by the tests (plain functions; the fixtures are in conftest.py).

Histories as the loop builds them, and the stand-in's verdict on them; output read as words.
"""

from harness import pairing
from harness.stand_in.rules import check_request


def valid(messages):
    """None if the real API would accept this history, else the rule it breaks."""
    return check_request({"model": "m", "max_tokens": 1, "messages": messages},
                         context_window=10 ** 9)


def call(id, name="bash", **input):
    return {"type": "tool_use", "id": id, "name": name, "input": input or {"command": "ls"}}


def result(id, content="ok"):
    return {"type": "tool_result", "tool_use_id": id, "content": content}


def interrupted(id):
    """The result a call gets when it was running as the session (or the turn) stopped."""
    return {"type": "tool_result", "tool_use_id": id, "content": pairing.STOPPED,
            "is_error": True}


def session(n_calls):
    """A history as the loop builds it: a prompt, then a call and its result, n times, an answer."""
    history = [{"role": "user", "content": "fix the tests"}]
    for n in range(n_calls):
        history += [{"role": "assistant", "content": [call(f"t{n}")]},
                    {"role": "user", "content": [result(f"t{n}", f"output {n}")]}]
    return history + [{"role": "assistant", "content": [{"type": "text", "text": "Done."}]}]


def words(output: str) -> str:
    """The text with every run of white space one space: a message wrapped to the terminal's
    width (terminal.fit), or a phrase wrapped in a page of docs, reads as one line."""
    return " ".join(output.split())


def widest(output: str, prompt: str = "") -> int:
    """The longest line of the output, a REPL's prompt (echoed before what a piped command
    prints, where a terminal would have ended the typed line) left out."""
    lines = [line.removeprefix(prompt) if prompt else line for line in output.splitlines()]
    return max(map(len, lines), default=0)


def messages(output: str) -> list:
    """The output's messages, each one line: a line, and the indented lines that continue it
    (terminal.fit wraps a long one to the width), joined back. "One line, no traceback" is
    one message here, however many rows of the terminal it takes."""
    found = []
    for line in output.splitlines():
        if line.startswith(" ") and found:
            found[-1] += " " + line.strip()
        else:
            found.append(line)
    return found
