"""The one writer: every file the harness makes or replaces, never through a link.

Relied on by every lesson through the modules that keep something on disk: s03's write_file
and edit_file (files.py), saved results and their pins (spill, pins), s06's transcripts, the
session log and page (session/), the REPL history and --demo's folder (cli), and s07's task
files and their lock (board/folder.py). Without each piece:
- folder(): a link at a folder's name (.transcripts, demo) sends every file where it points,
  and a file in the way ends --demo in a traceback. Files are then made by the folder's fd,
  so a folder swapped for a link meanwhile cannot split a temporary file from its name.
- random temporary names made with O_EXCL | O_NOFOLLOW (NEW_FILE): a link planted at a
  guessable name is written through, and a file planted there blocks every write. The name is
  not made from the final name, which may be 255 bytes already. _open_new(): a Ctrl-C as
  the open returns leaves an empty file that nothing removes.
- replace_in(): a temporary file, then a rename: a reader, a full disk or a kill -9 sees the
  old file or the new, never half. A link at the name is replaced, never followed.
- _keep_what_was(): a file an agent run as root edits becomes root's, and loses its POSIX ACLs;
  what the process may not set stays as the rename leaves it (files.py says so).
- link(), numbered(): a hard link takes only a free name, so no earlier task, transcript or page
  is replaced. Without hard links (some FAT, FUSE, SMB mounts) the name is reserved with O_EXCL,
  then replaced: a kill in between leaves it empty.
- modes set by the fd: what holds the conversation (logs, transcripts, pages, saved results,
  the REPL history) is PRIVATE (0600) whatever the umask; a shared file (a task, a file the
  tools write) gets open()'s mode (mode None: 0o666 less the umask).
- open_shared(): a link, symbolic or hard, at the board's .lock is written through (to an SSH
  authorized_keys, say), and a FIFO there ends in a traceback.
"""

import contextlib
import os
import re
import secrets
import stat
import time
from pathlib import Path

PRIVATE = 0o600      # what holds the conversation: its owner alone reads it
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC   # made here, now
SHARED = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC   # a FIFO: no wait
FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
STALE = 3600         # seconds unwritten: a temporary file nobody is writing any more
MOST_NUMBERS = 1000  # numbered names tried for one stem (<stem>_1 .. _1000) before giving up
# Every temporary file written here is .tmp_<kind><16 hex digits>.tmp. A task's (kind "task_",
# temporary_beside) is swept by its board under its lock (board/folder.py); another, once it is
# STALE, where sweep() runs: the board's folder, and the session log's as a session starts.
TASK_KIND = "task_"
TEMPORARY = re.compile(r"\.tmp_[0-9a-f]{16}\.tmp", re.ASCII)
TASK_TEMPORARY = re.compile(rf"\.tmp_{TASK_KIND}[0-9a-f]{{16}}\.tmp", re.ASCII)

