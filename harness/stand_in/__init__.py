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
    script   the steps a test writes (reply, text, tool, message, error, raw) and the
             summary requests answered without one
    rules    what the real API refuses, in its words: the request's fields, the tools, the
             history, cache_control, the betas and context_management, the context window
             (a new request field or content block, such as a beta's, is checked here)
    edits    the API's own context management (clearing, compaction): what the model reads
             of a request, and the summary step the server adds (where the docs are silent,
             the reading it takes)
    usage    how many tokens a request and a reply count (4 characters of a block's JSON),
             the prompt cache, and the bill (a new usage field is counted here)
    sse      a message as server-sent events ("stream": true) (a new event or delta goes here)
    server   the HTTP server that plays the script: StandInAPI
"""

from harness.stand_in.server import StandInAPI

__all__ = ["StandInAPI"]
