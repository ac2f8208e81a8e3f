"""Big tool results saved whole: the model sees the head and the tail, and where the rest is.

Relied on by s03's run_tool_calls (every result over the cap goes through keep_whole, so s06
and s07 get it too) and by s06's layer 1, whose placeholders name the saved copy
(save_for_placeholder). Both are given the run's SavedTexts (run.saved, harness/run.py).

    a 300,000-character bash output, cap 50,000
      -> .transcripts/results/bash_3f9a1c2b7d4e5f60.txt   (the whole text; the name is its hash)
      -> the model sees: the first 20,000 characters
                         ... [260,000 characters not shown] ...
                         the last 20,000 characters
                         [the whole output (300,000 characters, 9,001 lines) is saved in <path>...]

Without each piece:
- saving at all: the middle of a long log (where the error often is) is lost for good,
  and once layer 1 clears a result the model cannot get it back, so it runs the command
  again, or guesses.
- head AND tail: a build log's verdict, a test run's summary, are at the end.
- a name made of the tool and the text's hash: the same text gets the same name in any
  process, so a placeholder rebuilt by --continue is byte for byte the one the cache holds,
  and a text is written once, however often it is saved.
- the bounds (MAX_TOTAL_BYTES, MAX_FILES; oldest removed first): a long session that
  greps a big tree every few minutes would fill the disk.
- the pins (SavedTexts, one a run, and on disk through pins.py): layer 1 clears hundreds of
  results; with no pins the bounds removed files its placeholders still named (99 of 1,500
  did), and each call saved them again. Pins kept in memory alone did not stop another
  session's prune.
- the folder reached without following a symlink, and marked (MARKER): with
  .transcripts/results linked to a folder of 1,200 notes, one 60 kB output deleted 201 of
  them. Only a real folder inside the workspace is used, and only files named as the harness
  names them (NAME), in a folder it made or found empty and marked, are ever removed.
- writing through harness/writer.py (temporary files made with O_EXCL | O_NOFOLLOW under a
  random name; 0600): a link planted at a guessable name was written through, to wherever it
  pointed, and every tool output was readable by every user of the machine.
- the fallback: a full disk, a read-only folder or a refused one must cost the model the
  middle of one output, with a note saying so, never the whole turn.
"""

import contextlib
import hashlib
import os
import re
import stat
from pathlib import Path

from harness import config, pins, writer
from harness.errors import reason

RESULTS = config.TRANSCRIPTS / "results"   # in the workspace, so read_file and bash can open it
MAX_TOTAL_BYTES = 100_000_000   # 100 MB of saved results at most: past it the oldest go first
MAX_FILES = 1_000               # and at most this many files (a long session makes many small ones)
SHOWN_SHARE = 0.4               # of the cap, shown from the head and again from the tail
SAVE_WHEN_CLEARED = 2_000       # characters: a cleared result shorter than this is cheaper to redo
HASH_CHARS = 16                 # hex digits of the SHA-256 in a name: 64 bits, so no two texts meet
MARKER = ".saved-results"       # in a results folder the harness made: only there are files removed
NAME = re.compile(r"[A-Za-z0-9_-]{1,40}_[0-9a-f]{%d}\.txt" % HASH_CHARS)   # a file it saved
NOTE = re.compile(r"^\[the whole (?:output|result) \([\d,]+ characters[^)]*\) is saved in "
                  r"(?P<path>.+?\.txt); ")
MARKER_TEXT = (f"Tool results saved whole by harness/spill.py. Files named <tool>_<hash>.txt here "
               f"are removed, oldest first, past {MAX_TOTAL_BYTES:,} bytes or {MAX_FILES:,} "
               "files; other files are left alone. Delete the folder whenever you like.\n")


class SavedTexts:
    """What a run saved for layer 1's placeholders: each text's path, and the pins.

    A pinned file is one a placeholder of this run names: it is never removed while the run
    lasts, and it does not count toward the bounds (MAX_TOTAL_BYTES, MAX_FILES), which hold
    for the other files. So a session that clears 1,500 results keeps those 1,500 files on
    top of the bounds, each a result of at most the tool cap (or the saved output a result
    named), until it ends; the next prune removes them like any other. The pins are on disk
    too (pins.py), so another session's prune leaves them as well.
    """

    def __init__(self) -> None:
        # (folder, tool, length, hash(text)) -> path. Python computes a str's hash once and
        # keeps it, so asking again for the same text object is a lookup, not a 300 kB hash;
        # the length and the 64-bit hash tell texts apart (two of one length: 1 in 2**64).
        self.paths: dict[tuple, str] = {}
        self.pinned: set[str] = set()
        self.pins = pins.Pins()     # the same, on disk: seen by a prune in any process

    def release(self) -> None:
        """Let the pins on disk go, as the end of the run (or of the process) does: the next
        prune, in any process, may remove these files."""
        self.pins.release()


