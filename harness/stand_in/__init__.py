"""A loopback stand-in for the Anthropic Messages API, replying from a script.

The tests and every lesson's `--demo` point the real `anthropic` client at it
(ANTHROPIC_BASE_URL=http://127.0.0.1:<port>), so the real SDK, the real loop and the real
tools run, with no key and no network.

    script = [reply(text("Hi"), tool("bash", {"command": "ls"})), reply(text("Done"))]
    with StandInAPI(script) as api:   # also summary=, min_cache_tokens=1024, clock=time.monotonic,
                                      #   context_window=1_000_000, max_output=128_000,
                                      #   clearing="kept" (edits.py)
        ...                            # api.url, .requests, .headers, .violations, .billing()

One module a part, each opening with what it promises (read them in this order):
    script   the steps a test writes (reply, text, tool, message, error, raw)
    rules    what the real API refuses, in its words (a new request field or block goes here)
    edits    the API's own context management: clearing, compaction and its summary step
    usage    token counts (4 characters of a block's JSON), the prompt cache, the bill
    sse      a message as server-sent events ("stream": true)
    server   the HTTP server that plays the script: StandInAPI
"""

from harness.stand_in.server import StandInAPI

__all__ = ["StandInAPI"]
