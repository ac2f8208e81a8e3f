"""s03's file tools and bash on a hostile machine: FIFOs, huge and sparse files, binary files,
a full disk, CRLF files, errors in words. (The agent's key kept out of commands: test_secrets.py
and test_cli.py; a file's mode kept: test_atomic_file_tools.py.)

Each test calls the tools as the loop does (s03.call_tool: the result and is_error the model
gets), in a tmp folder. A call that could hang runs in a thread with a deadline.
"""

import errno
import io
import os
import subprocess
import sys
import time
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers import ROOT, FullDisk, call_tool, within

import s03_todo as s03

DEADLINE = 5          # seconds: a tool call that takes longer is hanging
FAST = 1.0            # seconds: "returns at once" for a call that reads only what it shows
LITTLE_MEMORY = 20_000_000   # bytes of Python allocations: a read that needs only a few lines


pytestmark = pytest.mark.usefixtures("in_tmp")     # the workspace: a folder of each test's own


def tool(name: str, **args) -> tuple:
    """(output, is_error), exactly as the model would get them."""
    return call_tool(name, args, s03.TOOLS, s03.TOOL_HANDLERS)


def later(name: str, **args):
    """The same tool call, to be made later (in a thread, or measured)."""
    return lambda: tool(name, **args)


def measured(fn) -> tuple:
    """(value, seconds, peak bytes allocated by Python meanwhile)."""
    tracemalloc.start()
    start = time.monotonic()
    try:
        value = within(30, fn)
        return value, time.monotonic() - start, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ---------------------------------------------------------------- FIFOs, huge and binary files

def test_read_file_on_a_fifo_says_it_is_a_fifo_and_does_not_hang():
    os.mkfifo("pipe")
    out, is_error = within(DEADLINE, later("read_file", path="pipe"))
    assert is_error and "FIFO" in out
    assert "directory" not in out


def test_write_file_onto_a_fifo_refuses_without_hanging():
    os.mkfifo("pipe")

    def reader():   # the other end: lets a writer that opened the FIFO finish
        os.close(os.open("pipe", os.O_RDONLY | os.O_NONBLOCK))
    out, is_error = within(DEADLINE, later("write_file", path="pipe", content="data"),
                           unblock=reader)
    assert is_error and "FIFO" in out
    assert Path("pipe").is_fifo()


def test_read_file_with_a_limit_on_a_2_gb_sparse_file_is_fast_small_and_says_binary():
    with open("disk.img", "wb") as f:
        f.truncate(2 * 1024 ** 3)          # all NULs, and no disk space used
    (out, is_error), seconds, peak = measured(later("read_file", path="disk.img", limit=10))
    assert seconds < FAST and peak < LITTLE_MEMORY, (seconds, peak)
    assert "\0" not in out and len(out) < 1000
    assert "binary" in out and "2,147,483,648 bytes" in out


def bytes_read(fn) -> tuple:
    """(fn's value, how many bytes this process read meanwhile, as Linux counts them)."""
    io_file = Path("/proc/self/io")
    if not io_file.exists():
        pytest.skip("no /proc/self/io here: it counts the bytes a call reads (Linux)")

    def rchar() -> int:
        return int(io_file.read_text().split("rchar:")[1].split()[0])
    before = rchar()
    value = fn()
    return value, rchar() - before


BOUNDED_READ = 4 * s03.OUTPUT_CAP + 2_000_000   # a read's lines, and a margin: not 4 GiB
TEXT_LINES = {"long": [f"{n}: the quick brown fox jumps over the lazy dog" for n in range(600)],
              "short": [f"line {n}" for n in range(600)]}    # all of them within the first 8 kB


