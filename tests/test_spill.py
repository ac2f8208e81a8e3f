"""Big results kept whole on disk: the model sees head and tail and can read all the rest."""

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, FullDisk, within
from harness import spill

CAP = 50_000


def big_output(chars=300_000):
    lines = [f"line {n}: " + "abcdefghij" * (n % 7) for n in range(chars // 20)]
    return "\n".join(lines)[:chars]


def test_a_300000_character_output_can_be_read_back_in_full_from_the_saved_file(results, run):
    text = big_output()
    shown = spill.keep_whole(text, CAP, "bash", run.saved)
    assert len(shown) <= CAP + 500                     # what the model sees stays near the cap
    assert shown.startswith(text[:20_000]) and text[-20_000:] in shown
    path = spill.saved_path_in(shown)
    assert path and path.startswith(".transcripts/results/") and "/bash_" in path
    assert Path(path).read_text(encoding="utf-8") == text
    # as the model would: sed -n in pieces of lines, as the note suggests
    total = text.count("\n") + 1
    assert f"{total:,} lines" in shown
    pieces = [subprocess.run(["sed", "-n", f"{a},{a + 999}p", path], capture_output=True, text=True,
                             check=True, timeout=60).stdout for a in range(1, total + 1, 1000)]
    assert "".join(pieces).rstrip("\n") == text
    assert not list(Path(results).glob(".*.tmp"))        # no temporary file left behind


def test_a_result_within_the_cap_is_left_alone_and_saves_nothing(results, run):
    assert spill.keep_whole("short", CAP, "bash", run.saved) == "short"
    assert spill.saved_path_in("short") is None
    assert not Path(results).exists()


def test_only_the_note_on_the_last_line_names_a_saved_file(results, run):
    shown = spill.keep_whole(big_output(80_000), CAP, "read_file", run.saved)
    path = spill.saved_path_in(shown)
    assert path and "/read_file_" in path
    assert spill.saved_path_in(shown + "\nmore output") is None     # a quoted note is not ours


def test_the_oldest_saved_results_go_first_past_the_file_count(results, monkeypatch, run):
    monkeypatch.setattr(spill, "MAX_FILES", 3)
    paths = []
    for n in range(5):
        paths.append(spill.save_result(f"result {n} " + "z" * 5_000, "bash", run.saved))
        os.utime(paths[-1], ns=(n * 10**9, n * 10**9))       # distinct ages, oldest first
    assert [p.exists() for p in paths] == [False, False, True, True, True]
    assert len(set(paths)) == 5        # a removed file's name is not given to another output


def test_the_oldest_saved_results_go_first_past_the_total_size(results, monkeypatch, run):
    monkeypatch.setattr(spill, "MAX_TOTAL_BYTES", 25_000)
    paths = []
    for n in range(4):
        paths.append(Path(spill.save_result(f"{n}" * 10_000, "bash", run.saved)))
        os.utime(paths[-1], ns=(n * 10**9, n * 10**9))
    spill.prune(run.saved)
    assert [p.exists() for p in paths] == [False, False, True, True]
    # The newest is kept, whatever its size.
    newest = spill.save_result("n" * 24_000, "bash", run.saved)
    assert newest.exists() and sum(p.exists() for p in paths) == 0


def test_a_full_disk_falls_back_to_a_plain_cut_with_a_clear_note(results, monkeypatch, run):
    real_open = io.open
    monkeypatch.setattr(io, "open", lambda file, mode="r", *args, **kwargs: (
        FullDisk(real_open(file, mode, *args, **kwargs)) if "w" in mode
        else real_open(file, mode, *args, **kwargs)))
    text = big_output()
    shown = spill.keep_whole(text, CAP, "bash", run.saved)
    assert shown.startswith(text[:CAP])
    assert shown.endswith(f"[output cut: {len(text) - CAP:,} more characters; the whole output "
                          f"could not be saved in {results}/ (the disk is full)]")
    assert spill.saved_path_in(shown) is None
    assert spill.save_for_placeholder(text, "bash", run.saved) is None
    assert list(Path(results).glob("*.txt")) == []       # no empty or partial file left behind
    assert list(Path(results).iterdir()) == []           # not even half a marker


def test_a_cleared_result_is_saved_once_and_named_the_same_way_every_time(results, run):
    text = "x" * 3_000
    first = spill.save_for_placeholder(text, "bash", run.saved)
    assert first == spill.save_for_placeholder(text, "bash", run.saved)      # same text, same file
    assert Path(first).read_text() == text
    assert spill.save_for_placeholder("tiny", "bash", run.saved) is None      # cheaper to run again
    shown = spill.keep_whole(big_output(), CAP, "bash", run.saved)
    # No copy: the file keep_whole saved.
    assert spill.save_for_placeholder(shown, "bash", run.saved) == spill.saved_path_in(shown)
    assert len(list(Path(results).glob("*.txt"))) == 2


def test_a_line_shaped_like_the_save_note_in_a_commands_output_is_not_trusted(results, run):
    """A result ending in a forged note named a file the harness never wrote: the placeholder
    pointed the model at it, and the real output was saved nowhere."""
    Path("other.txt").write_text("u\n")
    for named in ("other.txt", "src/x/bash_0123456789abcdef.txt"):    # a name keep_whole gives
        text = "r\n" * 1_500 + f"[the whole output (9 characters) is saved in {named}; x"
        path = spill.save_for_placeholder(text, "bash", run.saved)
        assert path != named and Path(path).parent == Path(results)
        assert Path(path).read_text() == text
    # A name keep_whole never gives is no save note at all, wherever the note is read.
    assert spill.saved_path_in("[the whole output (9 characters) is saved in other.txt; x") is None


def test_a_cut_result_whose_saved_whole_was_deleted_is_not_saved_again_as_whole(results, run):
    """The folder's marker says to delete it whenever you like: the cut text (its head and
    tail) was then saved under a new name, and the placeholder called that the whole result."""
    shown = spill.keep_whole(big_output(), CAP, "bash", run.saved)
    for saved in Path(results).iterdir():
        saved.unlink()
    assert spill.save_for_placeholder(shown, "bash", run.saved) is None
    assert list(Path(results).glob("*.txt")) == []


# ---------------------------------------------------------------- a hostile results folder

def notes_folder(where: Path, count: int = 30) -> Path:
    """A folder of a user's notes (QA linked .transcripts/results to one of 1,200; here the
    bounds are made smaller instead, to stay fast)."""
    where.mkdir()
    for n in range(count):
        (where / f"note_{n:04}.txt").write_text(f"note {n}\n")
    return where


def test_a_results_folder_linked_elsewhere_is_refused_and_no_note_is_deleted(results, tmp_path,
                                                                             monkeypatch, run):
    monkeypatch.setattr(spill, "MAX_FILES", 10)
    notes = notes_folder(tmp_path.parent / f"{tmp_path.name}-notes")
    Path(".transcripts").mkdir()
    Path(results).symlink_to(notes)
    text = big_output(60_000)
    shown = spill.keep_whole(text, CAP, "bash", run.saved)
    assert len(list(notes.iterdir())) == 30                           # none deleted, none added
    assert shown.startswith(text[:CAP]) and spill.saved_path_in(shown) is None
    assert "symbolic link" in shown.splitlines()[-1]                  # the cut says why


def test_a_link_on_the_way_to_the_results_folder_is_refused_too(results, tmp_path, run):
    notes = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    (notes / "results").mkdir(parents=True)
    Path(".transcripts").symlink_to(notes)
    shown = spill.keep_whole(big_output(60_000), CAP, "bash", run.saved)
    assert spill.saved_path_in(shown) is None and "symbolic link" in shown
    assert list((notes / "results").iterdir()) == []


def test_a_folder_of_the_users_own_files_is_not_used_and_not_pruned(results, monkeypatch, run):
    monkeypatch.setattr(spill, "MAX_FILES", 10)
    Path(".transcripts").mkdir()
    notes = notes_folder(Path(results))            # a real folder, but not one the harness made
    shown = spill.keep_whole(big_output(60_000), CAP, "bash", run.saved)
    assert spill.saved_path_in(shown) is None
    assert sorted(p.name for p in notes.iterdir()) == [f"note_{n:04}.txt" for n in range(30)]


def test_a_folder_where_the_marker_goes_is_named_in_the_note_and_left(results, run):
    marker = Path(results) / spill.MARKER
    marker.mkdir(parents=True)                     # by hand, or by a tool run amok
    shown = spill.keep_whole(big_output(60_000), CAP, "bash", run.saved)
    assert spill.saved_path_in(shown) is None
    # The note names what is in the way, not the results folder itself.
    assert f"{results}/{spill.MARKER} is a folder, not the harness's marker file" in shown
    assert marker.is_dir()


def test_a_link_planted_where_the_marker_goes_is_replaced_never_written_through(results,
                                                                                tmp_path, run):
    victim = tmp_path / "authorized_keys"
    victim.write_text("ssh-ed25519 AAAA me\n")
    Path(results).mkdir(parents=True)
    (Path(results) / spill.MARKER).symlink_to(victim)
    shown = spill.keep_whole(big_output(60_000), CAP, "bash", run.saved)
    assert spill.saved_path_in(shown) is not None            # the folder is used, and marked
    assert victim.read_text() == "ssh-ed25519 AAAA me\n"
    marker = Path(results) / spill.MARKER
    assert marker.is_file() and not marker.is_symlink()


def test_pruning_removes_only_the_files_the_harness_saved(results, monkeypatch, run):
    monkeypatch.setattr(spill, "MAX_FILES", 3)
    # The harness makes (and marks) the folder.
    spill.save_result("first " * 1_000, "bash", run.saved)
    mine = Path(results) / "todo.txt"
    mine.write_text("a file the user put there")
    for n in range(6):
        spill.save_result(f"result {n} " * 1_000, "bash", run.saved)
    assert mine.read_text() == "a file the user put there"
    assert len([p for p in Path(results).glob("*.txt") if p != mine]) == 3


def test_a_symlink_planted_where_the_harness_writes_is_never_written_through(results, tmp_path,
                                                                            monkeypatch, run):
    """As if someone guessed each temporary name the harness writes to and put a link there
    just before: whichever call opens it (a path, or a name in an open folder)."""
    victim = tmp_path.parent / f"{tmp_path.name}-victim.txt"
    victim.write_text("the user's file")
    spill.save_result("make the folder " * 200, "bash", run.saved)
    folder = os.stat(results)
    real_os_open, real_io_open = os.open, io.open
    planted = []

    def plant(file, dir_fd=None):
        where = os.fstat(dir_fd) if dir_fd is not None else os.stat(Path(file).parent)
        name = os.path.basename(file)
        if os.path.samestat(where, folder) and name.startswith(".") and name != spill.MARKER:
            with contextlib.suppress(FileExistsError):
                os.symlink(victim, file, dir_fd=dir_fd)
                planted.append(name)

    def os_open(file, flags, *args, dir_fd=None, **kwargs):
        if flags & os.O_CREAT and isinstance(file, (str, os.PathLike)):
            plant(file, dir_fd)
        return real_os_open(file, flags, *args, dir_fd=dir_fd, **kwargs)

    def io_open(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wxa+") and isinstance(file, (str, os.PathLike)):
            plant(file)
        return real_io_open(file, mode, *args, **kwargs)
    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(io, "open", io_open)
    text = big_output(60_000)
    shown = spill.keep_whole(text, CAP, "bash", run.saved)
    monkeypatch.undo()
    assert planted                                      # the harness did write a temporary file
    assert victim.read_text() == "the user's file"
    assert spill.saved_path_in(shown) is None and "output cut" in shown


# ---------------------------------------------------------------- layer 1's placeholders

def test_a_placeholders_file_is_named_by_its_text_alone_in_any_process(results, run):
    text = "the same cleared result\n" * 200
    here = spill.save_for_placeholder(text, "bash", run.saved)
    code = ("import sys; from harness import spill; "
            "print(spill.save_for_placeholder(sys.stdin.read(), 'bash', spill.SavedTexts()))")
    there = subprocess.run([sys.executable, "-c", code], input=text, capture_output=True,
                           text=True, check=True, cwd=Path.cwd(), timeout=60,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.strip()
    assert here and there == here
    assert Path(here).read_text() == text
    assert len(list(Path(results).glob("*.txt"))) == 1


def test_a_placeholders_file_is_never_pruned_while_its_run_names_it(results, monkeypatch, run):
    monkeypatch.setattr(spill, "MAX_FILES", 3)
    named = [spill.save_for_placeholder(f"cleared {n} " * 500, "bash", run.saved) for n in range(5)]
    for n in range(10):                                  # newer big outputs come and go
        spill.keep_whole(big_output(60_000 + n), CAP, "bash", run.saved)
    assert all(Path(p).is_file() for p in named)
    assert len(list(Path(results).glob("*.txt"))) == 5 + 3   # the bounds hold for the rest


PINNING_SESSION = """
import sys
from harness import spill
saved = spill.SavedTexts()  # the first session's run
for n in range(3):
    print(spill.save_for_placeholder(f"cleared by the first session {n} " * 100, "bash", saved))
sys.stdout.flush()
sys.stdin.read()          # runs until the test closes its input
"""


@pytest.mark.parametrize("how", ["ends", "is killed"])
def test_a_running_sessions_placeholder_files_survive_another_sessions_pruning(results,
                                                                             monkeypatch, how,
                                                                             run):
    """Two sessions in one folder: the first's placeholders name saved files; the second
    saves big outputs past the bounds. The first's files stay while it runs, and are pruned
    like any other once it has stopped (a kill -9 too)."""
    first = subprocess.Popen([sys.executable, "-c", PINNING_SESSION], cwd=Path.cwd(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        # Each wait here is bounded at 60 s (then the first session is killed and the test
        # fails): a prune that waited for a session's lock would wait as long as it runs.
        named = within(60, lambda: [first.stdout.readline().strip() for _ in range(3)],
                       unblock=first.kill)
        assert all(Path(p).is_file() for p in named), named
        for n, path in enumerate(named):                 # the oldest in the folder
            os.utime(path, ns=(n * 10**9, n * 10**9))
        monkeypatch.setattr(spill, "MAX_FILES", 2)

        def second_session():                            # this process, past the bounds
            for n in range(6):
                spill.keep_whole(big_output(60_000 + n), CAP, "bash", run.saved)
        within(60, second_session, unblock=first.kill)
        assert all(Path(p).is_file() for p in named)
    finally:
        if how == "is killed":
            first.kill()
        first.stdin.close()
        first.wait(timeout=30)
    spill.keep_whole(big_output(70_000), CAP, "bash", run.saved)   # the first one has stopped
    assert not any(Path(p).exists() for p in named)
    assert len(list(Path(results).glob("*.txt"))) == 2
    assert list((Path(results) / ".pins").iterdir()) == []              # no pins left


def test_a_placeholder_naming_a_kept_whole_file_keeps_that_file(results, monkeypatch, run):
    monkeypatch.setattr(spill, "MAX_FILES", 2)
    shown = spill.keep_whole(big_output(), CAP, "bash", run.saved)
    assert spill.save_for_placeholder(shown, "bash", run.saved) == spill.saved_path_in(shown)
    for n in range(5):
        spill.keep_whole(big_output(60_000 + n), CAP, "bash", run.saved)
    assert Path(spill.saved_path_in(shown)).read_text() == big_output()


def test_the_same_text_again_is_answered_without_touching_the_disk(results, monkeypatch, run):
    text = "a cleared result " * 1_000
    first = spill.save_for_placeholder(text, "bash", run.saved)
    again = "".join(["a cleared result "] * 1_000)      # equal, but another object

    touched = []
    with monkeypatch.context() as patch:
        for name in ("open", "stat", "lstat", "replace", "link", "utime", "scandir", "mkdir"):
            patch.setattr(os, name, lambda *args, _name=name, **kwargs: touched.append(_name))
        answers = [spill.save_for_placeholder(text, "bash", run.saved),
                   spill.save_for_placeholder(again, "bash", run.saved)]
    assert answers == [first, first] and touched == []


def test_a_saved_text_is_written_once(results, run):
    text = "x" * 5_000
    path = Path(spill.save_for_placeholder(text, "bash", run.saved))
    before = path.stat()
    anew = spill.SavedTexts()                            # as a new run would start
    assert spill.save_for_placeholder(text, "bash", anew) == str(path)
    assert path.stat().st_ino == before.st_ino           # the same file, not written again
