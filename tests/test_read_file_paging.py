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

NEXT = re.compile(r"\n\.\.\. \((?:[\d,]+ more lines?|more lines follow[^;]*|the file is [^;]*; any "
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


# ---------------------------------------------------------------- an offset deep in a file

LINES = ["one", "", "three", "a longer line four", "5", "", "", "eight"]


@pytest.mark.parametrize("part", [1, 3, 7, 1 << 20])
@pytest.mark.parametrize("ending", ["\n", ""], ids=["newline at the end", "no newline at the end"])
def test_every_offset_starts_at_its_line_however_the_skip_splits_the_file(monkeypatch, part,
                                                                          ending):
    """The lines before the offset are skipped a block of SKIP_PART bytes at a time: a block
    ending anywhere (mid-line, on a newline, at the end) lands on the same line."""
    monkeypatch.setattr(files, "SKIP_PART", part)
    Path("f.txt").write_text("\n".join(LINES) + ending)
    for offset in range(1, len(LINES) + 1):
        out = files.read_lines(Path("f.txt"), "f.txt", offset, 1, 1_000)
        assert out.split("\n")[0] == LINES[offset - 1], offset
    out = files.read_lines(Path("f.txt"), "f.txt", len(LINES) + 1, None, 1_000)
    assert out == f"f.txt has {len(LINES)} lines; offset {len(LINES) + 1} is past the end"
    out = files.read_lines(Path("f.txt"), "f.txt", len(LINES) + 5, None, 1_000)
    assert out == f"f.txt has {len(LINES)} lines; offset {len(LINES) + 5} is past the end"


@pytest.mark.parametrize("part", [1, 5, 1 << 20])
def test_a_nul_before_the_offset_names_its_line_and_where_it_starts(monkeypatch, part):
    monkeypatch.setattr(files, "SKIP_PART", part)
    Path("f.txt").write_bytes(b"one\ntwo\nthr\0ee\nfour\n")
    with pytest.raises(ValueError) as refused:
        files.read_lines(Path("f.txt"), "f.txt", 4, None, 1_000)
    assert str(refused.value) == (
        "f.txt: offset 4 is past where its text ends: line 3 holds NUL bytes: from there the "
        "file looks binary; inspect it with bash: xxd -s 8 f.txt | head")
    assert files.read_lines(Path("f.txt"), "f.txt", 2, 1, 1_000) == (
        "two\n... (2 more lines; read on with offset=3)")


class CountingReads:
    """A file whose reads are counted: one per line skipped is what made an offset deep in a
    log slow (14 s to reach line 20,000,000 of a 169 MB file)."""

    def __init__(self, f):
        self.f, self.reads = f, 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def __getattr__(self, name):
        if name in ("read", "readline"):
            self.reads += 1
        return getattr(self.f, name)


def test_an_offset_deep_in_a_big_file_is_reached_a_block_at_a_time_not_a_line_at_a_time(
        monkeypatch):
    with open("big.log", "w", encoding="utf-8") as f:
        f.writelines(f"{n}\n" for n in range(1, 300_001))
    opened = []
    real_fdopen = files.os.fdopen

    def fdopen(*args):
        opened.append(CountingReads(real_fdopen(*args)))
        return opened[-1]
    monkeypatch.setattr(files.os, "fdopen", fdopen)
    out = files.read_lines(Path("big.log"), "big.log", 299_999, 1, 1_000)
    assert out == "299999\n... (1 more line; read on with offset=300000)"
    assert opened[0].reads < 20, f"{opened[0].reads:,} reads to skip 299,998 lines"