@pytest.mark.parametrize("lines", TEXT_LINES.values(), ids=TEXT_LINES.keys())
def test_read_file_on_a_sparse_file_shows_its_text_lines_and_reads_only_a_bounded_prefix(lines):
    """A disk image or a preallocated log: text, then a hole of NULs up to 4 GiB. read_file
    shows the text, says where the binary part starts, and reads a bounded prefix."""
    text = "".join(f"{line}\n" for line in lines)
    with open("sparse.log", "wb") as f:
        f.write(text.encode())
        f.truncate(4 * 1024 ** 3)
    (out, is_error), read = bytes_read(lambda: within(60, later("read_file", path="sparse.log")))
    assert not is_error and read < BOUNDED_READ, (out[-300:], read)
    assert out.splitlines()[:600] == lines and "\0" not in out
    note = out.splitlines()[600]
    assert note.startswith("[line 601 holds NUL bytes: from there the file looks binary")
    assert f"xxd -s {len(text)} sparse.log | head" in note
    assert len(out.splitlines()) == 601                     # no read on into the hole
    (out, is_error), read = bytes_read(later("read_file", path="sparse.log", offset=700))
    assert is_error and read < BOUNDED_READ, (out, read)
    assert "line 601 holds NUL bytes" in out and "offset 700" in out


def test_a_line_of_100_mb_is_shown_cut_after_reading_only_a_bounded_prefix():
    with open("one-line.json", "wb") as f:
        for _ in range(100):
            f.write(b"x" * 1_000_000)
        f.write(b"\nafter\n")
    (out, is_error), read = bytes_read(later("read_file", path="one-line.json"))
    assert not is_error and read < BOUNDED_READ, (out[-300:], read)
    assert out.startswith("x" * 1000) and "line 1 is longer than" in out and "| tail -c +" in out
    assert out.endswith("read on with offset=2)")


def test_a_binary_file_is_described_by_its_size_not_sent():
    Path("logo.gif").write_bytes(b"GIF89a\x01\x00\x01\x00\x00\x00\x00" + b"\x00\x01\x02" * 329)
    out, _ = tool("read_file", path="logo.gif")
    assert "\0" not in out and "\x01" not in out
    assert "binary" in out and "1,000 bytes" in out


def test_read_file_with_a_limit_reads_only_the_lines_it_shows(big_log):
    (out, is_error), seconds, peak = measured(later("read_file", path=big_log, limit=5))
    assert seconds < FAST and peak < LITTLE_MEMORY, (seconds, peak)
    assert not is_error
    assert out.splitlines()[:5] == ["x" * 99] * 5
    assert "offset=6" in out                # it says how to read on


# ---------------------------------------------------------------- a full disk

