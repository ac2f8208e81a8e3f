"""What s07's TaskFolder needs beyond its own mechanism: the lock file, safe reads, the caches.

s07 shows the folder board as code: where a task's file is, reading it, the scan over
task_*.json that the max-scan uses, the lock and the atomic write. This module makes each
of those safe for several agents on one machine, and fast on a board of 10,000 tasks.
Without each piece:
- BoardLock, the lock (.tasks/.lock) around every read-modify-write: two agents completing
  blockers at once each rewrite the same dependent, and one clear is lost. Opened only as a
  regular file (writer.open_shared): a link there was followed, and creating a task wrote the
  board's stamp into an SSH authorized_keys; a FIFO there ended the call in a traceback.
- the generation stamp (a random token in .lock, renewed by every writer under the lock):
  without it, a cache cannot know that another agent wrote, so every call must list and read
  the whole folder again (creating 10,000 tasks listed the folder once per task: quadratic).
- the high-water mark (the largest id ever given, kept in .lock after the stamp, written with
  it in one pwrite under the lock): deleting the highest task file by hand gives its id to the
  next task, and a task that waited for the deleted one now waits for an unrelated new one.
- the sweep of temporary files: a writer killed mid-write leaves a temporary file; under the
  lock nobody is mid-write, so what is left is litter.
- read_task: regular files only, never through a link, read with a cap, and checked (a
  corrupt or hand-broken file is a problem line, never repaired or deleted): a FIFO named
  task_2.json hangs /tasks, a symlink to /dev/zero reads gigabytes, a link to another board's
  task showed that task as this board's, and one broken file took the board down.
- names(): a file whose name looks like a task's but is not one (task_abc.json, an id past
  MAX_ID) is flagged, never silently skipped: a next id past MAX_ID would be refused by every
  tool, and the board could take no new task.
- Parsed, the cache of parsed files by (size, mtime_ns, inode): a board of 10,000 tasks takes
  a second to list, where an unchanged file need not be read again.
fcntl is POSIX: like the bash tool, this harness expects Linux or macOS. A folder shared over a
network file system is not safe (its locks are unreliable): use a postgresql:// board there.
"""

import fcntl
import json
import os
import secrets
import threading

from harness import writer
from harness.board.record import MAX_ID, task_problem
from harness.errors import reason
from harness.files import read_bytes

TASK_FILE_MAX = 1_000_000   # bytes: a task is a title and some details; a bigger file is not one
STAMP_BYTES = 32            # .lock: the generation stamp (a random token per change) ...
MARK_BYTES = 16             # ... then the high-water mark, the largest id ever given, in digits
LOCK_MODE = 0o644           # .lock, less the umask: every agent opens it for writing
TEMPORARY = (".task_*.tmp", ".tmp_*", ".tmp-*")   # what writer.py's temporary files are named