KINDS = [(stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
         (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISLNK, "a symbolic link")]


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


# ---------------------------------------------------------------- the folder

@contextlib.contextmanager
def folder(path: Path, make: bool = True):
    """path open as a folder (an fd, closed at the block's end), made first if missing (with
    make=False, FileNotFoundError). A symbolic link at its own name is refused; the folders
    above it are taken as they are."""
    for attempt in (1, 2):
        try:
            fd = os.open(path, FOLDER)
            break
        except FileNotFoundError:
            if attempt == 2 or not make:
                raise
        except OSError as exc:
            raise _in_the_way(path, exc) from None
        try:                                  # missing: made, with the folders above it
            Path(path).mkdir(parents=True, exist_ok=True)
        except OSError as exc:                # a dangling link: mkdir finds the name taken
            raise _in_the_way(path, exc) from None
    try:
        yield fd
    finally:
        os.close(fd)


def what_is_at(path) -> str | None:
    """What is at path, if not a folder, in words: "a file", "a symbolic link" (to anything),
    "a FIFO (named pipe)"...; None for a folder, or for nothing there."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        return None
    return "a file" if stat.S_ISREG(mode) else kind_of(mode)


def _in_the_way(path: Path, exc: OSError) -> OSError:
    """What is at path instead of a folder, in words; else the error as it came."""
    what = what_is_at(path)
    if what == "a symbolic link":
        return OSError(f"{path} is a symbolic link; the harness writes only into a real folder "
                       "(remove the link, or run elsewhere)")
    if what:
        return OSError(f"{path} is {what}, not a folder")
    return exc


# ---------------------------------------------------------------- whole files

def replace(path: Path, data: bytes, mode: int | None) -> os.stat_result:
    """path holds data, whole; see replace_in(). Its folder is made if missing."""
    with folder(path.parent) as where:
        return replace_in(where, path.name, data, mode)


def replace_in(where: int, name: str, data: bytes, mode: int | None) -> os.stat_result:
    """where/name (where: an open folder) holds data, whole: a temporary file, then a rename.
    Returns the new file's stat. mode: its permission bits; None gives open()'s."""
    temporary, made = _write_temporary(where, name, data, mode)
    try:
        os.replace(temporary, name, src_dir_fd=where, dst_dir_fd=where)
    except BaseException:
        _remove(where, temporary)
        raise
    return made


def temporary_beside(path: Path, data: bytes) -> Path:
    """A new file beside path holding data, named as TASK_TEMPORARY, with the owner, group and
    extended attributes of the file at path: s07 puts it in place (os.replace, or link()).
    The folder is taken by its name, a link too (a board may be shared so): opening it cost a
    third of a create on a board of 10,000 tasks."""
    temporary, _ = _write_temporary(None, os.fspath(path), data, None,
                                    within=os.fspath(path.parent), kind=TASK_KIND)
    return Path(temporary)


def link(temporary: Path, path: Path) -> None:
    """temporary under path's name too, only if that name is free: FileExistsError if it is
    taken (a hard link never replaces a file; without hard links, see _link)."""
    _link(None, os.fspath(temporary), os.fspath(path))


def numbered(path: Path, stem: str, suffix: str, data: bytes, mode: int = PRIVATE) -> Path:
    """data, whole, in path/<stem>_<n><suffix>: n the first number whose name is free, so
    no earlier file is ever replaced. Returns the new file's path."""
    with folder(path) as where:
        temporary, _ = _write_temporary(where, stem, data, mode, keep=False)
        try:
            for n in range(1, MOST_NUMBERS + 1):
                name = f"{stem}_{n}{suffix}"
                with contextlib.suppress(FileExistsError):
                    _link(where, temporary, name)
                    return path / name
        finally:
            _remove(where, temporary)
    raise FileExistsError(f"{path} already holds {MOST_NUMBERS} files named {stem}_<n>{suffix}")


def _write_temporary(where, name: str, data: bytes, mode: int | None, keep: bool = True,
                     within: str = "", kind: str = "") -> tuple:
    """(the random name of a new file in where holding data, and its stat). where: an open
    folder, or None for paths (the temporary is then made in `within`). kind: a word after
    .tmp_ saying whose file it is. keep: it gets what _keep_what_was keeps of the file at name.
    """
    temporary = f".tmp_{kind}{secrets.token_hex(8)}.tmp"   # TEMPORARY, TASK_TEMPORARY
    if within:
        temporary = os.path.join(within, temporary)
    fd = _open_new(where, temporary, NEW_FILE, 0o666 if mode is None else PRIVATE)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if keep:
                _keep_what_was(where, name, f.fileno())
            if mode is not None:                # after the chown, which clears a setuid bit
                os.fchmod(f.fileno(), mode)     # by the fd: the name could be swapped meanwhile
            made = os.fstat(f.fileno())
    except BaseException:
        _remove(where, temporary)
        raise
    return temporary, made


def _keep_what_was(where: int, name: str, new: int) -> None:
    """The new file (fd new) gets the owner, group and extended attributes of a regular file at
    where/name, as far as this process may set them (files.py says what was not kept)."""
    try:
        if not stat.S_ISREG(os.stat(name, dir_fd=where, follow_symlinks=False).st_mode):
            return                        # a link, a FIFO, a device: nothing to keep, or open
        old = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                      dir_fd=where)
    except OSError:                       # no file there yet, or one we may not read
        return
    try:
        was = os.fstat(old)
        if not stat.S_ISREG(was.st_mode):  # swapped since: as above
            return
        _keep_owner(new, was)
        for attribute, value in attributes(old).items():
            with contextlib.suppress(OSError):    # e.g. security.* without the privilege
                os.setxattr(new, attribute, value)
    finally:
        os.close(old)


def _keep_owner(new: int, was: os.stat_result) -> None:
    """The owner and group of `was` on the new file: root may give both; a user may keep the
    group when the file was theirs, or the group alone when they belong to it."""
    now = os.fstat(new)
    if (now.st_uid, now.st_gid) == (was.st_uid, was.st_gid):
        return
    for uid in (was.st_uid, -1):          # -1: the group alone
        with contextlib.suppress(PermissionError):
            os.fchown(new, uid, was.st_gid)
            return


