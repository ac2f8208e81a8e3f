"""s03's write_file and edit_file replace a file atomically: a crash mid-write leaves old or new.

The crash is deterministic (see crash_at_byte in helpers.py): the kernel ends the
child the moment it writes byte N of any file, so an in-place write is caught at every N,
every run. Written in place, a model's edit killed halfway leaves half a source file.
"""

import errno
import multiprocessing
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

import pytest

import s03_todo
from harness import files
from harness.stand_in.script import reply, text, tool
from helpers import call_tool, crash_at_byte, crash_inside_target, forking, tool_results
from s07_task_system import TaskManager

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


# ---------------------------------------------------------------- files.write_and_note itself

def test_write_and_note_takes_text_and_says_how_many_bytes_it_wrote(in_tmp):
    assert files.write_and_note(in_tmp / "a.txt", "héllo\n", "a.txt")[0] == 7
    assert (in_tmp / "a.txt").read_bytes() == "héllo\n".encode()
    assert files.write_and_note(in_tmp / "b.bin", b"\x00\x01", "b.bin")[0] == 2     # bytes too


def test_text_that_cannot_be_stored_is_refused_before_any_file_is_opened(in_tmp, monkeypatch):
    (in_tmp / "keep.txt").write_text("keep me")
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    for name in ("new.txt", "keep.txt"):
        with pytest.raises(ValueError, match="lone surrogate"):
            files.write_and_note(in_tmp / name, "bad \ud800 text", name)
    assert opened == []
    assert sorted(p.name for p in in_tmp.iterdir()) == ["keep.txt"]
    assert (in_tmp / "keep.txt").read_text() == "keep me"


def test_a_file_planted_at_a_guessable_temporary_name_does_not_block_the_write(in_tmp):
    for guess in (f".notes.txt.tmp-{os.getpid()}-{threading.get_ident()}", ".notes.txt.tmp"):
        (in_tmp / guess).symlink_to(in_tmp / "victim.txt")
    (in_tmp / "victim.txt").write_text("the user's file")
    files.write_and_note(in_tmp / "notes.txt", "new notes\n", "notes.txt")
    assert (in_tmp / "notes.txt").read_text() == "new notes\n"
    assert (in_tmp / "victim.txt").read_text() == "the user's file"


def test_a_link_planted_at_the_temporary_name_as_it_is_made_is_not_written_through(in_tmp,
                                                                               monkeypatch):
    """As if someone guessed the temporary name and put a link there just before."""
    (in_tmp / "victim.txt").write_text("the user's file")
    real_open = os.open

    planted = []

    def plant_then_open(path, flags, *args, **kwargs):
        if flags & os.O_CREAT and not os.path.lexists(path):
            Path(path).symlink_to(in_tmp / "victim.txt")
            planted.append(path)
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", plant_then_open)
    try:
        files.write_and_note(in_tmp / "notes.txt", "new notes\n", "notes.txt")
    except ValueError as exc:
        assert "could not write notes.txt" in str(exc)
    monkeypatch.undo()
    assert planted, "no new file was made: the write went straight into notes.txt"
    assert (in_tmp / "victim.txt").read_text() == "the user's file"


# ---------------------------------------------------------------- owner and extended attributes

OTHER_UID, OTHER_GID = 1000, 1000     # a user's file, edited by an agent run as root
AGENT_UID = 1001                      # an agent run as another user, for the "may not" cases
ATTRIBUTE = "user.origin"             # POSIX ACLs live in such an attribute (system.posix_acl_*)


def root_or_skip():
    """Changing a file's owner needs root. Skipped elsewhere; CI runs the suite as root."""
    if os.geteuid() == 0:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("CI=true but the tests do not run as root: they must, to test file owners",
                    pytrace=False)
    pytest.skip("not root: only root can give a file to another user (CI runs these as root)")


def with_attribute(path: Path, name: str = ATTRIBUTE, value: bytes = b"reviewed") -> None:
    try:
        os.setxattr(path, name, value)
    except (AttributeError, OSError) as exc:
        pytest.skip(f"no extended attributes here ({type(exc).__name__}: {exc})")