def keep_whole(text: str, cap: int, tool_name: str, saved: SavedTexts,
               folder: Path = RESULTS) -> str:
    """text itself if it fits the cap; else its head and tail, naming the file holding all of
    it (saved: the run's pins, which making room for it never removes)."""
    if len(text) <= cap:
        return text
    try:
        path = save_result(text, tool_name, saved, folder)
    except OSError as exc:
        return (text[:cap] + f"\n... [output cut: {len(text) - cap:,} more characters; the whole "
                f"output could not be saved in {folder}/ ({reason(exc)})]")
    shown = int(cap * SHOWN_SHARE)
    head, tail = text[:shown], text[len(text) - shown:]   # [-0:] would be all of it
    return (f"{head}\n... [{len(text) - 2 * shown:,} characters not shown] ...\n{tail}\n"
            + saved_note(text, path, "output"))


def saved_note(text: str, path: Path, what: str = "output") -> str:
    """The line naming the saved file and how to read any part of it (saved_path_in finds it)."""
    lines = text.count("\n") + 1
    return (f"[the whole {what} ({len(text):,} characters, {lines:,} lines) is saved in {path}; "
            f"read any part of it with read_file (path, offset and limit, in lines) or bash "
            f"(sed -n '1,200p' {path}; for long lines, cut -c 1-20000 {path})]")


def saved_path_in(text: str) -> str | None:
    """The path a kept-whole result names on its last line, or None (layer 1's placeholders)."""
    last = text[text.rfind("\n") + 1:] if isinstance(text, str) else ""
    match = NOTE.match(last)
    return match["path"] if match else None


def save_for_placeholder(text: str, tool_name: str, saved: SavedTexts,
                         folder: Path = RESULTS) -> str | None:
    """The path where the whole of a result layer 1 clears can be read again, or None.

    None when it is too short to be worth a file (SAVE_WHEN_CLEARED), or cannot be saved:
    the placeholder then names no file. A result that names its saved output (keep_whole)
    gets that file's path, if the file is still there. Else the path depends on the text and
    the tool alone, so it is the same in every call and every process; the file is written
    once. Either is pinned in saved: never removed while the run lasts, and outside the
    bounds (SavedTexts says what that costs). Asking again for the same text returns at once,
    without touching the disk.
    """
    if not isinstance(text, str) or len(text) < SAVE_WHEN_CLEARED:
        return None
    # Which folder: a relative one is another folder after a change of directory (--demo).
    key = (os.getcwd(), str(folder), tool_name, len(text), hash(text))
    known = saved.paths.get(key)
    if known is not None:
        return known
    named = saved_path_in(text)
    if named is None or not _is_regular_file(named):   # its saved output may have been removed
        try:
            named = str(save_result(text, tool_name, saved, folder))
        except OSError:
            return None          # not remembered: a later call may find the disk freed
    saved.pinned.add(named)
    with contextlib.suppress(OSError):   # not on disk: still pinned against this run's prunes
        with _results_folder(Path(named).parent) as fd:
            saved.pins.add(fd, Path(named).name)
    saved.paths[key] = named
    return named




# ---------------------------------------------------------------- saving and the bounds

def save_result(text: str, tool_name: str, saved: SavedTexts, folder: Path = RESULTS) -> Path:
    """Save text as folder/<tool>_<hash>.txt, atomically; a text saved before is not written
    again (its file is made young, so it is pruned last). Making room never removes a file
    pinned in saved."""
    data = text.encode("utf-8", errors="replace")
    if len(data) > MAX_TOTAL_BYTES:
        raise OSError(f"{len(data):,} bytes is more than the {MAX_TOTAL_BYTES:,} bytes kept")
    tool = re.sub(r"[^A-Za-z0-9_-]", "_", tool_name)[:40] or "tool"
    name = f"{tool}_{hashlib.sha256(data).hexdigest()[:HASH_CHARS]}.txt"
    with _results_folder(folder) as fd:
        if _same_file_saved(fd, name, len(data)):
            os.utime(name, dir_fd=fd, follow_symlinks=False)
        else:
            _write_new(fd, name, data)
            _prune(fd, folder, saved.pinned, keep=name)
    return folder / name


