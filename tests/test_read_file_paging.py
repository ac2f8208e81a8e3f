"""read_file on a file bigger than the cap: each result fits the cap, and following its
"read on with offset=N" from line 1 shows every line of the file exactly once.

Called as the loop calls it (s03.call_tool: the result the model gets, after the cap), and
files.read_lines directly with a small cap for the edge cases.
"""

import re
import subprocess
from pathlib import Path

import pytest

from helpers import call_tool

import s03_todo as s03
from harness import files

NEXT = re.compile(r"\n\.\.\. \((?:[\d,]+ more lines|more lines follow[^;]*|the file is [^;]*; any "
                  r"lines after line \d+:); read on with "
                  r"offset=(\d+)\)$")
CRLF_NOTE = "\n(this file's lines end in CRLF; edit_file keeps them)"


pytestmark = pytest.mark.usefixtures("in_tmp")     # each test runs in a folder of its own


def read_all(path: str, read, cap: int) -> list:
    """Every line the model is shown, following the hints from offset 1 to the end."""
    seen, offset, calls = [], 1, 0
    while offset is not None:
        out = read(path, offset)
        assert len(out) <= cap, f"the read at offset {offset} is {len(out):,} characters"
        calls += 1
        assert calls < 10_000
        out = out.removesuffix(CRLF_NOTE)
        hint = NEXT.search(out)
        shown = out[:hint.start()] if hint else out
        lines = shown.split("\n")
        seen.append((offset, lines))
        offset = int(hint[1]) if hint else None
        if offset is not None:
            assert offset == seen[-1][0] + len(lines), "the hint skips or repeats lines"
    return [line for _, lines in seen for line in lines]


def test_following_read_on_through_a_300_kb_file_shows_every_line_once():
    lines = [f"{n}: " + "word " * (n % 20) for n in range(1, 5_501)]
    Path("big.txt").write_text("\n".join(lines) + "\n")
    assert 290_000 < Path("big.txt").stat().st_size < 310_000

    def read(path, offset):
        out, is_error = call_tool("read_file", {"path": path, "offset": offset},
                                      s03.TOOLS, s03.TOOL_HANDLERS)
        assert not is_error and "not shown" not in out and "output cut" not in out
        return out
    assert read_all("big.txt", read, s03.OUTPUT_CAP) == lines


def test_each_read_stops_within_the_cap_even_with_a_crlf_note():
    lines = ["x" * 97 for _ in range(1_000)]
    Path("dos.txt").write_bytes(b"\r\n".join(line.encode() for line in lines) + b"\r\n")

    def read(path, offset):
        return files.read_lines(Path(path), path, offset, None, 2_000)
    assert read_all("dos.txt", read, 2_000) == lines


def test_a_line_longer_than_the_cap_is_shown_cut_and_the_next_read_goes_past_it():
    lines = ["short one", "y" * 10_000, "short two", "z" * 3_000]
    Path("minified.js").write_text("\n".join(lines) + "\n")
    first = files.read_lines(Path("minified.js"), "minified.js", 1, None, 2_000)
    assert len(first) <= 2_000
    assert first.startswith("short one\n" + "y" * 1_000)
    assert "| tail -c +" in first and "line 2" in first   # how to read the rest of line 2
    assert first.endswith("read on with offset=3)")
    second = files.read_lines(Path("minified.js"), "minified.js", 3, None, 2_000)
    assert second.startswith("short two\n" + "z" * 1_000) and len(second) <= 2_000
    assert "line 4" in second and "| tail -c +" in second
    assert "offset=" not in second                        # line 4 was the last: nothing to read on


def test_lines_longer_than_the_cap_are_each_shown_once_cut_and_bash_reads_their_rest():
    lines = [f"line {n} " + "abcdefghij" * (n * 37 % 400) for n in range(1, 301)]
    Path("mixed.txt").write_text("\n".join(lines) + "\n")
    long_ones = [n for n, line in enumerate(lines, 1) if len(line) > 1_800]
    assert len(long_ones) > 20
    seen, offset = [], 1
    while offset is not None:
        out = files.read_lines(Path("mixed.txt"), "mixed.txt", offset, None, 2_000)
        assert len(out) <= 2_000
        hint = NEXT.search(out)
        offset = int(hint[1]) if hint else None
        seen += (out[:hint.start()] if hint else out).split("\n")
    for n, line in enumerate(lines, 1):
        if n not in long_ones:
            assert seen.pop(0) == line
            continue
        start, note = seen.pop(0), seen.pop(0)
        assert line.startswith(start) and f"[line {n} is {len(line):,} bytes long" in note
        if n in long_ones[:3]:                          # run the note's command, as the model would
            command = note[note.index("sed -n"):-1]
            rest = subprocess.run(command, shell=True, capture_output=True, text=True).stdout
            assert rest.rstrip("\n") == line[len(start):len(start) + files.CUT_STEP]
    assert seen == []


def test_a_read_ending_on_a_cut_line_still_says_where_to_read_on():
    Path("one.txt").write_text("a" * 5_000 + "\nafter\n")
    out = files.read_lines(Path("one.txt"), "one.txt", 1, None, 1_000)
    assert len(out) <= 1_000 and out.startswith("a" * 500) and "offset=2" in out
    assert files.read_lines(Path("one.txt"), "one.txt", 2, None, 1_000) == "after"


def test_a_cut_line_too_long_to_look_past_does_not_promise_lines_after_it(monkeypatch):
    # A minified file of one line: what follows the read is not looked through, so nothing
    # after it is known; the note says where lines would start, and that read says none do.
    monkeypatch.setattr(files, "COUNT_REST_UP_TO", 10_000)
    Path("one.js").write_text("x" * 50_000)
    out = files.read_lines(Path("one.js"), "one.js", 1, None, 1_000)
    assert "more lines follow" not in out
    assert out.endswith("(the file is 50,000 bytes; any lines after line 1: "
                        "read on with offset=2)")
    assert files.read_lines(Path("one.js"), "one.js", 2, None, 1_000) == (
        "one.js has 1 line; offset 2 is past the end")


@pytest.mark.parametrize("offset, limit", [(0, None), (1, 0), (-3, 5), (2, -1)])
def test_read_lines_refuses_lines_that_are_not_positive(offset, limit):
    Path("f.txt").write_text("1\n2\n")
    with pytest.raises(ValueError, match="limit and offset must be positive numbers of lines"):
        files.read_lines(Path("f.txt"), "f.txt", offset, limit, 1_000)


def test_the_command_to_read_a_cut_lines_rest_goes_on_where_the_read_stopped_in_any_script():
    """The note said cut -c with character offsets, and GNU cut counts bytes: on a line of
    non-ASCII text it gave text from half-way back, already shown."""
    line = "".join(f"{n:06d}é" for n in range(30_000))             # 7 characters, 8 bytes each
    Path("u.txt").write_text(line + "\nnext\n", encoding="utf-8")
    shown = files.read_lines(Path("u.txt"), "u.txt", 1, None, 2_000)
    command = re.search(r"read the rest with bash: (.+)\]", shown)[1]
    rest = subprocess.run(command, shell=True, capture_output=True).stdout.decode("utf-8",
                                                                                   "replace")
    seen = shown[:shown.index("\n[line 1 is")]
    assert line.startswith(seen) and rest[:100] == line[len(seen):len(seen) + 100]
