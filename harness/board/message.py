"""s07's board as a message of the conversation: where it sits in a text, and the same board
read again in its place. Loaded when used: by --continue (run.py) and the session page
(session/blocks.py); importing s07 does not load it.

After a compaction s07 adds the board, read fresh, between board.BOARD_START and BOARD_END.
Without each piece:
- board_span: /context and the session page would count the board as the summary's words;
  it looks for the board as s07 writes it, or a prompt naming <task-board> was resumed with
  all that followed the tag replaced by the board.
- refreshed(): a resumed session (--continue) showed the model the board as it was at its
  compaction, labelled just read, though a person had finished a task since. Only a board
  s07 added is read again: one in s06's summary message, or a text block of its own (after
  the API's summary); a board a user pasted into a prompt was replaced, their words lost.
"""

from harness import board, compaction


def refreshed(messages: list, fresh) -> list:
    """messages, the newest board s07 added to them (in s06's summary message, or a text block
    of its own) replaced by fresh(), the board read now; the same list if they hold none.
    Nothing is changed in place: the list came from the session log."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str) and content.startswith(compaction.SUMMARY_OPENING):
            new = _board_now(content, fresh)
        elif isinstance(content, str):
            new = None                      # a prompt: as the user wrote it
        else:
            new = _blocks_board_now(content, fresh)
        if new is not None:
            return messages[:index] + [{**message, "content": new}] + messages[index + 1:]
    return messages


# How s07's board_message opens the board: a prompt that only names the tag is no board.
OPENING = board.BOARD_START + "\nThe task board"


def board_span(text: str):
    """(start, end) of s07's board in text, its tags included (to the text's end if its end
    tag is missing: cut short); None if text holds none."""
    # The last: a summary may quote an older board; s07 adds the one read now at the end.
    start = text.rfind(OPENING)
    if start < 0:
        return None
    end = text.find(board.BOARD_END, start)
    return start, len(text) if end < 0 else end + len(board.BOARD_END)


def _board_now(text: str, fresh):
    """text, its board replaced by fresh(); None if it holds none."""
    span = board_span(text)
    if span is None:
        return None
    return text[:span[0]] + fresh() + text[span[1]:]


def _blocks_board_now(blocks, fresh):
    """A message's blocks, the last block that is a board replaced; None if none is one."""
    if not isinstance(blocks, list):
        return None
    for place in range(len(blocks) - 1, -1, -1):
        block = blocks[place]
        if isinstance(block, dict) and str(block.get("text")).startswith(OPENING):
            text = _board_now(block["text"], fresh)
            if text is not None:
                return blocks[:place] + [{**block, "text": text}] + blocks[place + 1:]
    return None
