"""Everything the lessons use that is not their idea, grouped by the lesson that needs it first.

Read the lessons first (s03, s06, s07). Then, to see how a piece is made safe, open the module
the lesson's line names; each opens by saying who relies on it and what breaks without each
of its pieces. This is the reading guide; the README links here.

    after s03   run            the loop's second parameter: the client, and this run's
                               record, log, saved results and screen
                endpoints      one model round, ask(): the stream, and every quirk of
                               compatible servers (JSON-text inputs, cut calls, pause_turn)
                tool_calls     around each tool call: shown, logged at once, Ctrl-C kept
                pairing        every tool_use gets one tool_result: ids, cut calls, Ctrl-C,
                               a failed turn, a resumed session repaired
                bash, files    the hardened tools: process groups, floods, FIFOs, atomic writes
                spill, pins    big results saved whole; the model sees head, tail and path;
                               a running session's files are pinned against any prune
                clean          text that can be sent and shown (half an emoji repaired,
                               control characters escaped)
    after s06   tokens         the one token estimate, about 4 characters a token
                layer1         which old results and inputs a batch clears, the placeholders
                transcripts    layer 2's transcript, summary message and notes
                api_context    --api-context: the API's own clearing or compaction instead
                               of layers 1 and 2 (the request, the compaction block, its
                               summary's cost)
    after s07   board/         record (the Task, its checks, the TaskStore), folder, postgres,
                               claims (who may change a task another agent holds), graph,
                               text, live (what other agents did), commands (/task), checklist
    everywhere  cli            one-shot runs, the REPL, --demo, --continue, the budget
                config, errors settings and the client; every error and the line it becomes
                terminal       what reaches the screen, control characters escaped, every
                               line fitted to the terminal's width
                excerpt        long text cut to fit a line, a box or a preview, one way
                writer         every file the harness makes: whole, never through a link,
                               0600 where it holds the conversation
                session/       log (--continue), record (counts), views (/context, /cost),
                               page (the session page) and its parts: blocks, sent,
                               board_picture, markup
                sdk            the anthropic SDK, loaded on first use
                demos          the scripted sessions behind --demo
                stand_in/      the loopback Messages API the demos and tests talk to:
                               script, rules, edits (the API's context management), usage
                               (the cache, the bill), sse, server

Nothing here imports a lesson, and no module imports inside a function except psycopg (an
optional dependency, for a postgresql:// board).
"""
