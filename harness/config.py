"""Configuration: every lesson's main() reads its settings through here (client.py makes the
client from them).

Relied on by all three lessons (through cli.run_cli) and by the tests. Without each piece:
- child_env and hide_from_commands: `env` shows the model (and so the API) the API key, the
  board's password (TASK_BOARD, or a DATABASE_URL or PGPASSWORD that holds it), a copy of the
  key under another name, and a gateway's password in ANTHROPIC_BASE_URL (http://alice:PW@host)
  or a proxy's in HTTPS_PROXY and the like.
- shown_url: an unreachable gateway's error line prints its password. without_secrets: a
  gateway's 401 that quotes the key it was given prints the key.
- MAX_TIMEOUT: API_TIMEOUT=1e10 overflows the clock at the first call, blamed on the network.
- api_error_line: an API error's line does not name the URL, API_TIMEOUT and MODEL_ID used.
- positive_int: MAX_STEPS=abc is a traceback, not one line.
- price, from DEFAULT_PRICE (the one place the default model's list price is): /cost and the
  session page give money only to a user who looked the price up.
- check_numbers: a bad PRICE_PER_MTOK, CONTEXT_WINDOW or API_TIMEOUT is refused only where it
  is used (/cost, after the work), not in one line before anything runs.
- TRANSCRIPTS: the folders of spill's saved results, the session log and page and cli's history
  would be named apart, and one renamed would scatter a run's files over two.
Nothing runs at import, and the SDK loads when first touched (harness/sdk.py). The .env files
are read by env_file.py, which loads with the command line.
"""

import math
import os
import re
from pathlib import Path
from typing import NamedTuple, Optional
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from harness import errors, excerpt
from harness.errors import SetupError

DEFAULT_MODEL = "claude-sonnet-5-5"  # any model id works; MODEL_ID overrides it
# DEFAULT_MODEL's list price, US dollars a million tokens in and out: PRICE_SOURCE, PRICE_READ
DEFAULT_PRICE = (2.0, 10.0)
PRICE_SOURCE = "platform.claude.com/docs/en/models/sonnet-5-5/overview"   # Anthropic's model page
PRICE_READ = "2026-12-06"            # the day DEFAULT_PRICE was read there: list prices change
DEFAULT_WINDOW = 1_000_000           # tokens the default model reads (CONTEXT_WINDOW for another)
DEFAULT_TIMEOUT = 300                # API_TIMEOUT's default, in seconds: local models are slow
MAX_TIMEOUT = 86_400                 # API_TIMEOUT's largest, a day: 1e10 overflowed the clock
SECRETS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")   # for the client; no command needs them
HARNESS_ONLY = SECRETS + ("TASK_BOARD",)   # and the board's address, which may hold its password
# Characters: a secret this long (an API key) is hidden wherever a variable holds it; a shorter
# one ("postgres" is a common password and a common word) only where it is the whole value,
# a URL's :password@ or a password=, so that PATH=/usr/lib/postgresql/... is kept.
LONG_SECRET = 16
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY",
                   "http_proxy")
# What a run keeps, in the folder it runs in: one folder, so a user finds (or deletes) all of it.
TRANSCRIPTS = Path(".transcripts")


# ---------------------------------------------------------------- configuration

def secret(name: str, secrets: dict) -> str | None:
    """A credential: the environment's (unless empty), else the .env's (load_env's secrets)."""
    return os.environ.get(name) or secrets.get(name) or None


_LEARNT_SECRETS = set()   # secrets learnt as the harness runs: the board's password, .env's key


def hide_from_commands(value: str) -> None:
    """From now on, no command gets a variable that holds this secret, as it is or
    percent-encoded (as a URL holds it). The board calls it with its password."""
    if value:
        _LEARNT_SECRETS.update({value, quote(value, safe="")})


def without_secrets(text: str) -> str:
    """text with the key, the token and each secret hide_from_commands learnt as ***: an
    endpoint's refusal may quote the key it was given. A value shorter than LONG_SECRET (a
    local server's "x") is no secret, and replacing it would garble the line."""
    for value in _secrets():
        if value and len(value) >= LONG_SECRET:
            text = text.replace(value, "***")
    return text


