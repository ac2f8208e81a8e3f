"""Every error a user can meet, and the one line each becomes.

Relied on by every module that tells a user of a failure: cli prints these lines, the tools
return them to the model, the board and model_call raise them. Without each piece:
- SetupError: a setting to fix (a missing key, a bad MAX_STEPS) is a traceback, not one line
  and exit status 1.
- EndpointError: an endpoint that answers unlike the Messages API (HTML, other JSON, no
  content) or drops mid-reply is a traceback deep in the SDK.
- malformed / error_event: a stream that breaks the rules or sends an error mid-reply is a
  traceback, or a line that blames the key.
- describe_api_error: a traceback instead of one line saying what to fix; a base URL ending in
  /v1 (the SDK adds /v1/messages) gets a 404 blamed on MODEL_ID; a server that is not the
  Messages API (python -m http.server: 501 and HTML) is told to try again later; one that
  redirects in a loop is told to check the network; one that never opens a connection (an
  https:// URL to a plain server) is told to raise API_TIMEOUT, which changes nothing.
- _shown: a gateway's password (http://alice:PW@host) is printed in every line naming it.
- _error_message: a proxy's half-megabyte error is printed as one line; DETAIL_MAX cuts it.
- reason: "[Errno 28]" where "the disk is full" says what to do.
- did_you_mean: a misspelt flag, REPL command or /task word is refused with no hint.
- connect_problem: a PostgreSQL board that is down, refuses the password or lacks its database
  is a traceback, with the password in it; NO_DATABASE: a missing database was named as the
  URL spells it (my%20board; "(the default)" for ?dbname= or PGDATABASE), with a createdb
  command no shell runs as meant.
"""

import difflib
import errno
import json
import re
import shlex
from http import HTTPStatus
from urllib.parse import urlsplit

from harness import excerpt
from harness.sdk import anthropic, httpx

# Statuses the Messages API never answers with: nothing serves POST at that address (python -m
# http.server answers 501). Retrying will not change that.
NEVER_FROM_THE_API = (405, 501)
# Seconds to open a connection (at most API_TIMEOUT): a reachable server connects in far less.
CONNECT_TIMEOUT = 10.0
# Characters of an endpoint's own message in a line: a proxy's may be a page of stack trace.
DETAIL_MAX = 300
# The server's words for a database it lacks, named as libpq asked for it: decoded (my%20board
# is "my board"), from the URL's path, its dbname= or PGDATABASE, else the user's name.
NO_DATABASE = re.compile(r'database "(.+?)" does not exist', re.DOTALL)


class SetupError(Exception):
    """A configuration problem the user must fix; shown as one line, exit 1."""


class NoKey(SetupError):
    """No API key (nor token): a one-shot run stops; the REPL opens without a model."""


class EndpointError(Exception):
    """A failed model call the SDK raised no APIError for: an answer unlike the Messages API's,
    a connection dropped mid-reply, or a request holding text that cannot be encoded."""


# An OSError as a sentence a user can act on. By errno name: the numbers differ between systems.
REASONS = {errno.EACCES: "permission denied", errno.ENOSPC: "the disk is full",
           errno.EROFS: "the file system is read-only", errno.EDQUOT: "the disk quota is exceeded",
           errno.ENOTDIR: "a file is in the way where a folder should be",
           errno.ENOENT: "a folder on the way does not exist",
           errno.EEXIST: "a file of that name is in the way", errno.EISDIR: "it is a folder",
           errno.ENAMETOOLONG: "the file name is too long", errno.ELOOP: "too many symbolic links",
           errno.EFBIG: "the file is too large for the file system"}