class BoardLock:
    """.tasks/.lock, held: an exclusive flock across processes, the board's generation and its
    high-water mark. `unchanged` says that no other agent wrote since this lock was last held
    here: a cache made under it is still the board."""

    def __init__(self, folder):
        self.dir = folder
        self.fd = None              # .lock, open while the lock is held
        self.folder_fd = None       # the folder holding it: every write goes in it
        self.board = None           # which board: (device, inode) of its .lock
        self.unchanged = False      # held, and no other agent wrote since we last held it
        self.largest = 0            # the largest id written under the lock held now
        self._mutex = threading.Lock()   # the flock is per process; this orders our threads
        self._stamp = None          # the generation as we last left it
        self._wrote = False
        self._swept = None          # the board whose temporary files were swept

    @property
    def held(self) -> bool:
        return self.fd is not None

    def __enter__(self) -> "BoardLock":
        self._mutex.acquire()
        try:
            folder, fd = self._open()
        except BaseException:
            self._mutex.release()
            raise
        self._wrote, self.largest = False, 0      # (a Ctrl-C in flock must stamp nothing)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)        # waits for other processes
        except BaseException:
            self._close(fd, folder)
            raise
        st = os.fstat(fd)
        self.fd, self.folder_fd, self.board = fd, folder, (st.st_dev, st.st_ino)
        stamp = (self.board, os.pread(fd, STAMP_BYTES, 0))
        self.unchanged = stamp == self._stamp
        # From here the caller's caches follow this generation (it drops them if changed).
        self._stamp = stamp
        if self._swept != self.board:
            self._sweep()
        return self

    def __exit__(self, *exc) -> None:
        fd, folder = self.fd, self.folder_fd
        try:
            if self._wrote:                       # a new stamp tells every other agent
                self._new_stamp(fd)
        finally:                                  # even when the stamp fails (a full disk):
            self.fd = self.folder_fd = None       # else the lock stays held and every agent
            self.unchanged = False                # on the board hangs
            self._close(fd, folder)

    def wrote(self, task_id: int) -> None:
        """A task file was written under the lock: the stamp and the mark follow on exit."""
        assert self.held, "task files are written only under the board's lock"
        self._wrote = True
        self.largest = max(self.largest, task_id)

    def forget(self) -> None:
        """Our caches are not to be trusted (a change undone): the next hold says changed."""
        self._stamp = None
        self.unchanged = False

    def mark(self) -> int:
        """The high-water mark in .lock, or 0 when there is none or it is not a number below
        MAX_ID (a hand edit): the max-scan alone then, which never goes below a task."""
        try:
            if self.held:
                raw = os.pread(self.fd, MARK_BYTES, STAMP_BYTES)
            else:                                 # outside the lock: a look, no lock taken
                raw = read_bytes(self.dir / ".lock", ".lock", STAMP_BYTES + MARK_BYTES,
                                 follow=False)[STAMP_BYTES:]
        except (OSError, ValueError):             # no .lock yet (or not a file): no mark
            return 0
        text = raw.decode("ascii", "replace").strip()
        if not text.isdigit() or int(text) >= MAX_ID:
            return 0
        return int(text)

    def _new_stamp(self, fd: int) -> None:
        """A new token in .lock; after it, in the same pwrite, the mark if it grew."""
        new = secrets.token_hex(STAMP_BYTES // 2).encode()
        mark = b""
        if self.largest > self.mark():
            mark = str(self.largest).rjust(MARK_BYTES).encode()
        try:
            os.pwrite(fd, new + mark, 0)
        except OSError as exc:
            self._stamp = None                    # we scan afresh next time
            try:
                os.ftruncate(fd, 0)               # needs no space; an empty stamp matches no
            except OSError:                       # token, so others scan afresh too (the
                pass                              # mark goes: the max-scan remains)
            raise ValueError(f"the change was saved, but the board in {self.dir} could not be "
                             f"marked as changed for other agents ({reason(exc)}); free some "
                             "space") from None
        # The caller's caches followed its own writes: they are this new generation's board.
        if self._stamp is not None:
            self._stamp = (self.board, new)

    def _open(self) -> tuple:
        """(the board's folder, its .lock), both open. The folder is taken as named, a link
        too (it may be how a board is shared), and made if missing; inside it, nothing is
        opened through a link."""
        if self.dir.exists() and not self.dir.is_dir():
            raise ValueError(f"the board {self.dir} cannot be used: a file of that name is in "
                             "the way")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            folder = writer.open_folder(self.dir, make=False, follow=True)
        except OSError as exc:
            raise ValueError(f"cannot open the board folder {self.dir}: {reason(exc)}") from None
        try:
            return folder, writer.open_shared(folder, ".lock", LOCK_MODE)
        except OSError as exc:
            os.close(folder)
            raise ValueError(f"cannot lock the board in {self.dir}: {reason(exc)}") from None

    def _close(self, fd: int, folder: int) -> None:
        try:
            os.close(fd)                          # closing releases the lock
            os.close(folder)
        finally:
            self._mutex.release()

    def _sweep(self) -> None:
        """Under the lock nobody is mid-write: a temporary file left is from a writer that was
        killed."""
        self._swept = self.board
        for pattern in TEMPORARY:
            for litter in self.dir.glob(pattern):
                litter.unlink(missing_ok=True)


def names(folder, pattern) -> tuple:
    """(the id of every task file in the folder, a line for each name that looks like a task's
    and is not one). A folder that cannot be read says so; one that does not exist is empty."""
    try:
        found = os.listdir(folder)
    except FileNotFoundError:
        return [], []
    except NotADirectoryError:
        raise ValueError(f"the board {folder} cannot be read: it is a file, not a folder") \
            from None
    except OSError as exc:
        raise ValueError(f"the board {folder} cannot be read: {reason(exc)}") from None
    ids, problems = [], []
    for name in found:
        match = pattern.fullmatch(name)
        if match and int(match[1]) < MAX_ID:
            ids.append(int(match[1]))
        elif name.startswith("task_") and name.endswith(".json"):
            problems.append(f"{folder / name} is not a task file name (expected task_<n>.json "
                            f"with n below {MAX_ID:,}); it was left as it is")
    return ids, problems


def read_task(path, task_id: int) -> dict:
    """A task from its file, or ValueError naming the file and the field. Never repairs or
    deletes it."""
    try:
        # A FIFO, /dev/zero or a link is refused, unread.
        data = read_bytes(path, "it", TASK_FILE_MAX + 1, follow=False)
        if len(data) > TASK_FILE_MAX:
            raise ValueError(f"it is over {TASK_FILE_MAX:,} bytes: too big for a task")
        task = json.loads(data)  # bytes: json decodes UTF-8 itself
    except OSError as exc:
        raise ValueError(f"{path} is unreadable ({reason(exc)}); it was left as it is") from None
    except (ValueError, RecursionError) as exc:   # not JSON, not UTF-8, too big, too deep
        why = exc if isinstance(exc, ValueError) else "nested too deeply"
        raise ValueError(f"{path} is unreadable ({why}); it was left as it is") from None
    problem = task_problem(task, task_id)
    if problem:
        raise ValueError(f"{path} is unreadable (not a valid task: {problem}); it was left as "
                         "it is")
    return task


class Parsed:
    """The task files of one folder as last read, by (size, mtime_ns, inode): an unchanged
    file is not read again. (A hand edit that keeps the size within one mtime tick of our own
    write, a few ms, is not seen until the file changes again: touch it.) Paths are text, not
    Path objects: on a board of 10,000 tasks, making the Paths cost a third of a listing."""

    def __init__(self, folder) -> None:
        self.folder = folder
        self.files = {}             # file name -> ((size, mtime_ns, inode), task)

    def read(self, task_id: int) -> dict:
        name = f"task_{task_id}.json"
        st = os.stat(f"{os.fspath(self.folder)}/{name}", follow_symlinks=False)
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        hit = self.files.get(name)
        if hit is not None and hit[0] == key:
            return hit[1]
        task = read_task(self.folder / name, task_id)
        self.files[name] = (key, task)
        return task

    def put(self, task: dict, st: os.stat_result) -> None:
        """A task we just wrote, with the stat of its new file."""
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        self.files[f"task_{task['id']}.json"] = (key, task)
