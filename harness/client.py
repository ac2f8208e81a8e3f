"""The Anthropic client, made from the settings (config.py): only when a run starts.

Relied on by cli.py (each lesson's main(), and --demo's client of its stand-in); it asks
env_file.py for the words when there is no key. It loads with the command line, so importing a
lesson does not load it. Without each piece:
- make_client and check_base_url: a typo'd API_TIMEOUT (or inf), a missing key or a base URL
  without its http:// fails at the first request, deep in the SDK, or says "cannot reach" while
  the server is up; one a parser reads two ways (alice:2024/pw@host) is dialled at another
  host; a local server on 127.0.0.1 is sent through HTTP_PROXY and never answers.
- _http_client: a proxy the client cannot use (ALL_PROXY=socks5://, from ssh -D, without
  socksio), an SSL_CERT_FILE a moved venv left behind, or NO_PROXY=[::1] is two tracebacks at
  start. _capped_retry_wait (RETRY_WAIT_MAX): a 429's Retry-After: 99999 waits 28 hours.
"""

import os
from urllib.parse import urlsplit

from harness import config, errors, excerpt
from harness.errors import NoKey, SetupError
from harness.sdk import anthropic, httpx

MAX_RETRIES = 2                      # for 429/5xx and dropped connections; the SDK waits between
                                     # tries, as a server's Retry-After asks, up to:
RETRY_WAIT_MAX = 60                  # seconds (Retry-After: 99999 hung a run for a day, silently)
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def check_base_url(url: str) -> None:
    """Refuse a base URL the SDK cannot use, in one line saying how to write it."""
    shown = config.shown_url(url)
    if any(c.isspace() or not c.isprintable() for c in url):
        raise SetupError(f"ANTHROPIC_BASE_URL={shown!r} holds a space, a tab, a line break or "
                         "another character no URL has: write it without (a value in quotes "
                         "in .env keeps them)")
    try:
        parts = urlsplit(url)
        port = parts.port           # a port out of range or not a number raises here
    except ValueError as exc:       # e.g. "Invalid IPv6 URL" for http://[::1:8080
        # The parser's words may quote a piece of a password it misread as the port.
        why = "a / ? # or @ in its password must be written %2F %3F %23 %40"
        raise SetupError(f"ANTHROPIC_BASE_URL={shown!r} is not a valid URL "
                         f"({why if config.password_in(url) else exc}); "
                         "write it like http://127.0.0.1:8080 or http://[::1]:8080") from None
    if port == 0:
        raise SetupError(f"ANTHROPIC_BASE_URL={shown!r} names port 0; give the server's port")
    # alice:2024/pw@host: a password to password_in (and hidden), host and port to the client.
    if config.password_in(url) and parts.password not in config.password_in(url):
        raise SetupError(f"ANTHROPIC_BASE_URL={shown!r} reads two ways: write a / ? # or @ in "
                         "its password as %2F %3F %23 %40, and an @ after the host as %40")
    if "://" not in url:
        raise SetupError(f"ANTHROPIC_BASE_URL={shown!r} has no scheme: write http://{shown} "
                         f"(or https://{shown})")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SetupError(f"ANTHROPIC_BASE_URL={shown!r} must be http:// or https:// and a host, "
                         "like http://127.0.0.1:8080")


def _check_key(name: str, key: str) -> None:
    """A key pasted with its line end, a space, or a typographic character (a word processor's
    dash): the HTTP library refuses the header, and the SDK calls that a connection error."""
    if any(c.isspace() or not (c.isascii() and c.isprintable()) for c in key):
        raise SetupError(f"{name} holds a space, a tab, a line break or a character no key has "
                         "(a key is plain ASCII): remove it where you set it")


def make_client(base_url=None, api_key=None, secrets=None):
    """The Anthropic client, or SetupError before any request. secrets: load_env's."""
    auth_token = None
    secrets = secrets or {}
    if api_key is None:
        api_key = config.secret("ANTHROPIC_API_KEY", secrets)
        auth_token = None if api_key else config.secret("ANTHROPIC_AUTH_TOKEN", secrets)
        if not (api_key or auth_token):
            from harness import env_file    # with the command line, which has loaded it
            raise NoKey(env_file.no_key_message())
        name = "ANTHROPIC_API_KEY" if api_key else "ANTHROPIC_AUTH_TOKEN"
        _check_key(name, api_key or auth_token)
    url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
    if url:
        check_base_url(url)
    timeout = config.api_timeout()
    options = dict(api_key=api_key, auth_token=auth_token, base_url=url, max_retries=MAX_RETRIES,
                   timeout=anthropic.Timeout(timeout, connect=min(errors.CONNECT_TIMEOUT, timeout)))
    # A local server: never through HTTP_PROXY or ALL_PROXY.
    local = bool(url) and urlsplit(url).hostname in LOOPBACK
    options["http_client"] = _http_client(trust_env=not local)
    return anthropic.Anthropic(**options)


# What the SDK's HTTP client reads from the environment besides the proxies.
CLIENT_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "NO_PROXY", "no_proxy")


def _http_client(trust_env: bool):
    """The SDK's HTTP client, made here: a proxy it cannot use (socks5:// without socksio, an
    unknown scheme), a missing SSL_CERT_FILE or a NO_PROXY it cannot parse is then one
    SetupError naming it, not a traceback and a second one from the half-made client's
    __del__."""
    try:
        return anthropic.DefaultHttpxClient(trust_env=trust_env,
                                            event_hooks={"response": [_capped_retry_wait]})
    except (ImportError, ValueError, OSError, httpx.InvalidURL) as exc:
        raise SetupError(_client_refused(exc)) from None


def _client_refused(exc: Exception) -> str:
    """The line for a client that could not be made, naming the settings it read."""
    proxies = [f"{name}={config.shown_url(os.environ[name])}" for name in config.PROXY_VARIABLES
               if os.environ.get(name)]
    if isinstance(exc, ImportError):
        return (f"cannot use the proxy in {', '.join(proxies)}: SOCKS needs `pip install "
                "socksio`; or unset it")
    others = [f"{name}={os.environ[name]}" for name in CLIENT_VARIABLES if os.environ.get(name)]
    if isinstance(exc, ValueError) and proxies:
        return (f"cannot use the proxy in {', '.join(proxies)}: its scheme is not http, https "
                "or socks5; or unset it")
    why = errors.reason(exc) if isinstance(exc, OSError) else excerpt.one_line(exc, 120)
    return (f"cannot make the HTTP client from {', '.join(proxies + others) or 'the defaults'}: "
            f"{why}; fix or unset it")


def _capped_retry_wait(response) -> None:
    """Before the SDK reads a reply's Retry-After (or retry-after-ms): a wait over RETRY_WAIT_MAX
    is cut to it; one given as a date is dropped (the SDK's own backoff then applies)."""
    for name, most in (("retry-after-ms", RETRY_WAIT_MAX * 1000), ("retry-after", RETRY_WAIT_MAX)):
        asked = response.headers.get(name)
        if asked is None:
            continue
        try:
            too_long = not float(asked) <= most      # nan and inf too
        except ValueError:
            del response.headers[name]
            continue
        if too_long:
            response.headers[name] = str(most)