def _secrets() -> list:
    """The key and the token from the environment, and what hide_from_commands learnt (the
    .env's key, the board's password)."""
    return [os.environ.get(name) for name in SECRETS] + sorted(_LEARNT_SECRETS)


def child_env() -> dict:
    """The environment for a command the agent runs: this one, less HARNESS_ONLY by name and
    any variable that holds the key, the token, a secret given to hide_from_commands or the
    password in ANTHROPIC_BASE_URL or a proxy's URL (the commands then go without that proxy:
    the model could read anything they are given). Kept: PGPASSFILE and PGSERVICEFILE (they
    say where a password is, and a command can read any file you can), and a DATABASE_URL of
    another database, which the user's own programs need."""
    hidden = _secrets()
    # A password or token in a URL: the gateway's, or a proxy's (`env` would show it).
    for name in ("ANTHROPIC_BASE_URL",) + PROXY_VARIABLES:
        hidden += _url_secrets(os.environ.get(name, ""))
    hidden = [value for value in hidden if value]
    env = {}
    for name, value in os.environ.items():
        if name in HARNESS_ONLY or any(_holds(value, s) for s in hidden):
            continue
        env[name] = value
    return env


def password_in(url: str) -> list:
    """The password a URL holds, as written (percent-encoded) and decoded; [] if none."""
    found = _userinfo(url)
    user, colon, password = found[1].partition(":") if found else ("", "", "")
    if not (colon and password):
        return []
    return [password, unquote(password)]


def _url_secrets(url: str) -> list:
    """password_in(url); else a token written as the URL's user, and a query value, each as
    long as a key (LONG_SECRET): a gateway may take one so. A short user (alice) is no secret."""
    found = password_in(url)
    info = _userinfo(url)
    if info and not found and len(unquote(info[1])) >= LONG_SECRET:
        found = [info[1], unquote(info[1])]
    for value in _query_values(url):
        found += [value, quote(value, safe="")]
    return found


def _query_values(url: str) -> list:
    """The values in url's query as long as a key (LONG_SECRET), decoded."""
    try:
        pairs = parse_qsl(urlsplit(url).query)
    except ValueError:                   # a URL no parser reads: check_base_url says so
        return []
    return [value for _, value in pairs if len(value) >= LONG_SECRET]


def _userinfo(url: str):
    """(scheme, user:password, what follows the @) of a URL with a userinfo, else None. One
    whose password holds a / ? # or @ not written %2F %3F %23 %40, as users write it, still
    counts (up to the last @), as the board's address reads it: hiding too much is the safe
    side, so host:8080/path@x reads as a password too."""
    found = _USERINFO.match(url)
    if found:
        return found["scheme"] or "", found["userinfo"], url[found.end():]
    scheme = _SCHEME.match(url)
    start = scheme.end() if scheme else 0
    at = url.rfind("@")
    user, colon, password = url[start:at].partition(":")
    if at < start or not colon or "/" in user:
        return None
    return url[:start], url[start:at], url[at + 1:]


def _holds(value: str, hidden: str) -> bool:
    """Whether a variable's value holds a secret (LONG_SECRET says how closely it looks)."""
    if len(hidden) >= LONG_SECRET:
        return hidden in value
    as_password = rf"(?i)password\s*=\s*['\"]?{re.escape(hidden)}(?=$|[\s&'\"])"
    return value == hidden or f":{hidden}@" in value or bool(re.search(as_password, value))


# scheme:// (if written), then the userinfo, up to the last @ before the path. Not urlsplit: a
# URL it cannot parse ("http://alice:pw@[::1") is still shown without its password.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_USERINFO = re.compile(rf"(?P<scheme>{_SCHEME.pattern})?(?P<userinfo>[^/?#]*)@")


def shown_url(url: str) -> str:
    """How every line, log and display names an endpoint: http://alice:PW@host as
    http://alice:***@host, a token as a user or a query value (_url_secrets) as ***; a URL
    without a secret as it is."""
    shown = url
    found = _userinfo(url)
    if found and password_in(url):
        scheme, userinfo, rest = found
        shown = f"{scheme}{userinfo.partition(':')[0]}:***@{rest}"
    elif found and len(unquote(found[1])) >= LONG_SECRET:       # a token as the user
        shown = f"{found[0]}***@{found[2]}"
    for value in _query_values(url):
        shown = shown.replace(quote(value, safe=""), "***").replace(value, "***")
    return shown