def attributes(file) -> dict:
    """A file's extended attributes (POSIX ACLs among them), {name: value}; file: a path (a
    link is not followed) or an fd. {} where they cannot be read (macOS has no listxattr)."""
    if not hasattr(os, "listxattr"):
        return {}
    follow = isinstance(file, int)            # an fd: the file itself; a path: not a link
    found = {}
    with contextlib.suppress(OSError):
        for attribute in os.listxattr(file, follow_symlinks=follow):
            with contextlib.suppress(OSError):
                found[attribute] = os.getxattr(file, attribute, follow_symlinks=follow)
    return found


def _link(where: int, temporary: str, name: str) -> None:
    """The temporary file under name too, only if name is free (FileExistsError if not)."""
    try:
        os.link(temporary, name, src_dir_fd=where, dst_dir_fd=where)
        return
    except FileExistsError:
        raise
    except OSError:                   # no hard links on this file system
        pass
    os.close(_open_new(where, name, NEW_FILE, PRIVATE))   # reserved: fails if taken
    try:
        os.replace(temporary, name, src_dir_fd=where, dst_dir_fd=where)
    except BaseException:
        _remove(where, name)          # the empty file reserved just now, ours
        raise


def _open_new(where, name: str, flags: int, mode: int, exact: bool = False) -> int:
    """os.open of a new name (O_EXCL); exact: mode, not less the umask. A signal handled as a
    call returns leaves the file, empty, where nothing removes it: removed (its fd is lost)."""
    fd = None
    try:
        fd = os.open(name, flags, mode, dir_fd=where)
        if exact:
            os.fchmod(fd, mode)
        return fd
    except OSError:
        if fd is None:
            raise                               # no file made: the name may be another's
        os.close(fd)
        _remove(where, name)
        raise
    except BaseException:                       # a signal: the file may be made
        if fd is not None:
            os.close(fd)
        _remove(where, name)
        raise


def _remove(where: int, name: str) -> None:
    with contextlib.suppress(OSError):     # gone already (renamed), or the folder refuses
        os.unlink(name, dir_fd=where)


def sweep(path, also=None) -> None:
    """Remove what a killed writer left in the folder path: a regular file named as TEMPORARY
    and unwritten for STALE seconds, and any named as also(name) says. Nothing else: no
    link, no folder. A folder that cannot be read is left as it is."""
    stale = time.time() - STALE
    with contextlib.suppress(OSError), os.scandir(path) as found:
        for entry in found:
            with contextlib.suppress(OSError):          # gone meanwhile: nothing to do
                if _litter(entry, stale, also):
                    os.unlink(entry.path)


def _litter(entry, stale: float, also) -> bool:
    if not entry.is_file(follow_symlinks=False):    # a folder or a link of that name: left
        return False
    if also is not None and also(entry.name):
        return True
    named = TEMPORARY.fullmatch(entry.name)
    return named is not None and entry.stat(follow_symlinks=False).st_mtime < stale


# ---------------------------------------------------------------- files kept open

def open_numbered(path: Path, stem: str, suffix: str, mode: int = PRIVATE) -> tuple:
    """(path/<stem>_<n><suffix>, an fd appending to it): a new, empty file, n the first free."""
    with folder(path) as where:
        for n in range(1, MOST_NUMBERS + 1):
            name = f"{stem}_{n}{suffix}"
            try:
                return path / name, open_new_in(where, name, mode)
            except FileExistsError:
                continue
    raise FileExistsError(f"{path} already holds {MOST_NUMBERS} files named {stem}_<n>{suffix}")


def open_appending(path: Path) -> int:
    """A file numbered() just made, open for appending: a link put in its place is refused."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)


def open_new_in(where: int, name: str, mode: int = PRIVATE) -> int:
    """A new, empty where/name, open for appending (FileExistsError if the name is taken)."""
    return _open_new(where, name, NEW_FILE | os.O_APPEND, mode, exact=True)


def open_shared(where: int, name: str, mode: int) -> int:
    """where/name open for reading and writing, made (mode, less the umask) if missing, for
    several processes at once: a regular file only, never through a link."""
    try:
        fd = os.open(name, SHARED, mode, dir_fd=where)
    except OSError:
        if not _is_link(where, name):
            raise
        raise _not_regular(name, stat.S_IFLNK) from None
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode):
        os.close(fd)
        raise _not_regular(name, found.st_mode)
    # A hard link is a regular file too, and writing it writes the file it shares (keys, say).
    if found.st_nlink > 1:
        os.close(fd)
        raise OSError(f"{name} has another name (a hard link); remove it (the harness makes "
                      "its own)")
    return fd


def _is_link(where: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=where, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _not_regular(name: str, mode: int) -> OSError:
    return OSError(f"{name} is {kind_of(mode)}, not a regular file; remove it (the harness "
                   "makes its own)")
