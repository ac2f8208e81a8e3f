"""Text cut and escaped the same way wherever it is shown: the terminal and the session page."""

import html
from types import SimpleNamespace

from harness import excerpt, terminal
from harness.session import markup
from harness.session.page import render
from harness.session.recorder import Recorder

TWENTY_LINES = "\n".join(f"line {n}" for n in range(20))


def test_a_long_result_is_previewed_alike_on_the_screen_and_on_the_page(capsys):
    terminal.show_tool_result(TWENTY_LINES, False)
    screen = [line[4:] for line in capsys.readouterr().err.splitlines()]
    record = Recorder("s03_todo")
    usage = SimpleNamespace(input_tokens=10, output_tokens=5)
    record.call(usage)
    record.tool("bash", {"command": "seq 20"}, TWENTY_LINES, False)
    page = html.unescape(render(record.data))
    assert screen == ["line 0", "line 1", "line 2", "line 3", "line 4", "… (15 more lines)"]
    assert "\n".join(screen) in page


def test_a_short_result_is_shown_whole_up_to_the_limit_it_is_given():
    assert excerpt.preview("a\nb\nc") == ["a", "b", "c"]
    assert excerpt.preview("\n".join("abcdefg"), whole=7) == list("abcdefg")
    assert excerpt.preview("\n".join("abcdefg"), whole=6) == [*"abcde", "… (2 more lines)"]
    assert excerpt.preview("") == [""]


def test_the_page_and_the_terminal_escape_the_same_control_characters():
    for code in range(0x3000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF or char in "\\\r":   # surrogates: repaired or escaped
            continue
        on_screen = terminal.printable(char)
        on_page = html.unescape(markup.text(char))
        assert on_screen == on_page, (hex(code), on_screen, on_page)
    assert markup.text("\ud800") == "\\ud800"                   # the page is written as UTF-8
    assert terminal.printable("\ud800") == "\ufffd"


def test_a_cut_text_keeps_its_limit_and_says_it_was_cut():
    assert excerpt.cut("abcdef", 6) == "abcdef"
    assert excerpt.cut("abcdefg", 6) == "abcde…"
    assert excerpt.one_line("a\n  b\tc", 5) == "a b c"
    assert excerpt.one_line(ValueError("first\nsecond"), 8) == "first s…"


def test_a_long_text_keeps_its_head_and_its_tail_and_names_its_length():
    assert excerpt.head_and_tail("abcdef", 3, 3) == "abcdef"
    assert excerpt.head_and_tail("a" * 10 + "END", 2, 3) == "aa…[13 characters]…END"
    # a JSON argument names the length of the string it encodes, not of its encoding
    json_text = '"' + "x" * 2_000 + '"'
    assert excerpt.head_and_tail(json_text, 2, 2, 2_000) == '"x…[2,000 characters]…x"'
