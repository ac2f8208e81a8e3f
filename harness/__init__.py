"""Everything the lessons use that is not their idea, grouped by the lesson that needs it first.

Read the lessons first (s03, s06, s07): each holds its mechanism as code. To see how a piece
is made safe, open the module a lesson's line names: it opens by saying who relies on it and
what breaks without each of its pieces. This is the reading guide; the README links here.

    after s03   run            the loop's second parameter: the client, the model, and this
                               run's record, log, saved results and screen
                model_call     around s03's ask_model: one line for any failure, the live
                               display, a watch on a stream that only pings, the reply made
                               safe to keep (a call cut short, a paused turn), its cost
                tool_input     a call's input checked against its tool's schema
                tool_calls     around each tool call: shown, logged at once, Ctrl-C kept
                pairing        every tool_use gets one tool_result: ids, a cut call, Ctrl-C
                               (session/repair.py rebuilds a failed turn or a saved session)
                bash, files    the hardened tools: process groups, floods, FIFOs, sparse
                               files, atomic writes that keep a file's owner
                spill, pins    big results saved whole; the model sees head, tail and path;
                               a running session's files are pinned against any prune
                clean          text that can be sent and shown (half an emoji repaired,
                               control characters escaped)
                step_limit     what a loop returns when its turn ran out of model calls
    after s06   tokens         the one token estimate, about 4 characters a token
                compaction     what s06's layers need and a learner need not read: the
                               cache breakpoint, the saved copy a placeholder names, the
                               transcript, the window guard, the notes, the --api-context flag
                api_context    --api-context: the API's own clearing or compaction instead
                               of layers 1 and 2, through the run's client (loaded when used)
    after s07   board/         where the board is (board.choose), record (a task's checks),
                               folder (what makes s07's TaskFolder safe and fast), postgres
                               and message (where the board sits in a conversation; both
                               loaded when used), graph, text, claims; and, loaded with the
                               command line, commands (/task), live (what other agents did),
                               checklist (/task import)
    everywhere  cli            one-shot runs, the REPL, --demo, --continue, the budget, signals
                               (each lesson imports it in main(): importing one loads no CLI)
                config, errors settings and the client; every error and the line it
                               becomes, passwords hidden
                env_file       settings from ./.env and the repository's .env (loaded with
                               the command line)
                terminal       what reaches the screen, control characters escaped, every
                               line fitted to the terminal's width
                excerpt        long text cut to fit a line, a box or a preview, one way
                writer         every file the harness makes: whole, never through a link,
                               0600 where it holds the conversation
                session/       log (--continue), repair (a history made valid again),
                               record (counts), views (/context, /cost), page (the session
                               page) and its parts: blocks, sent, board_picture, markup
                sdk            the anthropic SDK, loaded on first use
                demos          the scripted sessions behind --demo (loaded when used)
                stand_in/      the loopback Messages API the demos and tests talk to:
                               script, rules, edits (the API's context management), usage
                               (the cache, the bill), sse, server

Nothing here imports a lesson (s07 hands board.open_store its TaskFolder). What is loaded
when used (session/ and psycopg too) is imported inside the function that needs it: `import
s03_todo` loads under 4,000 lines of the project, `import s07_task_system` at most 6,000, and
python-dotenv none (tests/test_s07_e2e.py).
"""