def did_you_mean(word: str, known, prefix: str = "") -> str:
    """"; did you mean /cost?" for the known word closest to a misspelt one, else "". prefix:
    what the suggestion is written after ("/task " for /task's own words)."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {prefix}{close[0]}?" if close else ""


def reason(exc: OSError) -> str:
    """An OSError as a sentence, not an errno."""
    return REASONS.get(exc.errno, exc.strerror or str(exc))


def describe_api_error(exc, where: str, timeout: float, model: str) -> str:
    """One line saying what failed and what to do, naming where, API_TIMEOUT and MODEL_ID."""
    where = _shown(where).rstrip("/")
    status = getattr(exc, "status_code", None)
    detail = _error_message(exc)
    if isinstance(exc, anthropic.APITimeoutError) and isinstance(exc.__cause__,
                                                                 httpx.ConnectTimeout):
        # No connection (a TLS handshake never answered, say): API_TIMEOUT past the connect
        # timeout would change nothing.
        return (f"could not connect to the API at {where} within "
                f"{min(timeout, CONNECT_TIMEOUT):g}s, even after retries: check "
                "ANTHROPIC_BASE_URL (http or https?) and your network")
    if isinstance(exc, anthropic.APITimeoutError):
        return (f"the API at {where} did not answer within API_TIMEOUT={timeout:g}s, even after "
                "retries: try again later, or raise API_TIMEOUT for a slow model")
    if isinstance(exc, anthropic.APIConnectionError) and isinstance(exc.__cause__,
                                                                    httpx.TooManyRedirects):
        return (f"the endpoint at {where} redirects in a loop (or too often) for POST "
                "/v1/messages: check ANTHROPIC_BASE_URL; it must point at an Anthropic-"
                "compatible Messages API")
    if isinstance(exc, anthropic.APIConnectionError):
        return f"cannot reach the API at {where}: check ANTHROPIC_BASE_URL and your network"
    if status == 401:
        return (f"the API rejected the key (401 {detail}): check ANTHROPIC_API_KEY (or "
                "ANTHROPIC_AUTH_TOKEN)")
    if status == 403:
        return f"the key may not do this (403 {detail}): check the key's permissions"
    if status == 404 and urlsplit(where).path.rstrip("/").endswith("/v1"):
        return (f"not found (404 {detail}): ANTHROPIC_BASE_URL={where} ends in /v1, and the SDK "
                "adds /v1/messages itself: drop the /v1")
    if status in NEVER_FROM_THE_API or (status == 404 and not _from_the_api(exc)):
        return (f"the endpoint at {where} answered {status} {_phrase(status)} and "
                f"{_what_came(exc)} to POST /v1/messages: check ANTHROPIC_BASE_URL; it must "
                "point at an Anthropic-compatible Messages API")
    if status == 404:
        return f"not found (404 {detail}): check MODEL_ID={model!r} and ANTHROPIC_BASE_URL"
    if status == 429:
        return f"rate limited (429 {detail}) even after retries: wait a minute and try again"
    if status == 400 and "prompt is too long" in detail:
        # The API's words for a request past the window: every later prompt would be refused.
        return _too_long(detail)
    if status == 400:
        return f"the API refused the request (400 {detail})"
    if status is not None and status >= 500:
        return f"the API failed ({status} {detail}) even after retries: try again later"
    return f"the API call failed: {detail}"


def _too_long(detail: str) -> str:
    """How to go on from a request past the window. The API says the window ("> 200000
    maximum"): one under CONTEXT_WINDOW means the setting is wrong, and /compact, which fits
    the conversation to it, would be refused too; one equal to it, that the setting is right:
    s03 never summarises, or the newest part alone is too big (a batch of results, say)."""
    from harness.config import context_window
    said = f"the request no longer fits the model's window (400 {detail})"
    window, setting = re.search(r"> ?(\d{1,18}) maximum", detail), context_window()
    if window and int(window[1]) < setting:
        return (f"{said}: the model reads {int(window[1]):,} tokens, fewer than CONTEXT_WINDOW "
                f"({setting:,}): quit, then run again with CONTEXT_WINDOW={window[1]} "
                "and --continue, and layer 2 (s06, s07) summarises what fits (a prompt larger "
                "than that window must be shorter); /clear starts afresh")
    if window and int(window[1]) == setting:
        return (f"{said}: the harness counts with that window already (CONTEXT_WINDOW "
                f"{setting:,}), so the conversation outgrew it (s03 never summarises), or its "
                "newest part (a prompt, the last tool results) is too big on its own: /clear "
                "starts afresh (the session log keeps it all); in s06 and s07, /compact "
                "summarises what fits")
    return (f"{said}: set CONTEXT_WINDOW to the model's window, and layer 2 (s06, s07) acts "
            "before a request outgrows it; in the REPL, /compact summarises what fits and "
            "/clear starts afresh")


def _shown(where: str) -> str:
    """config.shown_url (imported here: config imports this module first)."""
    from harness.config import shown_url
    return shown_url(where)


def _error_message(exc):
    """The endpoint's words on one line (a proxy's may hold a stack trace), or "an HTML page"."""
    if _is_html(exc):
        return "an HTML page"
    message = str(exc)
    if _from_the_api(exc):
        message = str(exc.body["error"].get("message", message))
    # The key hidden before the cut: after it, a key quoted near the end would show its start.
    from harness.config import without_secrets     # here: config imports this module first
    return excerpt.one_line(without_secrets(message), DETAIL_MAX)


def _from_the_api(exc) -> bool:
    """Whether an error's body has the Messages API's shape: {"error": {"type", "message"}}."""
    body = getattr(exc, "body", None)
    return isinstance(body, dict) and isinstance(body.get("error"), dict)


def _is_html(exc) -> bool:
    response = getattr(exc, "response", None)
    kind = response.headers.get("content-type", "") if response is not None else ""
    body = getattr(exc, "body", None)
    return "html" in kind or (isinstance(body, str) and body.lstrip()[:1] == "<")


def _what_came(exc) -> str:
    """What an endpoint that is not the Messages API sent: in words, or its first words."""
    if _is_html(exc):
        return "an HTML page"
    body = getattr(exc, "body", None)
    if body is None or body == "":
        return "nothing else"
    return repr(excerpt.one_line(body if isinstance(body, str) else json.dumps(body), 100))


def _phrase(status: int) -> str:
    """The status's name: 501 Not Implemented (not what the server chose to say)."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "(a status HTTP does not define)"


