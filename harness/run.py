"""One run of a lesson: the client it talks to and what it keeps, on one object.

Relied on by all three lessons: cli makes a Run where a run starts and hands it to the loop,
which passes it to s03's ask_model and run_tool_calls (and s06's layers to compaction.py).
Tests and benchmarks make their own: a fresh Run is a fresh start, nothing to reset.
Without each piece:
- client: the loop has no model to ask (None: no key; the REPL's commands still work).
- recorder (session/recorder.py): the session page, /context and /cost have nothing to show.
- log (session/log.py): --continue finds nothing, and a failed turn cannot tell which calls
  of its last reply ran. Without a file (SessionLog()) it keeps the bookkeeping only.
- saved (spill.SavedTexts): pruning, here or in another process, removes files that layer
  1's placeholders still name.
- screen (terminal.Screen): on a terminal the answer, already shown live, shows twice; the
  paths --demo names (in demo/) are not the user's.
- secrets: the credentials from ./.env; in os.environ, every command the agent runs would
  inherit them.
- api_context: --api-context's Setting (harness/api_context.py), or None: the lesson's
  layers manage the context. The client then sends to the beta API, so loops need no branch.
- model: MODEL_ID as the run started, for every request.
- carried: what a turn that ended must still tell the model (s07's board after the API's
  summary), in a message of its own (cli).
- after_summary: what the lesson adds after a summary (s07's board), read again when a session
  is resumed: the board it holds may have changed since (a person finished a task), and the
  model would redo it.
"""

import functools
import types

from harness import config, spill, terminal
from harness.session import log as session_log
from harness.session import recorder as recorders


class Run:
    """One run: what it talks to (client, model, and how: api_context) and what it keeps
    (recorder, log, saved, screen, carried)."""

    def __init__(self, client=None, lesson: str = "", log=None, secrets=None):
        self.api_context = None       # --api-context's Setting (use_api_context), or None
        self.client = client
        self.model = None             # MODEL_ID, read when the run starts (None: read it now)
        self.recorder = recorders.Recorder(lesson)
        self.log = log if log is not None else session_log.SessionLog()
        self.saved = spill.SavedTexts()
        self.screen = terminal.Screen()
        self.secrets = secrets or {}
        self.carried = []             # text blocks for a message of their own after the turn
        self.after_summary = None     # s07's board_message: attach(run), after any summary
        self.lesson = lesson
        self.agent = ""               # s07's --name or AGENT_NAME (board.choose), if given
        self.board = ""               # s07's board as shown, no password: --continue compares

    def about(self) -> dict:
        """Whose this run's session is, for the first line of its log: --continue names it."""
        about = {"lesson": self.lesson}
        if self.agent:
            about["agent"] = self.agent
        if self.board:
            about["board"] = self.board
        return about

    @property
    def client(self):
        return self._client

    @client.setter
    def client(self, client) -> None:
        # With --api-context, the same client, sending to the beta Messages API.
        if client is not None and self.api_context is not None:
            client = self.api_context.client(client)
        self._client = client

    @property
    def model(self) -> str:
        return self._model or config.model_id()

    @model.setter
    def model(self, model) -> None:
        self._model = model

    def use_api_context(self, mode, keep: int, attach=None) -> None:
        """--api-context clear|compact (None: the lesson's layers manage the context).
        attach(run): text to add after the API's summary, as after layer 2's (s07's board)."""
        self.after_summary = attach
        if mode is None:
            return
        from harness import api_context
        self.api_context = api_context.setting(mode, keep)
        if attach is not None:
            self.api_context.after = functools.partial(attach, self)
        self.client = self._client

    def resumed(self, messages: list) -> list:
        """The part of a resumed history this run goes on from (the API's last summary on),
        its newest board (after a summary) read again."""
        if session_log.holds_compaction(messages):
            from harness import api_context
            messages = api_context.resumed(messages, self.api_context)
        if self.after_summary is None:
            return messages
        from harness.board import message
        # Read with no screen: its note ("added after the summary") is for a new summary.
        fresh = functools.partial(self.after_summary, types.SimpleNamespace(screen=None))
        resumed = message.refreshed(messages, fresh)
        if resumed is not messages:
            terminal.show_note("[the board in the resumed conversation was read again: it may "
                               "have changed since]")
        return resumed

    def close(self) -> None:
        """The end of the run: its log closed (removed if empty), its pins let go."""
        self.log.close()
        self.saved.release()
