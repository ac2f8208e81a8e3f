"""What s07's TaskFolder needs beyond its mechanism: safe to share, and fast on a big board.

s07 holds the mechanism as code: a task's file, reading it, the scan the max-scan uses, the
lock, the high-water mark and the atomic write. board.open_store makes the folder store as
remembering(TaskFolder): the lesson's own methods do the work, and Remembering, mixed in
around them, guards and remembers. Without each piece:
- open_lock: .tasks/.lock opened only as a regular file (writer.open_shared): a link there
  was followed, and creating a task wrote the board's stamp into an SSH authorized_keys; a
  FIFO there ended the call in a traceback. A file where the folder belongs is said in words.
- read: regular files only, never through a link, with a cap (TASK_FILE_MAX): a FIFO named
  task_2.json hung /tasks, and a symlink to /dev/zero read gigabytes. unreadable() words every
  refusal of a task file alike, s07's too: it names the file, says why, and that it was kept.
- listing: a board that cannot be read (a file where the folder belongs) says so, rather
  than look empty; one that does not exist yet is empty.
- the generation stamp (a random token in .lock, renewed by every writer under the lock):
  without it nothing may be remembered, since another agent may have written, and every call
  lists and reads the whole folder again (creating 10,000 tasks listed the folder once per
  task: quadratic; completing one read 10,000 files).
- each file remembered by (size, mtime_ns, inode): a board of 10,000 tasks took a second to
  list. A hand edit that keeps the size within one mtime tick of our own write (a few ms) is
  seen by a listing only once the file changes again (touch it); load and try_load, which
  a change reads its tasks with, always read the file, so such an edit is never written over.
- the undo of reservations: a /task import that stops at item 3 left items 1 and 2, and
  importing the file again made them twice. (A task replaced by write() stays replaced: one
  file at a time is all a folder does.)
- the sweep (once per process and board): a writer killed mid-write leaves a temporary file.
  Under the lock no task file is being written, but a folder may be a board and more (--board
  .): it swept the user's .tmp_notes.md, and the temporary file of a write_file in flight,
  which holds no board lock. Only writer.py's temporary names go (any other name is the
  user's): a task's (TASK_TEMPORARY: task files are written only under the lock, so under it
  one is what a killed writer left) at once, another only when nobody has written it for
  STALE seconds (older harnesses gave a task's temporary file that name). The names older
  harnesses gave a task's temporary file alone (LITTER) go at once too.
- the mutex: the flock orders processes; two threads of one process share this object.
fcntl is POSIX: like the bash tool, this harness expects Linux or macOS. A folder shared over a
network file system is not safe (its locks are unreliable): use a postgresql:// board there.
"""

import contextlib
import os
import re
import secrets
import threading
import time

from harness import writer
from harness.errors import reason
from harness.files import read_bytes

TASK_FILE_MAX = 1_000_000   # bytes: a task is a title and some details; a bigger file is not one
STAMP_BYTES = 32            # .lock: the generation stamp (a random token per change), then
                            # s07's high-water mark (TaskFolder.high_water)
LOCK_MODE = 0o644           # .lock, less the umask: every agent opens it for writing
# writer.py's temporary names: a task file's (temporary_beside), and every other file's.
TASK_TEMPORARY = writer.TASK_TEMPORARY
TEMPORARY = writer.TEMPORARY
STALE = 3600                # seconds unwritten: a temporary file nobody is writing any more
# What older harnesses named a task file's temporary file: .task_1.json.<hex>.tmp and
# .tmp_<id>_<pid>_<thread>. Written only under the lock, so under it they are litter.
LITTER = re.compile(r"\.task_[1-9][0-9]{0,14}\.json\.[0-9a-f]+\.tmp"
                    r"|\.tmp_[1-9][0-9]{0,14}_[0-9]+_[0-9]+", re.ASCII)


def open_lock(folder) -> int:
    """The board's .lock, open for reading and writing (made, with the folder, if missing:
    the folder is looked at only then, which saves a create three system calls)."""
    lock = os.fspath(folder / ".lock")
    try:
        return writer.open_shared(None, lock, LOCK_MODE)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as exc:
        raise ValueError(f"cannot lock the board in {folder}: {reason(exc)}") from None
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"the board {folder} cannot be used: a file of that name is in the way")
    try:
        folder.mkdir(parents=True, exist_ok=True)    # a link to a folder on purpose: kept
        return writer.open_shared(None, lock, LOCK_MODE)
    except OSError as exc:
        raise ValueError(f"cannot open the board folder {folder}: {reason(exc)}") from None