def a_users_file(folder: Path, mode: int) -> Path:
    """folder/notes.txt, "one", owned by the user OTHER_UID, with an attribute and this mode."""
    made = folder / "notes.txt"
    made.write_text("one\n", encoding="utf-8")
    with_attribute(made)
    os.chown(made, OTHER_UID, OTHER_GID)
    made.chmod(mode)
    return made


def test_write_and_edit_as_root_keep_the_files_owner_group_mode_and_attributes(run_lesson,
                                                                                workdir):
    root_or_skip()
    target = a_users_file(workdir, 0o640)
    script = [reply(tool("write_file", {"path": "notes.txt", "content": "two\n"})),
              reply(tool("edit_file", {"path": "notes.txt", "old_text": "two",
                                       "new_text": "three"})),
              reply(text("done"))]
    proc, api = run_lesson("s03_todo", "update the notes", script=script, in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    results = [tool_results(request)[0] for request in api.requests[1:]]
    assert not any(r.get("is_error") for r in results), results
    assert target.read_text(encoding="utf-8") == "three\n"
    kept = target.stat()
    assert (kept.st_uid, kept.st_gid, stat.S_IMODE(kept.st_mode)) == (OTHER_UID, OTHER_GID,
                                                                      0o640)
    assert os.getxattr(target, ATTRIBUTE) == b"reviewed"


def test_a_task_file_rewritten_as_root_stays_its_owners(in_tmp):
    """The board is shared: an agent run as root that updates a task must not take it from
    the user whose agents share the board (they could no longer update it)."""
    root_or_skip()
    tasks = TaskManager(".tasks")
    tasks.create("Design")
    task_file = in_tmp / ".tasks" / "task_1.json"
    os.chown(task_file, OTHER_UID, OTHER_GID)
    tasks.update(1, status="in_progress")
    assert '"in_progress"' in task_file.read_text(encoding="utf-8")
    assert (task_file.stat().st_uid, task_file.stat().st_gid) == (OTHER_UID, OTHER_GID)


def as_user(uid: int, work) -> object:
    """work() in a forked child that runs as uid (its group too): what it returns, or the
    error it raised, as text."""
    context = multiprocessing.get_context("fork")
    answers = context.Queue()

    def child():
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            answers.put(work())
        except BaseException as exc:  # noqa: BLE001 - the test shows whatever failed
            answers.put(f"failed: {type(exc).__name__}: {exc}")
    process = context.Process(target=child)
    with forking():
        process.start()
    try:
        return answers.get(timeout=30)
    finally:
        process.join(30)


@pytest.fixture
def shared_folder():
    """A folder every user may write into (a tmp folder of pytest's is root's alone)."""
    made = Path(tempfile.mkdtemp(prefix="shared_"))
    made.chmod(0o777)
    yield made
    shutil.rmtree(made)


def test_a_file_of_another_user_that_cannot_stay_theirs_is_replaced_and_the_result_says_so(
        shared_folder):
    root_or_skip()
    target = a_users_file(shared_folder, 0o666)   # anyone may write it; only root may chown it
    said = as_user(AGENT_UID, lambda: files.write_and_note(target, "two\n", "notes.txt"))
    assert said == (4, f" (not kept: its owner {OTHER_UID}:{OTHER_GID}; it is now "
                       f"{AGENT_UID}:{AGENT_UID}, and only root can give a file to another "
                       "user)"), said
    assert target.read_text(encoding="utf-8") == "two\n"
    assert os.getxattr(target, ATTRIBUTE) == b"reviewed"     # a user.* attribute is kept


def test_an_attribute_that_cannot_be_set_is_named_in_the_result(in_tmp, monkeypatch):
    target = in_tmp / "notes.txt"
    target.write_text("one\n", encoding="utf-8")
    with_attribute(target)
    with_attribute(target, "user.locked", b"x")
    real = os.setxattr

    def refuse_locked(path, name, *args, **kwargs):
        if name == "user.locked":
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real(path, name, *args, **kwargs)
    monkeypatch.setattr(os, "setxattr", refuse_locked)
    size, note = files.write_and_note(target, "two\n", "notes.txt")
    assert (size, note) == (4, " (not kept: its extended attribute user.locked)")
    monkeypatch.undo()
    assert target.read_text(encoding="utf-8") == "two\n"
    assert os.getxattr(target, ATTRIBUTE) == b"reviewed"
    assert sorted(p.name for p in in_tmp.iterdir()) == ["notes.txt"]


def test_a_new_file_or_one_kept_whole_gets_no_note(in_tmp):
    assert files.write_and_note(in_tmp / "new.txt", "hello\n", "new.txt") == (6, "")
    assert files.write_and_note(in_tmp / "new.txt", "hello again\n", "new.txt") == (12, "")


def test_a_file_this_user_may_not_write_is_refused_by_write_and_edit_and_left_whole(
        shared_folder):
    """A rename needs only the folder's permission: write_file replaced a file the user made
    read-only (chmod 444), or a root file of mode 000, where the shell's > is refused."""
    root_or_skip()
    mine = shared_folder / "keep.txt"
    mine.write_text("precious\n", encoding="utf-8")
    os.chown(mine, AGENT_UID, AGENT_UID)
    mine.chmod(0o444)
    roots = shared_folder / "root.txt"
    roots.write_text("root's\n", encoding="utf-8")
    roots.chmod(0o000)
    calls = [("write_file", {"path": "keep.txt", "content": "replaced\n"}),
             ("edit_file", {"path": "keep.txt", "old_text": "precious", "new_text": "gone"}),
             ("write_file", {"path": "root.txt", "content": "replaced\n"})]

    def work():
        os.chdir(shared_folder)
        return [call_tool(name, args, s03_todo.TOOLS, s03_todo.TOOL_HANDLERS)
                for name, args in calls]
    said = as_user(AGENT_UID, work)
    refused = ("ValueError: permission denied: {} is read-only for this user (mode {}); "
               "nothing was written")
    assert said == [(refused.format("keep.txt", "0444"), True)] * 2 + [
        (refused.format("root.txt", "0000"), True)], said
    assert mine.read_text(encoding="utf-8") == "precious\n"
    assert roots.read_text(encoding="utf-8") == "root's\n"
    assert sorted(p.name for p in shared_folder.iterdir()) == ["keep.txt", "root.txt"]


# A file that can be written but not replaced: the tools write beside it, then rename.
CANNOT_REPLACE = {
    # A folder of mode 555 holding a file of mode 666: the new file cannot be made beside it.
    "a read-only folder": ("open", errno.EACCES, "its folder lets no new file be made in it"),
    # docker run -v ./config.txt:/work/config.txt: a mount point, never renamed over.
    "a file mounted on its own": ("replace", errno.EBUSY, "it is a mount point"),
}


@pytest.mark.parametrize("call, code, said", CANNOT_REPLACE.values(), ids=CANNOT_REPLACE.keys())
def test_a_file_that_can_be_written_but_not_replaced_says_why_and_how_to_write_it(
        in_tmp, monkeypatch, call, code, said):
    """The error said "permission denied" or "Device or resource busy" of a file the user can
    write (`echo >>` works): the model could only conclude the file was read-only."""
    Path("config.txt").write_text("port = 1\n")
    real = {"open": os.open, "replace": os.replace}[call]

    def refuse(*args, **kwargs):
        if call == "open" and not args[1] & os.O_EXCL:
            return real(*args, **kwargs)             # reading the old file is allowed
        raise OSError(code, os.strerror(code))
    monkeypatch.setattr(os, call, refuse)
    for name, args in [("write_file", {"path": "config.txt", "content": "port = 2\n"}),
                       ("edit_file", {"path": "config.txt", "old_text": "1", "new_text": "2"})]:
        out, is_error = call_tool(name, args, s03_todo.TOOLS, s03_todo.TOOL_HANDLERS)
        assert is_error and said in out and "the file is unchanged" in out, out
        assert "with bash" in out and "in place" in out, out
    assert (in_tmp / "config.txt").read_text() == "port = 1\n"
