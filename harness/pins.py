"""Pins: the saved results a running session still names, seen by every process.

Relied on by spill.py (and so by s06's layer 1, whose placeholders name saved results): a
prune, in whichever process it runs, leaves every file a running session has pinned.

    .transcripts/results/.pins/3f9a1c2b7d4e5f60      one file a session, a name a line:
      bash_0123456789abcdef.txt
      read_file_fedcba9876543210.txt

Without each piece:
- the pin file on disk: a second session in the same folder prunes the files the first one's
  placeholders still name.
- the lock (flock) its session holds while it runs: the pin file of a session that ended, or
  was killed, would keep its files for ever. One whose lock is free goes at the next prune.
- locked before it has its name (made under a temporary one): a prune in between would find
  the lock free and remove a live session's pins.
- one write a name, appended: a prune reading meanwhile sees whole lines, and a last line
  without its newline is not taken for a name.
- a folder of their own (.pins): a prune lists a handful of pin files, not 1,000 results.
- read with care: a regular file only, never through a link, at most MAX_BYTES of it.
"""

import contextlib
import fcntl
import os
import re
import secrets
import stat

from harness import writer

FOLDER = ".pins"                          # in the results folder
PIN_FILE = re.compile(r"[0-9a-f]{16}")    # a temporary <hex>.tmp is not one yet
MAX_BYTES = 10_000_000   # read of one pin file: about 250,000 names (one per cleared result)


class Pins:
    """This process's pin files, one a results folder, open and locked until release()."""

    def __init__(self) -> None:
        self.files: dict[tuple, int] = {}   # (st_dev, st_ino) of a folder -> our pin file's fd

    def add(self, folder: int, name: str) -> None:
        """Pin `name` in `folder` (an open fd) against any process's prune, while this one runs."""
        info = os.fstat(folder)
        key = (info.st_dev, info.st_ino)
        if key not in self.files:
            with contextlib.suppress(FileExistsError):
                os.mkdir(FOLDER, dir_fd=folder)
            pins = os.open(FOLDER, writer.FOLDER, dir_fd=folder)   # never through a link
            try:
                self.files[key] = _new_pin_file(pins)
            finally:
                os.close(pins)
        os.write(self.files[key], f"{name}\n".encode("utf-8"))

    def release(self) -> None:
        """Let every pin go, as the end of the process does."""
        for fd in self.files.values():
            os.close(fd)
        self.files.clear()


def _new_pin_file(folder: int) -> int:
    """A new pin file in folder, open for appending, and locked before it has its name."""
    temporary = f"{secrets.token_hex(8)}.tmp"
    fd = writer.open_new_in(folder, temporary, writer.PRIVATE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(temporary, temporary.removesuffix(".tmp"), src_dir_fd=folder,
                  dst_dir_fd=folder)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise
    return fd


def held(folder: int) -> set:
    """The names pinned in `folder` (an open fd) by running sessions; ended ones' pins go."""
    try:
        pins = os.open(FOLDER, writer.FOLDER, dir_fd=folder)
    except OSError:             # none yet (nothing pinned here), or not a real folder
        return set()
    try:
        names = set()
        for pin_file in os.listdir(pins):
            if PIN_FILE.fullmatch(pin_file):
                names |= _names_if_held(pins, pin_file)
        return names
    finally:
        os.close(pins)


def _names_if_held(folder: int, pin_file: str) -> set:
    """The names in a pin file whose session runs (its lock is taken); else it goes."""
    try:
        fd = os.open(pin_file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=folder)
    except OSError:             # removed meanwhile, or a link: it pins nothing
        return set()
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return set()
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:   # its session holds it: it runs
            text = f.read(min(info.st_size, MAX_BYTES)).decode("utf-8", "replace")
            return set(text.split("\n")[:-1])
        with contextlib.suppress(OSError):
            os.unlink(pin_file, dir_fd=folder)
    return set()
