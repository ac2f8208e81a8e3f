"""The terminal output rules: colour only on a terminal, never with NO_COLOR."""

import io

import harness.terminal as harness


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert harness.colour("31", "x", Terminal()) == "\033[31mx\033[0m"
    assert harness.colour("31", "x", io.StringIO()) == "x"          # a pipe or a file
    monkeypatch.setenv("NO_COLOR", "1")
    assert harness.colour("31", "x", Terminal()) == "x"


def test_no_colour_on_a_dumb_terminal(monkeypatch):
    """TERM=dumb (Emacs' shell, some CI logs) shows a colour code as ^[[31m."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "dumb")
    assert harness.colour("31", "x", Terminal()) == "x"


def test_a_tool_call_is_one_short_line_and_a_preview(capsys):
    harness.show_tool_call("task_create", {"subject": "Design data model"})
    harness.show_tool_result("Created task #1: Design data model", False)
    harness.show_tool_call("write_file", {"path": "a.txt", "content": "x" * 500})
    harness.show_tool_result("\n".join(f"line {n}" for n in range(20)), True)
    harness.show_tool_result("\n".join(f"line {n}" for n in range(14)), False)
    err = capsys.readouterr().err.splitlines()
    assert err[:2] == ['> task_create subject="Design data model"',
                       "  = Created task #1: Design data model"]
    assert len(err[2]) < 100 and "…[500 characters]…" in err[2]      # long arguments are cut
    assert err[3] == "  ! line 0" and err[8] == "    … (15 more lines)"   # a long one: its head
    assert err[9:] == ["  = line 0"] + [f"    line {n}" for n in range(1, 14)]  # a short one: whole
