"""What happens around each tool call of s03's run_tool_calls (and so s06's and s07's).

The lesson runs a call through its dispatch table and builds its tool_result; this module does
the rest, through the run (harness/run.py) the loop was given. Without each piece:
- kept(): the user does not see the result; the session page (run.recorder) cannot say
  which calls made the context grow; and a result reaches the session log (run.log) only
  when the whole batch is done, so a kill -9, a closed terminal or Ctrl-C in the middle of a
  batch loses the calls that already ran, and --continue runs them again.
- clean_text in kept(): a file name or a command's output that is not UTF-8 (a file in
  .tasks/) holds lone surrogates; in the history, they make every later request fail. And
  the API refuses an empty result.
- keep_on_ctrl_c() and ToolsInterrupted: Ctrl-C in the middle of a batch would lose every
  result of it. Instead the REPL gets one result per call (pairing.after_ctrl_c): those that
  ran, the one that was running ("interrupted while it ran; it may have acted": it may have
  written a file), and the rest ("not run"), so the history stays valid and the model does
  not redo the work.
"""

from contextlib import contextmanager

from harness import pairing, terminal
from harness.clean import clean_text


class ToolsInterrupted(KeyboardInterrupt):
    """Ctrl-C in the middle of a batch of tool calls.

    results: one tool_result block for EVERY tool_use of the assistant message, in order. The
    REPL appends them after that message, so what was done is kept and the history is valid.
    """

    def __init__(self, results: list):
        super().__init__("tool calls interrupted")
        self.results = results


def kept(run, call: dict, result: dict) -> dict:
    """The tool_result s03 built for a call, made sendable, shown, recorded in the run, and
    logged at once."""
    # The API refuses an empty result. A file name or a command's bytes that are not UTF-8
    # arrive as lone surrogates: mended here, where every result passes, or the next request
    # could not be encoded.
    output = clean_text(result["content"] or "(no output)")
    result = {**result, "content": output}
    terminal.show_tool_result(output, result.get("is_error", False))
    run.recorder.tool(call["name"], call["input"], output, result.get("is_error", False))
    run.log.tool_result(result)           # on disk now: a kill -9 does not lose it
    return result


@contextmanager
def keep_on_ctrl_c(calls: list, results: list):
    """Around a batch: on Ctrl-C, raise ToolsInterrupted with a result for every call."""
    try:
        yield
    except KeyboardInterrupt:
        raise ToolsInterrupted(pairing.after_ctrl_c(calls, results)) from None