def model_id():
    return os.environ.get("MODEL_ID") or DEFAULT_MODEL


def api_timeout():
    raw = os.environ.get("API_TIMEOUT", "").strip()
    try:
        seconds = float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        seconds = 0
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT):   # nan compares false
        raise SetupError(f"API_TIMEOUT must be a positive number of seconds up to {MAX_TIMEOUT:,} "
                         f"(a day), got {raw!r} (for a very slow model, a large one such as 3600)")
    return seconds


def api_error_line(exc, client) -> str:
    """errors.describe_api_error, with the URL the client used, API_TIMEOUT and MODEL_ID."""
    where = str(client.base_url)
    return errors.describe_api_error(exc, shown_url(where), api_timeout(), model_id())


def positive_int(name: str, default: int, unit: str) -> int:
    """A whole number from the environment; empty is unset, anything else one clear line."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    # "²".isdigit() is True, and int("²") fails; int() refuses over 4,300 digits.
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18 or int(raw) < 1:
        raise SetupError(f"{name} must be a positive whole number of {unit}, got "
                         f"{excerpt.cut(raw, 40)!r}")
    return int(raw)


def context_window() -> int:
    """CONTEXT_WINDOW, else the default model's window (the API does not say it), in tokens."""
    return positive_int("CONTEXT_WINDOW", DEFAULT_WINDOW, "tokens")


def check_numbers(model: str) -> None:
    """Read every number setting (s06's COMPACT_THRESHOLD: in its start) before anything runs."""
    api_timeout()
    context_window()
    price(model)


# ---------------------------------------------------------------- the price

class Price(NamedTuple):
    """A million tokens' cost in and out (None: not priced), its unit ("$" for the list price,
    "" for yours: your currency), and words saying which price it is and where it came from."""
    input: Optional[float]
    output: Optional[float]
    unit: str
    said: str


def price(model: Optional[str] = None) -> Price:
    """The price a session is costed at: yours (PRICE_PER_MTOK, PRICE_PER_MTOK_OUT) if you set
    either; else DEFAULT_PRICE for DEFAULT_MODEL; else none (one made up for another model
    would be wrong), and the words say to set one. A bad value: SetupError naming it."""
    model = model or model_id()
    price_in, price_out = [_price_set(name, what) for name, what in (
        ("PRICE_PER_MTOK", "input"), ("PRICE_PER_MTOK_OUT", "output"))]
    if price_in is not None and price_out is not None:
        said = (f"at your PRICE_PER_MTOK={price_in:g} and PRICE_PER_MTOK_OUT={price_out:g} per "
                "million tokens")
    elif price_in is not None:
        said = (f"at your PRICE_PER_MTOK={price_in:g} per million input tokens; set "
                "PRICE_PER_MTOK_OUT to price the output")
    elif price_out is not None:
        said = (f"at your PRICE_PER_MTOK_OUT={price_out:g} per million output tokens; set "
                "PRICE_PER_MTOK to price the input")
    elif model == DEFAULT_MODEL:
        listed_in, listed_out = DEFAULT_PRICE
        return Price(listed_in, listed_out, "$",
                     f"at Anthropic's list price for {DEFAULT_MODEL}, ${listed_in:g} a million "
                     f"input tokens and ${listed_out:g} a million output tokens ({PRICE_SOURCE}, "
                     f"read {PRICE_READ}); PRICE_PER_MTOK and PRICE_PER_MTOK_OUT set your own")
    else:
        said = (f"none: MODEL_ID is {model}, which has no price here; set PRICE_PER_MTOK (and "
                "PRICE_PER_MTOK_OUT) to its price per million tokens")
    return Price(price_in, price_out, "", said)


def _price_set(name: str, what: str) -> Optional[float]:
    """A price you set, per million tokens; None when unset (or empty)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    # Digits and a point, as a price is written: float() also takes 1e308 (then /cost says inf),
    # -0, 1_000 and other scripts' digits.
    if not re.fullmatch(r"\d{1,9}(\.\d{1,9})?|\.\d{1,9}", raw, re.ASCII):
        raise SetupError(f"{name} must be a price per million {what} tokens, such as 3 or "
                         f"0.25; got {excerpt.cut(raw, 40)!r}")
    return float(raw)