def prune(saved: SavedTexts, folder: Path = RESULTS) -> None:
    """Remove the oldest saved results until the folder is within both bounds."""
    with _results_folder(folder) as fd:
        _prune(fd, folder, saved.pinned, keep=None)


def _prune(fd: int, folder: Path, pinned: set, keep: str | None) -> None:
    """Only regular files named as the harness names them, never `keep` nor a pinned one."""
    files, where = [], f"{folder}{os.sep}"      # a pin is a path as saved_path_in gives it
    held = pins.held(fd)                        # pinned by a session running anywhere
    with os.scandir(fd) as entries:
        for entry in entries:
            if where + entry.name in pinned or not NAME.fullmatch(entry.name):
                continue
            if entry.name in held:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:          # removed meanwhile by another agent
                continue
            if stat.S_ISREG(info.st_mode):
                files.append((info.st_mtime_ns, entry.name, info.st_size))
    files.sort()
    total, count = sum(f[2] for f in files), len(files)
    for _, name, size in files:
        if total <= MAX_TOTAL_BYTES and count <= MAX_FILES:
            break
        if name == keep:
            continue
        try:
            os.unlink(name, dir_fd=fd)
        except OSError:
            continue
        total, count = total - size, count - 1


def _write_new(fd: int, name: str, data: bytes) -> None:
    """data in name, whole, readable by this user alone (writer.replace_in: nothing planted at
    its temporary name is written through; a link at name is replaced, never followed)."""
    writer.replace_in(fd, name, data, writer.PRIVATE)


def _same_file_saved(fd: int, name: str, size: int) -> bool:
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == size


def _is_regular_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


# ---------------------------------------------------------------- the folder

@contextlib.contextmanager
def _results_folder(folder: Path):
    """The results folder, open (an fd), reached from the workspace without following a symlink.

    Each folder on the way is opened with O_NOFOLLOW, and everything after is done relative to
    the last one: a link swapped in meanwhile cannot send a write, or a removal, elsewhere.
    Made if missing, and marked; a folder the harness did not mark is used only if empty.
    """
    parts = _parts_inside_workspace(folder)
    fd = os.open(".", writer.FOLDER)
    try:
        made = False
        for n, part in enumerate(parts):
            made = _make_folder(fd, part)
            child = _open_folder(fd, part, Path(*parts[:n + 1]))
            os.close(fd)
            fd = child
        _mark(fd, folder, made)
        yield fd
    finally:
        os.close(fd)


def _parts_inside_workspace(folder: Path) -> tuple:
    relative = folder
    if folder.is_absolute():
        try:
            relative = folder.relative_to(Path.cwd())
        except ValueError:
            raise OSError(f"{folder} is outside the workspace {Path.cwd()}") from None
    if ".." in relative.parts or not relative.parts:
        raise OSError(f"{folder} is not a folder inside the workspace")
    return relative.parts


def _make_folder(fd: int, part: str) -> bool:
    """True if this call made it."""
    try:
        os.mkdir(part, dir_fd=fd)
        return True
    except FileExistsError:
        return False


def _open_folder(fd: int, part: str, shown: Path) -> int:
    try:
        return os.open(part, writer.FOLDER, dir_fd=fd)
    except OSError:
        info = os.stat(part, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            raise OSError(f"{shown} is a symbolic link; results are saved only in a real folder "
                          "inside the workspace") from None
        raise


def _mark(fd: int, folder: Path, made: bool) -> None:
    """Leave the marker in a folder made here or found empty; refuse one with others' files."""
    try:
        info = os.stat(MARKER, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISREG(info.st_mode):
            return
    except FileNotFoundError:
        pass
    if not made and any(name != MARKER for name in os.listdir(fd)):
        raise OSError(f"{folder} holds files the harness did not save (it has no {MARKER}); "
                      "move them, or remove the folder")
    with contextlib.suppress(FileExistsError):     # another agent marked it just now
        writer.create_in(fd, MARKER, MARKER_TEXT.encode("utf-8"), 0o644)