def dropped(exc: Exception, where: str, timeout: float) -> str:
    """A connection lost in the middle of a streamed reply (the SDK does not wrap it)."""
    where = _shown(where)
    if "Timeout" in type(exc).__name__:
        return (f"the endpoint at {where} went silent in the middle of its reply for "
                f"API_TIMEOUT={timeout:g}s: the turn was abandoned; try again")
    why = excerpt.one_line(exc, 120)
    return (f"the connection to {where} dropped in the middle of the reply "
            f"({type(exc).__name__}: {why}): the turn was abandoned; try again")


def malformed(where: str, what: str) -> str:
    """A stream that breaks the Messages API's rules, naming what the endpoint sent."""
    return f"the endpoint at {_shown(where)} did not answer like the Messages API: it sent {what}"


def error_event(exc, where: str) -> str:
    """An error event in the middle of a streamed reply (overloaded_error, say)."""
    kind = exc.body["error"].get("type") if _from_the_api(exc) else "error"
    return (f"the endpoint at {_shown(where)} sent an error in the middle of the reply ({kind}: "
            f"{excerpt.one_line(_error_message(exc), 120)}): the turn was abandoned; try again")


def unsendable(exc: UnicodeEncodeError) -> str:
    """A request holding text that cannot be encoded as UTF-8."""
    bad = ascii(exc.object[exc.start:exc.end]) if isinstance(exc.object, str) else "?"
    return (f"the request could not be sent: the conversation holds text that is not valid Unicode "
            f"({bad}: {exc.reason}), such as half an emoji from a model or a byte that is not "
            "UTF-8")


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def connect_problem(exc: BaseException, name: str, hidden: tuple = ()) -> str:
    """One line for a failed connection to the board `name` (its password as ***). hidden: the
    password, as the URL has it and decoded, put as *** in libpq's message, which may quote it
    ('invalid percent-encoded token: "pa%zz"')."""
    text = str(exc)
    for secret in sorted(hidden, key=len, reverse=True):   # the longest first: a part of one
        text = text.replace(secret, "***")                 # must not leave the rest showing
    if "password authentication failed" in text:
        return (f"the PostgreSQL server refused the password for the board {name}: check the "
                "password (in the URL, PGPASSWORD, ~/.pgpass or the service file)")
    if "no password supplied" in text:
        return (f"the PostgreSQL server of the board {name} needs a password and none was given: "
                "put it in ~/.pgpass (or the file PGPASSFILE names), a service file, or the URL "
                "in TASK_BOARD")
    missing = NO_DATABASE.search(text)
    if missing:              # named as libpq asked for it, which the URL alone does not tell
        database = missing[1]
        return (f"the database {database!r} does not exist on the server of the board {name}: "
                f"create it (createdb {shlex.quote(database)}) or fix the URL")
    if "Connection refused" in text or "could not connect" in text or "timeout expired" in text:
        return (f"cannot reach the PostgreSQL server of the board {name}: is it running, and is "
                "the URL right?")
    why = first_line(text) if text.strip() else type(exc).__name__
    return f"cannot open the board {name}: {why}"
