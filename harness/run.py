"""One run of a lesson: the client it talks to and what it keeps, on one object.

Relied on by all three lessons: cli makes a Run where a run starts (a one-shot run, the REPL,
--demo, --continue) and hands it to the lesson's loop as its second parameter. The loop
passes it on to s03's ask_model and run_tool_calls, which show, record and log each model call
and tool call through it; s06's layers give it to compaction.py, which records what
they did. Tests and benchmarks make their own (Run(client)): a fresh Run is what a new
process starts with, so there is nothing to reset. Without each piece:
- client: the loop has no model to ask (None: no key; the REPL's commands still work).
- recorder (session/recorder.py): the session page, /context and /cost have nothing to show.
- log (session/log.py): --continue finds nothing, and a failed turn cannot tell which calls
  of its last reply ran. Without a file (SessionLog()) it keeps the bookkeeping only.
- saved (spill.SavedTexts): making room for a new saved result, in this process or another,
  removes files that layer 1's placeholders still name. close() lets its pins go.
- screen (terminal.Screen): on a terminal the final answer, already shown live, is shown
  twice; and during --demo, which works in demo/, the paths it names are not the user's.
- secrets: the credentials read from ./.env (config.load_env), for the client; put in
  os.environ instead, they would be inherited by every command the agent runs.
- api_context: s06's --api-context (harness/api_context.py), set by its start() through
  use_api_context(); None: the lesson's own layers manage the context. The client property
  then sends every request to the beta Messages API, so the loops need no branch for it.
  Its attach (s07's board, as after layer 2's summary) follows the API's summary too.
- model: MODEL_ID as the run started, for every request s03's ask_model makes.
- carried: what a turn that ended must still tell the model (s07's board after the API's own
  summary), in a message of its own after the turn (cli).
Kept in module-level singletons, as they were, two runs in one process (the test suite, a
second main()) shared one record, one log and one set of pins, each reset by hand.
"""

import functools

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
        """--api-context clear|compact (s06's settings): the API manages the context
        (harness/api_context.py, loaded only then). None: the lesson's own layers do.
        attach(run): text to add after the API's summary, as after layer 2's (s07's board)."""
        if mode is None:
            return
        from harness import api_context
        self.api_context = api_context.setting(mode, keep)
        if attach is not None:
            self.api_context.after = functools.partial(attach, self)
        self.client = self._client

    def resumed(self, messages: list) -> list:
        """The part of a resumed history this run goes on from: a session the API compacted
        goes on from its summary (harness/api_context.py)."""
        if not session_log.holds_compaction(messages):
            return messages
        from harness import api_context
        return api_context.resumed(messages, self.api_context)

    def close(self) -> None:
        """The end of the run: its log closed (one that holds nothing is removed), its pins
        let go (the next prune, in any process, may remove the files they kept)."""
        self.log.close()
        self.saved.release()