@contextmanager
def full_disk():
    """Meanwhile, every file opened for writing gets half its data, then ENOSPC. io.open is what
    both Path.write_bytes (writing in place) and os.fdopen (a temp file) open files with."""
    real_open = io.open

    def open_on_full_disk(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        return FullDisk(f) if any(c in mode for c in "wxa+") else f
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(io, "open", open_on_full_disk)
        yield


ORIGINAL = b'{\n  "name": "demo",\n' + b'  "key": "value",\n' * 1000 + b'  "end": true\n}\n'


def test_write_file_on_a_full_disk_leaves_the_file_whole_and_says_so():
    Path("config.json").write_bytes(ORIGINAL)
    with full_disk():
        out, is_error = tool("write_file", path="config.json", content='{"name": "new"}\n' * 2000)
    assert Path("config.json").read_bytes() == ORIGINAL
    assert is_error and "disk is full" in out and "unchanged" in out
    assert os.listdir() == ["config.json"]          # no temp file left behind


def test_edit_file_on_a_full_disk_leaves_the_file_whole_and_says_so():
    Path("config.json").write_bytes(ORIGINAL)
    with full_disk():
        out, is_error = tool("edit_file", path="config.json", old_text='"demo"', new_text='"live"')
    assert Path("config.json").read_bytes() == ORIGINAL
    assert is_error and "disk is full" in out and "unchanged" in out
    assert os.listdir() == ["config.json"]


def test_a_new_file_on_a_full_disk_is_not_left_half_written():
    with full_disk():
        out, is_error = tool("write_file", path="notes.md", content="# Notes\n" * 1000)
    assert is_error and "disk is full" in out
    assert os.listdir() == []


# ---------------------------------------------------------------- line endings

@pytest.mark.parametrize("eol", [b"\r\n", b"\r"])
def test_a_one_line_edit_keeps_every_other_byte(eol):
    lines = [b"def main():", b"    print('one')", b"    print('two')", b"    return 0", b""]
    Path("app.py").write_bytes(eol.join(lines))
    out, is_error = tool("edit_file", path="app.py", old_text="print('two')",
                         new_text="print('TWO')")
    assert not is_error, out
    lines[2] = b"    print('TWO')"
    assert Path("app.py").read_bytes() == eol.join(lines)


def test_old_text_written_with_newlines_matches_a_crlf_file():
    Path("app.py").write_bytes(b"a = 1\r\nb = 2\r\nc = 3\r\n")
    out, is_error = tool("edit_file", path="app.py", old_text="a = 1\nb = 2",
                         new_text="a = 1\nb = 20\nb2 = 21")
    assert not is_error, out
    assert Path("app.py").read_bytes() == b"a = 1\r\nb = 20\r\nb2 = 21\r\nc = 3\r\n"


@pytest.mark.parametrize("old, new", [("b = 2", "b = 20\nb2 = 21"),          # one line for two
                                      ("b = 2", "b = 20\r\nb2 = 21")])       # new_text in CRLF
def test_every_line_an_edit_adds_to_a_crlf_file_ends_in_crlf(old, new):
    """Only an old_text of several lines gave new_text the file's line ending: one line made
    two put a bare LF into a CRLF file, and a new_text in CRLF became \r\r\n."""
    Path("app.py").write_bytes(b"a = 1\r\nb = 2\r\nc = 3\r\n")
    out, is_error = tool("edit_file", path="app.py", old_text=old, new_text=new)
    assert not is_error, out
    assert Path("app.py").read_bytes() == b"a = 1\r\nb = 20\r\nb2 = 21\r\nc = 3\r\n"


def test_old_text_of_several_lines_matches_a_file_of_mixed_line_endings():
    """read_file shows no \r: old_text written with \n matched no file whose lines end both
    ways, and the error said to copy the text exactly, which the model had."""
    Path("m.txt").write_bytes(b"alpha\r\nbeta\ngamma\n")
    out, is_error = tool("edit_file", path="m.txt", old_text="alpha\nbeta\ngamma",
                         new_text="x\ny")
    assert not is_error, out
    assert Path("m.txt").read_bytes() == b"x\r\ny\n"           # as the text it replaced began


@pytest.mark.parametrize("text, old, said, after", [
    # A blank line is not in it: not found (it matched, and a.txt became "Z\r\n").
    ("a\r\nb\r\n", "a\n\nb", "ValueError: old_text not found", "a\r\nb\r\n"),
    ("x\r\nfoo\r\n", "\nfoo", "Edited c.txt", "xZ\r\n"),            # once, not twice
    ("x\r\n\r\ny\r\n", "\n\ny", "Edited c.txt", "xZ\r\n"),          # once, not three times
])
def test_a_crlf_is_one_line_break_never_a_cr_and_an_lf(text, old, said, after):
    """A CRLF split in two matched a blank line that is not there (a silent wrong edit), or
    counted one occurrence two or three times."""
    Path("c.txt").write_bytes(text.encode())
    out, is_error = tool("edit_file", path="c.txt", old_text=old, new_text="Z")
    assert out.startswith(said) and is_error == said.startswith("ValueError")
    assert Path("c.txt").read_bytes() == after.encode()


@pytest.mark.hang_limit(20)
def cpu_seconds(work) -> tuple:
    """(work's value, the CPU seconds this process spent on it): unlike seconds on the clock,
    not stretched by what else the machine runs."""
    start = time.process_time()
    value = work()
    return value, time.process_time() - start


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_a_long_old_text_in_a_big_repetitive_file_is_answered_at_once(eol):
    """A regex tried at every start of a 6 MB CSV of alike lines, for a 40 KB old_text, ran
    300 s before the model got its answer (here: 2 MB and 12 KB took 22 s, 39 s in CI under
    a mutation, which only the suite's hang bound had caught, on a slower machine). A plain
    search of the text with its line breaks as read_file shows them is linear: it costs a
    few times one pass over the file's lines; the edit is exact."""
    rows = ["0,0,0"] * 300_000
    Path("data.csv").write_bytes(eol.join(rows + ["1,1,1", "2,2,2", ""]).encode())
    old = "\n".join(["0,0,0"] * 2_000 + ["1,1,1"])
    _, one_pass = cpu_seconds(lambda: [line.split(",") for line in
                                       Path("data.csv").read_text().splitlines()])
    (out, is_error), spent = cpu_seconds(
        lambda: tool("edit_file", path="data.csv", old_text=old + "x", new_text="y"))
    assert is_error and out.startswith("ValueError: old_text not found in data.csv"), out
    assert spent < 5 * one_pass + 0.2, f"{spent:.2f} s of CPU, one pass {one_pass:.3f} s"
    out, is_error = tool("edit_file", path="data.csv", old_text=old, new_text="9,9,9")
    assert not is_error, out
    kept = eol.join(rows[:-2_000] + ["9,9,9", "2,2,2", ""])
    assert Path("data.csv").read_bytes() == kept.encode()


def test_an_old_text_found_a_million_times_is_counted_only_so_far():
    Path("big.log").write_text(" " * 2_000_000)
    out, is_error = tool("edit_file", path="big.log", old_text=" ", new_text="x")
    assert is_error and "old_text occurs 1,000 or more times in big.log" in out


@pytest.mark.parametrize("text, old", [("ab ab ab\n", "ab ab"), ("aaa\n", "aa")])
def test_an_old_text_found_twice_overlapping_is_refused_as_not_unique(text, old):
    """str.count skips overlaps: "ab ab" in "ab ab ab" counted once, and the first was edited."""
    Path("e.txt").write_text(text)
    out, is_error = tool("edit_file", path="e.txt", old_text=old, new_text="X")
    assert is_error and "occurs 2 times in e.txt" in out
    assert Path("e.txt").read_text() == text


def test_read_file_says_a_files_lines_end_in_crlf():
    Path("app.py").write_bytes(b"a = 1\r\nb = 2\r\n")
    out, _ = tool("read_file", path="app.py")
    assert out.splitlines()[:2] == ["a = 1", "b = 2"]      # the \r is not shown ...
    assert "CRLF" in out                                    # ... so it is said


# ---------------------------------------------------------------- long names

@pytest.mark.parametrize("name", ["文" * 78 + ".md", "文" * 85],
                         ids=["237 bytes", "255 bytes, NAME_MAX"])
def test_a_long_non_ascii_file_name_the_system_takes_can_be_written_and_edited(name):
    """Linux allows 255 bytes a name: 85 CJK characters. A temporary name made from the real
    one (its first 100 characters, and more) went past that, and the write failed."""
    assert len(os.fsencode(name)) <= 255
    out, is_error = tool("write_file", path=name, content="first draft\n")
    assert not is_error, out
    out, is_error = tool("edit_file", path=name, old_text="first", new_text="second")
    assert not is_error, out
    assert Path(name).read_text(encoding="utf-8") == "second draft\n"
    assert os.listdir() == [name]                   # no temporary file left


def test_a_file_name_over_255_bytes_is_refused_in_words_by_every_file_tool():
    """write_file's refusal was the raw OSError, with the whole absolute path in it."""
    name = "a" * 300
    for call in (dict(name="write_file", path=name, content="x"),
                 dict(name="edit_file", path=name, old_text="x", new_text="y"),
                 dict(name="read_file", path=name)):
        out, is_error = tool(**call)
        assert is_error and "the file name is too long" in out, out
        assert "[Errno" not in out and os.getcwd() not in out, out
    assert os.listdir() == []


def test_a_path_longer_than_any_the_system_takes_is_refused_without_repeating_it():
    """A 5,000-character path came back whole in the error, three times on the terminal."""
    out, is_error = tool("read_file", path="c/" * 2500)
    assert is_error and len(out) < 300, out
    assert "5,000 bytes" in out
    # Linux counts bytes: 2,200 characters of CJK are 4,400 of them.
    out, is_error = tool("read_file", path="文/" * 1100)
    assert is_error and len(out) < 300 and "4,400 bytes" in out, out


@pytest.mark.parametrize("path", ["new/", "new/.", "a.txt/.", "new/.."])
def test_write_file_to_a_path_ending_in_a_slash_makes_no_file(path):
    """"new/" names a folder: a file named new was made, and "Wrote 1 bytes to new/" said;
    "new/." and "a.txt/." got past that check (pathlib drops the "/."): a.txt was replaced."""
    Path("a.txt").write_text("old\n")
    out, is_error = tool("write_file", path=path, content="x")
    ending = path[path.rindex("/"):]
    assert is_error and f"{path} ends in {ending}, so it names a folder" in out, out
    assert os.listdir() == ["a.txt"] and Path("a.txt").read_text() == "old\n"


@pytest.mark.parametrize("path, said", [
    ("", "ValueError: the path is empty; give a file's path"),         # was " is a folder"
    ("a\x00b.txt", "ValueError: the path 'a\\x00b.txt' holds a NUL character, which no file "
                  "name may"),                                          # was "embedded null byte"
    # Was "RuntimeError: Symlink loop from ..." (Python 3.13 resolves it; the open says so).
    ("loop/x.txt", "symbolic links"),
])
@pytest.mark.parametrize("name", ["read_file", "write_file"])
def test_a_path_no_file_can_have_is_named_for_what_is_wrong_with_it(name, path, said):
    os.symlink("loop", "loop")
    args = {"path": path, "content": "x"} if name == "write_file" else {"path": path}
    out, is_error = tool(name, **args)
    assert is_error and out.startswith("ValueError: ") and said in out, out
    assert sorted(os.listdir()) == ["loop"]


def test_a_write_of_one_byte_says_byte():
    out, is_error = tool("write_file", path="one.txt", content="x")
    assert not is_error and out == "Wrote 1 byte to one.txt"


# ---------------------------------------------------------------- errors in words

@pytest.mark.parametrize("name, words", [
    ("ENOSPC", "the disk is full"), ("EDQUOT", "quota"), ("EACCES", "permission denied"),
    ("EROFS", "read-only"), ("ENOTDIR", "a file is in the way"), ("EISDIR", "folder"),
    ("ENAMETOOLONG", "name is too long"), ("ELOOP", "symbolic links")])
def test_an_os_error_is_told_in_words(name, words):
    from harness.errors import reason
    assert words in reason(OSError(getattr(errno, name), "strerror"))


def test_errors_are_named_by_errno_name_not_by_linux_numbers():
    """On macOS EDQUOT is 69 (122 on Linux): the words must follow the system's errno module."""
    code = ("import errno; errno.EDQUOT = 69\n"
            "from harness.errors import reason\n"
            "print(reason(OSError(69, 'strerror')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=30)
    assert "quota" in proc.stdout, proc.stderr


def test_write_file_where_a_file_is_in_the_way_of_a_folder_says_so_in_words():
    Path("notes").write_text("a file, not a folder\n")
    for path in ("notes/today.md", "notes/2026/today.md"):
        out, is_error = tool("write_file", path=path, content="hello\n")
        assert is_error and "[Errno" not in out
        assert "a file is in the way" in out
    assert Path("notes").read_text() == "a file, not a folder\n"
