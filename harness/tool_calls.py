"""What happens around each tool call of s03's run_tool_calls (and so s06's and s07's).

The lesson runs a call and builds its tool_result; this module does the rest, through the run
(harness/run.py) the loop was given. Without each piece:
- kept(): the user does not see the result; the session page cannot say which calls grew the
  context; and a result is logged only with its whole batch, so a kill -9, a closed terminal or
  Ctrl-C mid-batch loses the calls that ran, and --continue runs them again.
- clean_text in kept(): output that is not UTF-8 (a file name in .tasks/) holds lone
  surrogates, which make every later request fail; and the API refuses an empty result.
- keep_on_ctrl_c() and ToolsInterrupted: Ctrl-C mid-batch loses every result of it; with them
  the REPL gets one per call (pairing.after_ctrl_c), so the history stays valid and the model
  does not redo the work.
"""

from contextlib import contextmanager

from harness import pairing, terminal
from harness.clean import clean_text


class ToolsInterrupted(KeyboardInterrupt):
    """Ctrl-C in the middle of a batch. results: a tool_result for every tool_use of the
    assistant message, in order, for the REPL to append after it."""

    def __init__(self, results: list):
        super().__init__("tool calls interrupted")
        self.results = results


def kept(run, call: dict, result: dict) -> dict:
    """The tool_result s03 built, made sendable, shown, recorded in the run and logged."""
    output = clean_text(result["content"] or "(no output)")
    result = {**result, "content": output}
    terminal.show_tool_result(output, result.get("is_error", False))
    run.recorder.tool(call["name"], call["input"], output, result.get("is_error", False))
    run.log.tool_result(result)           # on disk now: a kill -9 does not lose it
    return result


@contextmanager
def keep_on_ctrl_c(run, calls: list, results: list):
    """Around a batch: on Ctrl-C, raise ToolsInterrupted with a result for every call; the
    one that was running is on the session page too (it may have acted)."""
    try:
        yield
    except KeyboardInterrupt:
        answered = pairing.after_ctrl_c(calls, results)
        if len(results) < len(calls):
            running = calls[len(results)]
            run.recorder.tool(running["name"], running["input"], pairing.INTERRUPTED, True)
        raise ToolsInterrupted(answered) from None
