"""Big tool results saved whole: the model sees the head and the tail, and where the rest is.

Relied on by s03's run_tool_calls (each result over the cap goes through keep_whole) and by
s06's layer 1, whose placeholders name the saved copy (save_for_placeholder).

    a 300,000-character bash output, cap 50,000
      -> .transcripts/results/bash_3f9a1c2b7d4e5f60.txt   (the whole text; the name is its hash)
      -> the model sees: the first 20,000 characters
                         ... [260,000 characters not shown] ...
                         the last 20,000 characters
                         [the whole output (300,000 characters, 9,001 lines) is saved in <path>...]

Without each piece:
- saving: a long log's middle, or a result layer 1 cleared, is lost; the model reruns or guesses.
- head AND tail: a build log's verdict, a test run's summary, are at the end.
- a name of the tool and the text's hash: --continue rebuilds the placeholder the cache holds,
  and a text is written once, however often it is saved.
- the bounds (MAX_TOTAL_BYTES, MAX_FILES; oldest removed first): a long session fills the disk.
- the pins (SavedTexts; on disk, pins.py): any session's prune removes files a placeholder names.
- the folder reached without a symlink, and marked (MARKER): with .transcripts/results a link
  to another folder, a prune deleted that folder's own files (201 of 1,200 notes). Only NAME
  files, in a folder the harness made or found empty, are removed.
- writer.py: a link planted at a guessable name is written through; outputs readable by all.
- the fallback: a full disk costs the middle of one output, with a note, never the whole turn.
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
    """A run's saved texts for layer 1's placeholders, and their pins. A pinned file (one a
    placeholder of this run names) is never removed while the run lasts, in any process, and
    is outside the bounds: a session that clears 1,500 results keeps 1,500 files more."""

    def __init__(self) -> None:
        # (folder, tool, length, hash(text)) -> path: a str keeps its hash, so the same text
        # again is a lookup, not a 300 kB hash; length and 64-bit hash tell texts apart.
        self.paths: dict[tuple, str] = {}
        self.pinned: set[str] = set()
        self.pins = pins.Pins()     # the same, on disk: seen by a prune in any process

    def release(self) -> None:
        """Let the pins on disk go, as the end of the process does."""
        self.pins.release()


def keep_whole(text: str, cap: int, tool_name: str, saved: SavedTexts,
               folder: Path = RESULTS) -> str:
    """text itself if it fits the cap; else its head and tail, and the file holding all of it."""
    if len(text) <= cap:
        return text
    try:
        path = save_result(text, tool_name, saved, folder)
    except OSError as exc:
        return (text[:cap] + f"\n... [output cut: {len(text) - cap:,} more characters; the whole "
                f"output could not be saved in {folder}/ ({reason(exc)})]")
    shown = int(cap * SHOWN_SHARE)
    head, tail = text[:shown], text[len(text) - shown:]   # [-0:] would be all of it
    lines = text.count("\n") + 1
    # The last line names the file (saved_path_in finds it) and how to read any part of it.
    return (f"{head}\n... [{len(text) - 2 * shown:,} characters not shown] ...\n{tail}\n"
            f"[the whole output ({len(text):,} characters, {lines:,} lines) is saved in {path}; "
            f"read any part of it with read_file (path, offset and limit, in lines) or bash "
            f"(sed -n '1,200p' {path}; for long lines, cut -c 1-20000 {path})]")


def saved_path_in(text: str) -> str | None:
    """The path a kept-whole result names on its last line, or None (layer 1's placeholders).
    Only a name keep_whole gives (NAME): a command's output may end in a line shaped so."""
    last = text[text.rfind("\n") + 1:] if isinstance(text, str) else ""
    match = NOTE.match(last)
    if match is None or not NAME.fullmatch(os.path.basename(match["path"])):
        return None
    return match["path"]


def save_for_placeholder(text: str, tool_name: str, saved: SavedTexts,
                         folder: Path = RESULTS) -> str | None:
    """Where a result layer 1 clears can be read again whole, pinned in saved; or None.
    None when it is under SAVE_WHEN_CLEARED or cannot be saved. A result keep_whole cut gets the
    file it names, if still there; else the path depends on the tool and the text alone, the
    same in every process. A text asked for again, once saved, is a lookup.
    """
    if not isinstance(text, str) or len(text) < SAVE_WHEN_CLEARED:
        return None
    # Which folder: a relative one is another folder after a change of directory (--demo).
    key = (os.getcwd(), str(folder), tool_name, len(text), hash(text))
    known = saved.paths.get(key)
    if known is not None:
        return known
    named = saved_path_in(text)
    # Only a file in this results folder is one keep_whole wrote (src/bash_<hash>.txt is not).
    if named is not None and os.path.dirname(os.path.normpath(named)) != os.path.normpath(folder):
        named = None
    if named is not None and not _is_regular_file(named):
        # Its whole output was removed: text is only its head and tail, no whole to point at.
        return None
    if named is None:
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
    """Save text as folder/<tool>_<hash>.txt, atomically, making room (never of a pinned file).
    A text saved before is not written again: its file is made young, so it is pruned last."""
    data = text.encode("utf-8", errors="replace")
    if len(data) > MAX_TOTAL_BYTES:
        raise OSError(f"{len(data):,} bytes is more than the {MAX_TOTAL_BYTES:,} bytes kept")
    tool = re.sub(r"[^A-Za-z0-9_-]", "_", tool_name)[:40] or "tool"
    name = f"{tool}_{hashlib.sha256(data).hexdigest()[:HASH_CHARS]}.txt"
    with _results_folder(folder) as fd:
        if _same_file_saved(fd, name, len(data)):
            os.utime(name, dir_fd=fd, follow_symlinks=False)
        else:
            writer.replace_in(fd, name, data, writer.PRIVATE)
            _prune(fd, folder, saved.pinned, keep=name)
    return folder / name


def prune(saved: SavedTexts, folder: Path = RESULTS) -> None:
    """Remove the oldest saved results until the folder is within both bounds."""
    with _results_folder(folder) as fd:
        _prune(fd, folder, saved.pinned, keep=None)


def _prune(fd: int, folder: Path, pinned: set, keep: str | None) -> None:
    """Only regular files named as the harness names them, never `keep` nor a pinned one."""
    files, where = [], f"{folder}{os.sep}"      # a pin is a path as saved_path_in gives it
    # Pinned by this run, or by a session running anywhere (pins.py).
    held = pins.held(fd) | {path.removeprefix(where) for path in pinned if path.startswith(where)}
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.name in held or not NAME.fullmatch(entry.name):
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
    """The results folder, open (an fd), made if missing and marked (_mark). Each folder on
    the way is opened with O_NOFOLLOW, and all after is done relative to the last: a link
    swapped in meanwhile cannot send a write or a removal elsewhere."""
    parts = _parts_inside_workspace(folder)
    fd = os.open(".", writer.FOLDER)
    try:
        for n, part in enumerate(parts):
            made = False
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=fd)
                made = True
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
        # A folder there cannot be replaced; said by its name, or the note would blame `folder`.
        if stat.S_ISDIR(info.st_mode):
            raise OSError(f"{folder / MARKER} is a folder, not the harness's marker file; "
                          "remove it")
    except FileNotFoundError:
        pass
    if not made and any(name != MARKER for name in os.listdir(fd)):
        raise OSError(f"{folder} holds files the harness did not save (it has no {MARKER}); "
                      "move them, or remove the folder")
    # Another agent may mark it at the same moment: the rename then puts the same text in place
    # again. What else is at the name (a link, a FIFO) is replaced, never written through.
    writer.replace_in(fd, MARKER, MARKER_TEXT.encode("utf-8"), 0o644)
