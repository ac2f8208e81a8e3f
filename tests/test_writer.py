"""Every file the harness writes: never through a link planted where it writes, whole or not
at all, never over another file it did not mean to replace, and private (0600) where it holds
the conversation. One test per writer, each through the call a lesson or the cli makes."""

import builtins
import contextlib
import io
import os
import stat
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import s07_task_system
from harness import cli, compaction, files, pins, spill, writer
from harness.session import log as session_log
from harness.session import page
from harness.session.recorder import Recorder
from helpers import VICTIM

try:
    import readline
except ImportError:
    readline = None

STAMP = "20260101-120000"          # every numbered name, so a test knows the first one
MESSAGES = [{"role": "user", "content": "fix the tests"}]


def a_page_record():
    rec = Recorder("s03_todo")
    usage = SimpleNamespace(input_tokens=100, output_tokens=5, cache_read_input_tokens=0,
                            cache_creation_input_tokens=0)
    rec.call(usage, sent=MESSAGES)
    return rec.data


def save_history():
    if readline is None:
        pytest.skip("no readline here: the REPL keeps no history")
    readline.add_history("fix the tests")
    cli._save_history()


def start_a_log():
    log = session_log.SessionLog.start(Path(".transcripts"))
    log.append(MESSAGES[0])
    log.close()


WRITERS = {
    "a task file and the board's lock": lambda: s07_task_system.TaskManager(".tasks").create(
        "Design the data model"),
    "s06's transcript": lambda: compaction.save(Path(".transcripts"), MESSAGES),
    "a saved result": lambda: spill.save_result("a long output\n" * 500, "bash",
                                                spill.SavedTexts()),
    "the session log": start_a_log,
    "the session page": lambda: page.write_page(a_page_record(), Path(".transcripts")),
    "write_file and edit_file": lambda: files.write_and_note(Path.cwd() / "notes.txt",
                                                           "new notes\n", "notes.txt"),
    "the REPL history": save_history,
}


