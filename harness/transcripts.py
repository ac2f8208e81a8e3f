"""Layer 2's record and its failures: the transcript on disk, and what a failed compaction says.

Relied on by s06's auto_compact (and so by s07's compact_with_board). Without each piece:
- save_new: two compactions in one second overwrite each other's transcript, and a full disk
  leaves a truncated transcript (or an empty file) that looks like a complete one.
- ask_at_end: the summary request is sent as a new user message after a user message that
  ends in tool results; the API merges them, but the cached prefix then ends one block sooner.
- compaction_failed: an API error during the summary call, or a full disk, ends the turn with
  a traceback.
- announce / announce_cleared: the user does not see what each layer did, nor that a summary
  over COMPACT_THRESHOLD will not be compacted again until the context grows; the session page
  (session_page.py) has no marks where the layers acted.
"""

import os
import time
from pathlib import Path

from harness.config import api_error_line
from harness.errors import reason
from harness.sdk import anthropic

__all__ = ["save_new", "ask_at_end", "compaction_failed", "announce", "announce_cleared"]


def save_new(folder: Path, stem: str, lines) -> Path:
    """Write lines to folder/<stem>_<time>_<n>.jsonl, whole or not at all, never over another.

    The name has the same length for the first of a second and the second of a second, so
    the summary message that names it (and the token counts after it) do not depend on when
    two compactions fall.

    The text goes to a temp file first; os.link then gives it its name only if that name is
    free. On any failure the temp file is removed, so no partial transcript is left behind.
    """
    folder.mkdir(exist_ok=True)
    tmp = folder / f".{stem}.tmp-{os.getpid()}"
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.writelines(lines)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for n in range(1, 1000):
            path = folder / f"{stem}_{stamp}_{n}.jsonl"   # one length, whatever the second
            try:
                os.link(tmp, path)
                return path
            except FileExistsError:
                continue
        raise FileExistsError(f"too many transcripts named {stem}_{stamp}*")
    finally:
        tmp.unlink(missing_ok=True)


def ask_at_end(view: list, text: str) -> list:
    """view with a text block added to its last user turn (or a new user turn after an assistant)."""
    ask = {"type": "text", "text": text}
    last = view[-1]
    if last["role"] != "user":
        return view + [{"role": "user", "content": [ask]}]
    content = last["content"]
    content = content if isinstance(content, list) else [{"type": "text", "text": content}]
    return view[:-1] + [{**last, "content": content + [ask]}]


def compaction_failed(exc: Exception, folder: Path, show_note, path=None) -> bool:
    """One line for the user; the history is left exactly as it was. Returns False (not compacted)."""
    if isinstance(exc, anthropic.APIError):
        why = api_error_line(exc)
    elif isinstance(exc, OSError):
        why = f"cannot save the transcript in {folder}/ ({reason(exc)})"
    elif isinstance(exc, ValueError):
        why = str(exc)
    else:
        raise exc
    verb = "skipped" if isinstance(exc, OSError) else "failed"   # skipped: the summary was not asked for
    saved = f" · transcript {path}" if path else ""   # the summary failed, the transcript was saved
    show_note(f"[compaction {verb}, history kept: {why}{saved}]")
    return False


def announce_cleared(count: int, tokens: int, show_note) -> None:
    """Layer 1 cleared a batch: a note for the user, a mark for the session page."""
    from harness.session.record import RECORD
    what = (f"{count} old tool results (or inputs) are now placeholders" if count > 1
            else "an old tool result is now a placeholder")
    show_note(f"  [micro_compact: {what} (about {tokens:,} tokens cleared); "
              "the history keeps every result]")
    RECORD.cleared(count, tokens)


def announce(before: int, after: int, threshold: int, summary: str, path: Path, show_note) -> None:
    """Layer 2 compacted: a note (and a warning if the summary alone is over the threshold)."""
    from harness.session.record import RECORD
    show_note(f"[compacted: {before:,} → {after:,} tokens · transcript {path}]")
    if after > threshold:
        show_note(f"[the summary alone is over COMPACT_THRESHOLD ({after:,} > {threshold:,} tokens): "
                  "no new compaction until the context grows by half that; raise COMPACT_THRESHOLD]")
    RECORD.compacted(before, after, summary, path)
