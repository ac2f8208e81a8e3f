"""Big tool results saved whole: the model sees the head and the tail, and where the rest is.

Relied on by s03's call_tool (every result over the cap goes through keep_whole, so s06
and s07 get it too) and by s06's layer 1, whose placeholders name the saved copy.

    a 300,000-character bash output, cap 50,000
      -> .transcripts/results/20260101-120000_bash_3f9a1c2b7d4e.txt   (the whole text, atomically)
      -> the model sees: the first 20,000 characters
                         ... [260,000 characters not shown] ...
                         the last 20,000 characters
                         [the whole output (300,000 characters, 9,001 lines) is saved in <path>; ...]

Without each piece:
- saving at all: the middle of a long log (where the error often is) is lost for good,
  and once layer 1 clears a result the model cannot get it back, so it runs the command
  again, or guesses.
- head AND tail: a build log's verdict, a test run's summary, are at the end.
- the bounds (MAX_TOTAL_BYTES, MAX_FILES; oldest removed first): a long session that
  greps a big tree every few minutes would fill the disk.
- the fallback: a full disk (or a read-only folder) must cost the model the middle of one
  output, with a note saying so, never the whole turn.
"""

import hashlib
import os
import re
import time
from pathlib import Path

RESULTS = Path(".transcripts") / "results"   # in the workspace, so read_file and bash can open it
MAX_TOTAL_BYTES = 100_000_000   # 100 MB of saved results at most: past it the oldest go first
MAX_FILES = 1_000               # and at most this many files (a long session makes many small ones)
SHOWN_SHARE = 0.4               # of the cap, shown from the head and again from the tail
SAVE_WHEN_CLEARED = 2_000       # characters: a cleared result shorter than this is cheaper to redo
NOTE = re.compile(r"^\[the whole (?:output|result) \([\d,]+ characters[^)]*\) is saved in (?P<path>.+?\.txt); ")

_saved_by_hash: dict[str, Path] = {}   # this process's saved texts: one text, one file


def keep_whole(text: str, cap: int, tool_name: str, folder: Path = RESULTS) -> str:
    """text itself if it fits the cap; else its head and tail, naming the file holding all of it."""
    if len(text) <= cap:
        return text
    try:
        path = save_result(text, tool_name, folder)
    except OSError as exc:
        from harness.errors import reason
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


def spill_for_placeholder(text: str, tool_name: str, folder: Path = RESULTS) -> str | None:
    """Where the whole of a result layer 1 is clearing can be read again, saving it if need be.

    None if it is too short to be worth a file (SAVE_WHEN_CLEARED) or cannot be saved: the
    placeholder then says only what it says today. Calling it again for the same text
    returns the same path, so a placeholder stays byte for byte the same (the cache).
    """
    if not isinstance(text, str):
        return None
    named = saved_path_in(text)
    if named or len(text) < SAVE_WHEN_CLEARED:
        return named
    try:
        return str(save_result(text, tool_name, folder))
    except OSError:
        return None


# ---------------------------------------------------------------- saving and the bounds

def save_result(text: str, tool_name: str, folder: Path = RESULTS) -> Path:
    """Write text to folder/<time>_<tool>_<hash>.txt, atomically and never over another file."""
    data = text.encode("utf-8", errors="replace")
    digest = hashlib.sha256(data).hexdigest()
    known = _saved_by_hash.get(digest)
    if known is not None and known.is_file():
        return known
    if len(data) > MAX_TOTAL_BYTES:
        raise OSError(f"{len(data):,} bytes is more than the {MAX_TOTAL_BYTES:,} bytes kept")
    folder.mkdir(parents=True, exist_ok=True)
    path = _reserve(folder, tool_name, digest)
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)       # a reader sees no file, or the whole file
    except OSError:
        temporary.unlink(missing_ok=True)
        path.unlink(missing_ok=True)
        raise
    _saved_by_hash[digest] = path
    prune(folder, keep=path)
    return path


def _reserve(folder: Path, tool_name: str, digest: str) -> Path:
    """A new, empty file with a unique name (O_EXCL: two agents in one folder never share one).

    The name holds the text's hash, not a count: once the oldest files are removed, a count
    would be used again, and an old placeholder would name a different output.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    tool = re.sub(r"[^A-Za-z0-9_-]", "_", tool_name)[:40] or "tool"
    for n in range(1, 100):
        path = folder / f"{stamp}_{tool}_{digest[:12]}{f'_{n}' if n > 1 else ''}.txt"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            return path
        except FileExistsError:
            continue
    raise OSError(f"too many results named {stamp}_{tool}_{digest[:12]}*.txt in {folder}")


def prune(folder: Path = RESULTS, keep: Path | None = None) -> None:
    """Remove the oldest saved results until the folder is within both bounds (never `keep`)."""
    files = []
    for path in folder.glob("*.txt"):
        try:
            info = path.stat()
        except OSError:          # removed meanwhile by another agent
            continue
        files.append((info.st_mtime_ns, path.name, info.st_size, path))
    files.sort()
    total, count = sum(f[2] for f in files), len(files)
    for _, _, size, path in files:
        if total <= MAX_TOTAL_BYTES and count <= MAX_FILES:
            break
        if path == keep:
            continue
        try:
            path.unlink()
        except OSError:
            continue
        total, count = total - size, count - 1


save_for_placeholder = spill_for_placeholder   # TEMP shim
