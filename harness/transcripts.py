"""Layer 2's record and what it says: the transcript on disk, the summary message, the notes.

Relied on by s06's auto_compact (and so by s07's compact_with_board). Without each piece:
- save: two compactions in one second overwrite each other's transcript, and a full disk
  leaves a truncated transcript (or an empty file) that looks like a complete one. Written
  through harness/writer.py: a link planted at its old temporary name (.transcript.tmp-<pid>)
  received the whole conversation, and the transcript was readable by every local user.
- ask_at_end: the summary request is sent as a new user message after a user message that
  ends in tool results; the API merges them, but the cached prefix then ends one block sooner.
- summary_message: the model, after a compaction, does not know where the details went.
- compaction_failed: an API error during the summary call, or a full disk, ends the turn with
  a traceback.
- announce: the user does not see what layer 2 did, nor that a summary over
  COMPACT_THRESHOLD will not be compacted again until the context grows; the session page
  (session/page.py, through the run's recorder) has no mark where it acted. It names the
  transcript as the user finds it (run.screen.where): `demo/.transcripts/…` during --demo.
"""

import json
import time
from pathlib import Path

from harness import terminal, writer
from harness.errors import EndpointError, reason


def save(folder: Path, messages: list) -> Path:
    """The history as JSONL, one message per line, in a new transcript_<time>_<n>.jsonl."""
    lines = (json.dumps(m, ensure_ascii=False) + "\n" for m in messages)
    return save_new(folder, "transcript", lines)


def summary_message(summary: str, path: Path) -> str:
    """The history's new first message: where the details are, the summary, and go on."""
    return (f"[This conversation was compacted to save context. The full transcript is in "
            f"{path}.]\n\n{summary}\n\nContinue the work from here.")


def save_new(folder: Path, stem: str, lines) -> Path:
    """Write lines to folder/<stem>_<time>_<n>.jsonl, whole or not at all, never over another.

    The name has the same length for the first of a second and the second of a second, so
    the summary message that names it (and the token counts after it) do not depend on when
    two compactions fall.

    writer.numbered writes a temporary file (a random name, never through a link planted
    there), then gives it the first free name; on any failure nothing is left behind. The
    file is readable by this user alone: it holds the whole conversation.
    """
    data = "".join(lines).encode("utf-8")    # text that cannot be stored fails before a file
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return writer.numbered(folder, f"{stem}_{stamp}", ".jsonl", data, writer.PRIVATE)


def ask_at_end(view: list, text: str) -> list:
    """view with a text block added to its last user turn (or a new user turn after an
    assistant one)."""
    ask = {"type": "text", "text": text}
    last = view[-1]
    if last["role"] != "user":
        return view + [{"role": "user", "content": [ask]}]
    content = last["content"]
    content = content if isinstance(content, list) else [{"type": "text", "text": content}]
    return view[:-1] + [{**last, "content": content + [ask]}]


def compaction_failed(exc: Exception, folder: Path, path=None) -> bool:
    """One line for the user; the history is left exactly as it was. Returns False."""
    if isinstance(exc, OSError):
        why = f"cannot save the transcript in {folder}/ ({reason(exc)})"
    elif isinstance(exc, (ValueError, EndpointError)):
        why = str(exc)
    else:
        raise exc
    # skipped: the summary was not asked for; failed: it was, and the transcript is saved
    verb = "skipped" if isinstance(exc, OSError) else "failed"
    saved = f" · transcript {path}" if path else ""
    terminal.show_note(f"[compaction {verb}, history kept: {why}{saved}]")
    return False


def announce(run, before: int, after: int, threshold: int, summary: str, path: Path,
             counted=None) -> None:
    """Layer 2 compacted: a note (and a warning if the summary alone is over the threshold),
    and a mark in run.recorder for the session page. Both sizes are what the next request
    sends, system prompt and tools included; counted is the part of `before` the API counted
    (None: all of it estimated)."""
    terminal.show_note(f"[compacted: {before:,} → ~{after:,} tokens (estimated: the next call "
                       f"counts it) · transcript {run.screen.where(path)}]")
    if after > threshold:
        terminal.show_note(f"[the summary alone is over COMPACT_THRESHOLD ({after:,} > "
                           f"{threshold:,} tokens): no new compaction until the context grows "
                           "by half that; raise COMPACT_THRESHOLD]")
    run.recorder.compacted(before, after, summary, path, counted=counted)