def listing(folder) -> list:
    """The names in the board's folder ([] while there is none)."""
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        raise ValueError(f"the board {folder} cannot be read: it is a file, not a "
                         "folder") from None
    except OSError as exc:
        raise ValueError(f"the board {folder} cannot be read: {reason(exc)}") from None


def read(path) -> bytes:
    """A task file's bytes, or ValueError: never through a link, never past TASK_FILE_MAX."""
    try:
        data = read_bytes(path, "it", TASK_FILE_MAX + 1, follow=False)
    except OSError as exc:
        raise unreadable(path, reason(exc)) from None
    except ValueError as exc:                       # a link, a FIFO, a device
        raise unreadable(path, exc) from None
    if len(data) > TASK_FILE_MAX:
        raise unreadable(path, f"it is over {TASK_FILE_MAX:,} bytes: too big for a task")
    return data


def unreadable(path, why) -> ValueError:
    """The error for a task file that cannot be used: it says why, and that it was kept."""
    return ValueError(f"{path} is unreadable ({why}); it was left as it is")


def sweep(where) -> None:
    """Remove what a killed writer left in the board's folder, under the lock: a regular file
    named as LITTER or TASK_TEMPORARY, or named as TEMPORARY and unwritten for STALE seconds.
    Nothing else."""
    stale = time.time() - STALE
    with contextlib.suppress(OSError), os.scandir(where) as found:
        for entry in found:
            with contextlib.suppress(OSError):          # gone meanwhile: nothing to do
                if _litter(entry, stale):
                    os.unlink(entry.path)


def _litter(entry, stale: float) -> bool:
    if not entry.is_file(follow_symlinks=False):    # a folder or a link of that name: left
        return False
    if LITTER.fullmatch(entry.name) or TASK_TEMPORARY.fullmatch(entry.name):
        return True
    if not TEMPORARY.fullmatch(entry.name):
        return False
    return entry.stat(follow_symlinks=False).st_mtime < stale


def remembering(lesson_folder: type) -> type:
    """s07's TaskFolder with Remembering mixed in: the store board.open_store makes."""
    return type(f"Remembering{lesson_folder.__name__}", (Remembering, lesson_folder), {})