def plant_links(monkeypatch, victim: Path) -> list:
    """From now on, a link to victim appears at every name in the workspace the harness is
    about to create, the moment before it opens it: as if someone guessed each name, the
    random ones too. Returns the names planted so far."""
    planted = []
    workspace = Path.cwd()
    folders = [os.stat(p) for p in [workspace, *workspace.rglob("*")] if p.is_dir()]
    real_os_open, real_io_open = os.open, io.open

    def plant(file, dir_fd=None):
        folder = os.fstat(dir_fd) if dir_fd is not None else os.stat(Path(file).parent)
        name = os.path.basename(os.fsdecode(file))
        try:
            os.stat(file, dir_fd=dir_fd, follow_symlinks=False)
            return                                      # a name that exists is no guess
        except FileNotFoundError:
            pass
        if any(os.path.samestat(folder, f) for f in folders):
            with contextlib.suppress(FileExistsError):
                os.symlink(victim, file, dir_fd=dir_fd)
                planted.append(name)

    def os_open(file, flags, *args, dir_fd=None, **kwargs):
        if flags & os.O_CREAT and isinstance(file, (str, bytes, os.PathLike)):
            plant(file, dir_fd)
        return real_os_open(file, flags, *args, dir_fd=dir_fd, **kwargs)

    def io_open(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wxa") and isinstance(file, (str, bytes, os.PathLike)):
            plant(file)
        return real_io_open(file, mode, *args, **kwargs)
    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(io, "open", io_open)
    monkeypatch.setattr(builtins, "open", io_open)
    return planted


# ---------------------------------------------------------------- one test per writer

@pytest.mark.parametrize("write", WRITERS.values(), ids=WRITERS.keys())
def test_a_link_planted_at_each_name_a_writer_makes_is_never_written_through(victim, monkeypatch,
                                                                             history, write):
    for folder in (".transcripts", ".tasks"):           # the folders exist before the links
        os.mkdir(folder)
    spill.prune(spill.SavedTexts())                     # makes (and marks) the results folder
    planted = plant_links(monkeypatch, victim)
    with contextlib.suppress(OSError, ValueError):      # a refusal is fine; a traceback is not
        write()
    monkeypatch.undo()
    assert planted, "the writer made no new file (it wrote straight into the final name)"
    assert victim.read_text() == VICTIM


@pytest.mark.parametrize("write", WRITERS.values(), ids=WRITERS.keys())
def test_each_writer_leaves_its_file_whole_and_no_temporary_file(victim, history, write):
    write()
    left = [p for p in Path.cwd().rglob("*") if p.name.endswith(".tmp") or ".tmp" in p.name]
    assert left == []
    written = [p for p in Path.cwd().rglob("*") if p.is_file() and p.stat().st_size > 0]
    assert written, "nothing was written"


def signal_as_a_new_file_opens(monkeypatch) -> list:
    """The next open that makes a new file is followed at once by a Ctrl-C, as if the signal's
    handler ran as the open returned: the file is made, its fd never seen. Later opens are
    as they were. Returns the name so made."""
    made = []
    real_os_open = os.open

    def os_open(file, flags, *args, dir_fd=None, **kwargs):
        fd = real_os_open(file, flags, *args, dir_fd=dir_fd, **kwargs)
        if flags & os.O_EXCL and not made:
            made.append(os.path.basename(os.fsdecode(file)))
            os.close(fd)
            raise KeyboardInterrupt
        return fd
    monkeypatch.setattr(os, "open", os_open)
    return made


EXCLUSIVE_WRITERS = {k: WRITERS[k] for k in ("a task file and the board's lock",
                                             "s06's transcript", "a saved result",
                                             "the session log", "the session page",
                                             "write_file and edit_file")}


@pytest.mark.parametrize("write", EXCLUSIVE_WRITERS.values(), ids=EXCLUSIVE_WRITERS.keys())
def test_a_ctrl_c_as_a_new_file_opens_leaves_no_empty_file_behind(victim, monkeypatch, write):
    """Nothing would ever remove such a file: an empty .tmp_ in the user's folder, or an
    empty session log that --continue then finds."""
    for folder in (".transcripts", ".tasks"):
        os.mkdir(folder)
    spill.prune(spill.SavedTexts())                     # makes (and marks) the results folder
    before = {p for p in Path.cwd().rglob("*")}
    made = signal_as_a_new_file_opens(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        write()
    assert made, "the writer made no new file with O_EXCL"
    left = {p.name for p in Path.cwd().rglob("*")} - {p.name for p in before}
    assert left <= {".lock"}                            # the board's lock, taken before


def test_a_ctrl_c_as_a_pin_file_opens_leaves_no_empty_file_behind(victim, monkeypatch):
    path = spill.save_result("a long output\n" * 500, "bash", spill.SavedTexts())
    before = {p for p in Path.cwd().rglob("*")}
    folder = os.open(path.parent, os.O_RDONLY)
    made = signal_as_a_new_file_opens(monkeypatch)
    try:
        with pytest.raises(KeyboardInterrupt):
            pins.Pins().add(folder, path.name)          # another run's first pin there
    finally:
        os.close(folder)
    assert made
    assert [p.name for p in Path.cwd().rglob("*") if p not in before] in ([], [pins.FOLDER])


# ---------------------------------------------------------------- at the final name

def test_a_link_at_the_first_numbered_name_is_skipped_not_followed(victim, monkeypatch):
    monkeypatch.setattr(time, "strftime", lambda *args: STAMP)
    folder = Path(".transcripts")
    folder.mkdir()
    for name in (f"transcript_{STAMP}_1.jsonl", f"session_{STAMP}_1.jsonl",
                 f"session_s03_{STAMP}_1.html"):
        (folder / name).symlink_to(victim)
    made = [compaction.save(folder, MESSAGES), page.write_page(a_page_record(), folder)]
    start_a_log()
    made.append(folder / f"session_{STAMP}_2.jsonl")
    assert [p.name for p in made] == [f"transcript_{STAMP}_2.jsonl",
                                      f"session_s03_{STAMP}_2.html", f"session_{STAMP}_2.jsonl"]
    assert all(p.is_file() and not p.is_symlink() and p.stat().st_size for p in made)
    assert victim.read_text() == VICTIM


def test_a_link_at_a_saved_results_name_is_replaced_not_written_through(victim):
    text = "a long output\n" * 500
    path = spill.save_result(text, "bash", spill.SavedTexts())   # the name: the text's hash
    path.unlink()
    path.symlink_to(victim)
    assert spill.save_result(text, "bash", spill.SavedTexts()) == path
    assert not path.is_symlink() and path.read_text() == text
    assert victim.read_text() == VICTIM


# ---------------------------------------------------------------- when hard links fail

def no_hard_links(monkeypatch):
    """A file system without hard links (some FUSE, SMB and FAT mounts): link() is refused."""
    def refuse(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "link", refuse)


NUMBERED = {
    "s06's transcript": (lambda folder: compaction.save(folder, MESSAGES),
                         f"transcript_{STAMP}_{{}}.jsonl", '"content": "fix the tests"'),
    "the session page": (lambda folder: page.write_page(a_page_record(), folder),
                         f"session_s03_{STAMP}_{{}}.html", "<html"),
}


@pytest.mark.parametrize("write, name, holds", NUMBERED.values(), ids=NUMBERED.keys())
def test_without_hard_links_a_numbered_file_is_still_written_and_never_replaces_another(
        victim, monkeypatch, write, name, holds):
    monkeypatch.setattr(time, "strftime", lambda *args: STAMP)
    folder = Path(".transcripts")
    folder.mkdir()
    (folder / name.format(1)).write_text("an earlier one")
    no_hard_links(monkeypatch)
    path = write(folder)
    assert path.name == name.format(2) and holds in path.read_text()
    assert (folder / name.format(1)).read_text() == "an earlier one"
    assert sorted(p.name for p in folder.iterdir()) == [name.format(1), name.format(2)]


def test_without_hard_links_a_task_is_created_once_and_its_id_never_reused(victim, monkeypatch):
    no_hard_links(monkeypatch)
    tasks = s07_task_system.TaskManager(".tasks")
    tasks.create("Design the data model")
    tasks.create("Implement the API")
    assert sorted(p.name for p in Path(".tasks").iterdir()) == [".lock", "task_1.json",
                                                                "task_2.json"]
    assert "Implement the API" in Path(".tasks/task_2.json").read_text()


# ---------------------------------------------------------------- modes

PRIVATE_WRITERS = {k: WRITERS[k] for k in ("s06's transcript", "a saved result", "the session log",
                                           "the session page", "the REPL history")}


@pytest.mark.parametrize("write", PRIVATE_WRITERS.values(), ids=PRIVATE_WRITERS.keys())
@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_what_holds_the_conversation_is_readable_by_its_owner_alone(victim, history, write,
                                                                    umask):
    """Session logs, transcripts, pages, saved results and the REPL history hold the whole
    conversation and every tool output: 0600, whatever the umask."""
    old = os.umask(umask)
    try:
        write()
    finally:
        os.umask(old)
    made = [p for p in Path(".transcripts").rglob("*") if p.is_file() and p.name != spill.MARKER]
    assert made
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in made} == {
        p.name: oct(0o600) for p in made}


def test_a_task_file_gets_the_mode_a_new_file_gets_from_the_umask(victim):
    """The board is shared: its files are as readable as the user's umask makes new files."""
    old = os.umask(0o027)
    try:
        s07_task_system.TaskManager(".tasks").create("Design the data model")
    finally:
        os.umask(old)
    assert stat.S_IMODE(Path(".tasks/task_1.json").stat().st_mode) == 0o640


# ---------------------------------------------------------------- the folder written into

def test_a_link_at_the_folder_the_harness_writes_into_is_refused(victim, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    Path(".transcripts").symlink_to(elsewhere)
    with pytest.raises(OSError, match="symbolic link"):
        compaction.save(Path(".transcripts"), MESSAGES)
    with pytest.raises(OSError, match="symbolic link"):
        session_log.SessionLog.start(Path(".transcripts"))
    with pytest.raises(OSError, match="symbolic link"):
        page.write_page(a_page_record(), Path(".transcripts"))
    assert list(elsewhere.iterdir()) == []


def test_the_writer_says_what_is_in_the_way_of_a_folder(victim):
    Path("taken").write_text("a file")
    with pytest.raises(OSError, match="taken is a file, not a folder"):
        writer.replace(Path("taken") / "x.txt", b"x", writer.PRIVATE)
    Path("dangling").symlink_to("nowhere")
    with pytest.raises(OSError, match="dangling is a symbolic link"):
        writer.replace(Path("dangling") / "x.txt", b"x", writer.PRIVATE)
    assert sorted(p.name for p in Path.cwd().iterdir()) == ["dangling", "taken"]
