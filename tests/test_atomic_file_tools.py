"""s03's write_file and edit_file replace a file atomically: a crash mid-write leaves old or new.

The crash is deterministic (see crash_at_byte in helpers.py): the kernel ends the
child the moment it writes byte N of any file, so an in-place write is caught at every N,
every run. Written in place, a model's edit killed halfway leaves half a source file.
"""

import os
import stat
import threading
from pathlib import Path

import pytest

import s03_todo
from harness import files
from helpers import call_tool, crash_at_byte, crash_inside_target

OLD = "old line\n" * 300            # 2,700 bytes
NEW = "the new line\n" * 300        # 3,900 bytes: a crash anywhere in it is in the middle
CUTS = [1, 100, len(NEW) // 2, len(NEW) - 1]
SETUP = "import s03_todo"


def assert_whole(path, limit, *versions):
    """The file holds one of versions exactly (or, with None among them, does not exist)."""
    if None in versions and not path.exists():
        return
    text = path.read_text(encoding="utf-8")
    assert text in versions, (f"{path.name} is torn after a crash at byte {limit}: "
                              f"{len(text):,} characters, "
                              f"ending {text[-30:]!r}")


@pytest.mark.parametrize("limit", CUTS)
def test_a_crash_inside_write_file_leaves_the_old_file_or_the_new(in_tmp, limit):
    (in_tmp / "notes.txt").write_text(OLD, encoding="utf-8")
    crash_at_byte(limit, SETUP, f"s03_todo.run_write('notes.txt', {NEW!r})", in_tmp)
    assert_whole(in_tmp / "notes.txt", limit, OLD, NEW)


@pytest.mark.parametrize("limit", [1, len(NEW) // 2])
def test_a_crash_while_the_file_is_put_in_place_leaves_the_old_file_or_the_new(in_tmp, limit):
    """The final step: a copy of the temp file over notes.txt, killed halfway, would leave half
    of it; os.replace never writes into notes.txt at all."""
    (in_tmp / "notes.txt").write_text(OLD, encoding="utf-8")
    crash_inside_target("notes.txt", limit, SETUP, f"s03_todo.run_write('notes.txt', {NEW!r})",
                        in_tmp)
    assert_whole(in_tmp / "notes.txt", limit, OLD, NEW)


@pytest.mark.parametrize("limit", [1, len(NEW) // 2])
def test_a_crash_inside_write_file_of_a_new_file_leaves_none_or_all_of_it(in_tmp, limit):
    crash_at_byte(limit, SETUP, f"s03_todo.run_write('fresh.txt', {NEW!r})", in_tmp)
    assert_whole(in_tmp / "fresh.txt", limit, None, NEW)


@pytest.mark.parametrize("limit", CUTS)
def test_a_crash_inside_edit_file_leaves_the_old_file_or_the_edited_one(in_tmp, limit):
    before = OLD + "the marker\n" + "the new line\n" * 150
    (in_tmp / "code.py").write_text(before, encoding="utf-8")
    edited = before.replace("the marker\n", "the edited marker\n")
    edit = "s03_todo.run_edit('code.py', 'the marker', 'the edited marker')"
    crash_at_byte(limit, SETUP, edit, in_tmp)
    assert_whole(in_tmp / "code.py", limit, before, edited)


@pytest.mark.parametrize("mode", [0o640, 0o751])
def test_write_and_edit_keep_the_files_mode_and_leave_no_temporary_file(in_tmp, mode):
    script = in_tmp / "run.sh"
    script.write_text("echo one\n", encoding="utf-8")
    script.chmod(mode)
    tools = s03_todo.TOOLS, s03_todo.TOOL_HANDLERS
    assert call_tool("write_file", {"path": "run.sh", "content": "echo two\n"}, *tools)[1] is False
    assert stat.S_IMODE(script.stat().st_mode) == mode                  # still executable, or not
    edit = {"path": "run.sh", "old_text": "two", "new_text": "three"}
    assert call_tool("edit_file", edit, *tools)[1] is False
    assert stat.S_IMODE(script.stat().st_mode) == mode
    assert script.read_text(encoding="utf-8") == "echo three\n"
    assert sorted(p.name for p in in_tmp.iterdir()) == ["run.sh"]       # no temp file left


def test_a_new_file_gets_the_usual_mode_not_a_temp_files(in_tmp):
    umask = os.umask(0o022)
    try:
        s03_todo.run_write("new.txt", "hello\n")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((in_tmp / "new.txt").stat().st_mode) == 0o644   # not mkstemp's 0o600


def test_writing_through_a_symlink_replaces_the_file_it_points_to_not_the_link(in_tmp):
    (in_tmp / "real.txt").write_text("old\n", encoding="utf-8")
    (in_tmp / "link.txt").symlink_to("real.txt")
    s03_todo.run_write("link.txt", "new\n")
    s03_todo.run_edit("link.txt", "new", "newer")
    assert (in_tmp / "link.txt").is_symlink()
    assert (in_tmp / "real.txt").read_text(encoding="utf-8") == "newer\n"


# ---------------------------------------------------------------- files.write_atomic itself

def test_write_atomic_takes_text_and_says_how_many_bytes_it_wrote(in_tmp):
    assert files.write_atomic(in_tmp / "a.txt", "héllo\n", "a.txt") == 7
    assert (in_tmp / "a.txt").read_bytes() == "héllo\n".encode()
    assert files.write_atomic(in_tmp / "b.bin", b"\x00\x01", "b.bin") == 2     # bytes too


def test_text_that_cannot_be_stored_is_refused_before_any_file_is_opened(in_tmp, monkeypatch):
    (in_tmp / "keep.txt").write_text("keep me")
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    for name in ("new.txt", "keep.txt"):
        with pytest.raises(ValueError, match="lone surrogate"):
            files.write_atomic(in_tmp / name, "bad \ud800 text", name)
    assert opened == []
    assert sorted(p.name for p in in_tmp.iterdir()) == ["keep.txt"]
    assert (in_tmp / "keep.txt").read_text() == "keep me"


def test_a_file_planted_at_a_guessable_temporary_name_does_not_block_the_write(in_tmp):
    for guess in (f".notes.txt.tmp-{os.getpid()}-{threading.get_ident()}", ".notes.txt.tmp"):
        (in_tmp / guess).symlink_to(in_tmp / "victim.txt")
    (in_tmp / "victim.txt").write_text("the user's file")
    files.write_atomic(in_tmp / "notes.txt", "new notes\n", "notes.txt")
    assert (in_tmp / "notes.txt").read_text() == "new notes\n"
    assert (in_tmp / "victim.txt").read_text() == "the user's file"


def test_a_link_planted_at_the_temporary_name_as_it_is_made_is_not_written_through(in_tmp,
                                                                               monkeypatch):
    """As if someone guessed the temporary name and put a link there just before."""
    (in_tmp / "victim.txt").write_text("the user's file")
    real_open = os.open

    def plant_then_open(path, flags, *args, **kwargs):
        if Path(path).name.startswith(".notes.txt") and not os.path.lexists(path):
            Path(path).symlink_to(in_tmp / "victim.txt")
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", plant_then_open)
    try:
        files.write_atomic(in_tmp / "notes.txt", "new notes\n", "notes.txt")
    except ValueError as exc:
        assert "could not write notes.txt" in str(exc)
    monkeypatch.undo()
    assert (in_tmp / "victim.txt").read_text() == "the user's file"