class Remembering:
    """Around s07's TaskFolder: while this process holds the lock and no other agent wrote
    since, what the folder holds is remembered, not read again; and the lock is guarded."""

    def __init__(self, location):
        super().__init__(location)
        self.agent = None           # who writes (postgres.TaskStore): a file does not say
        self._mutex = threading.Lock()
        self._stamp = None          # the board's generation as we last left it
        self._wrote = False         # a task written under the lock held now
        self._made = []             # the files reserve() made under it
        self._swept = None          # the board whose temporary files were swept
        self._files = {}            # file name -> ((size, mtime_ns, inode), task)
        self._ids = None            # remembered while held: the ids in the folder
        self._tasks = None          # and the board, in id order

    # ------------------------------------------------------------ the lock

    @contextlib.contextmanager
    def locked(self):
        with self._mutex, super().locked() as fd:
            self._enter(fd)
            try:
                yield fd
            except BaseException:
                self._undo()
                raise
            finally:
                self._leave(fd)

    def _enter(self, fd: int) -> None:
        st = os.fstat(fd)
        board = (st.st_dev, st.st_ino)
        stamp = (board, os.pread(fd, STAMP_BYTES, 0))
        if stamp != self._stamp:                    # another agent wrote: forget the folder
            self._ids = self._tasks = None
        self._stamp = stamp
        self._wrote, self._made = False, []
        if self._swept != board:
            self._swept = board
            sweep(self.dir)

    def _leave(self, fd: int) -> None:
        if self._wrote:                             # a new stamp tells every other agent
            self._new_stamp(fd)

    def _new_stamp(self, fd: int) -> None:
        """A new token at the start of .lock (the lesson's mark follows it)."""
        new = secrets.token_hex(STAMP_BYTES // 2).encode()
        try:
            os.pwrite(fd, new, 0)
        except OSError as exc:
            self._forget()
            with contextlib.suppress(OSError):      # needs no space: an empty stamp matches
                os.ftruncate(fd, 0)                 # no token, so others read afresh too
            raise ValueError(f"the change was saved, but the board in {self.dir} could not be "
                             f"marked as changed for other agents ({reason(exc)}); free some "
                             "space") from None
        # What we remember followed our own writes: it is this new generation's board.
        if self._stamp is not None:
            self._stamp = (self._stamp[0], new)

    def _undo(self) -> None:
        """A change that failed (Ctrl-C too) leaves no new task: remove what reserve() made."""
        for path in reversed(self._made):
            with contextlib.suppress(OSError):      # a listing will show what is left
                path.unlink(missing_ok=True)
        self._forget()

    def _forget(self) -> None:
        self._stamp = self._ids = self._tasks = None

    # ------------------------------------------------------------ reading

    def ids(self):
        if self.lock_fd is not None and self._ids is not None:
            return self._ids
        found = super().ids()
        if self.lock_fd is not None:
            self._ids = found
        return found

    def scan(self, validate: bool = False) -> tuple:
        """The lesson's scan; from memory while nothing changed, unless validate (a listing
        the user or the model sees looks again, for a hand edit)."""
        if not validate and self.lock_fd is not None and self._tasks is not None:
            return dict(self._tasks), []
        tasks, problems = super().scan(validate)
        if self.lock_fd is not None:
            self._tasks = dict(tasks)
        return tasks, problems

    def read(self, task_id: int) -> dict:
        """The lesson's read, unless the file is as it was when last read (by its stat)."""
        name = _file_name(task_id)
        try:     # a str, not a Path: on 10,000 files the Paths cost a third of a listing
            st = os.stat(f"{os.fspath(self.dir)}/{name}", follow_symlinks=False)
        except OSError:
            return super().read(task_id)            # which says what is wrong
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        hit = self._files.get(name)
        if hit is not None and hit[0] == key:
            return hit[1]
        task = super().read(task_id)
        self._files[name] = (key, task)
        return task

    def load(self, task_id: int) -> dict:
        """The lesson's load, from the file, never from memory: the caller is about to change
        the task (or check a rule by it), and a hand edit that kept the size and the time must
        not be written over. A copy: what is remembered must not change with it."""
        self._files.pop(_file_name(task_id), None)
        return _copied(super().load(task_id))

    def try_load(self, task_id: int):
        self._files.pop(_file_name(task_id), None)          # from the file, as load
        task = super().try_load(task_id)
        if task is None:
            return None
        return _copied(task)

    # ------------------------------------------------------------ writing

    def write(self, task: dict) -> None:
        self._held()
        try:
            super().write(task)
        except OSError as exc:
            raise ValueError(f"could not save task #{task['id']} in {self.dir}: "
                             f"{reason(exc)}") from None
        self._remember(task)

    def reserve(self, task: dict) -> bool:
        self._held()
        try:
            made = super().reserve(task)
        except OSError as exc:
            raise ValueError(f"could not save task #{task['id']} in {self.dir}: "
                             f"{reason(exc)}") from None
        if not made:
            self._ids = None                        # a file we did not know of: list again
            return False
        self._made.append(self.path(task["id"]))
        self._remember(task)
        return True

    def _held(self) -> None:
        assert self.lock_fd is not None, "task files are written only under the board's lock"

    def _remember(self, task: dict) -> None:
        """What we just wrote, as the folder now holds it."""
        task = _copied(task)
        name = _file_name(task["id"])
        st = os.stat(self.dir / name, follow_symlinks=False)
        self._files[name] = ((st.st_size, st.st_mtime_ns, st.st_ino), task)
        self._wrote = True
        if self._ids is not None:
            self._ids.add(task["id"])
        known = self._tasks
        if known and task["id"] not in known and task["id"] < next(reversed(known)):
            self._tasks = None                      # an id below the last: read in order again
        elif known is not None:
            known[task["id"]] = task


def _file_name(task_id: int) -> str:
    """A task's file name, as s07's TaskFolder.path names it: a str, not a Path (on 10,000
    files the Paths cost a third of a listing)."""
    return f"task_{task_id}.json"


def _copied(task: dict) -> dict:
    """A task to give away or keep: its lists copied too (a deepcopy cost a create 40 us)."""
    copied = dict(task)
    for field in ("blockedBy", "unblocked"):
        if isinstance(copied.get(field), list):
            copied[field] = list(copied[field])
    return copied
