"""Everything the lessons use that is not their idea, one module per concern.

Read the lessons first (s03, s06, s07). Then, to see how each piece is made safe, read the
modules a lesson leans on, in the lesson's order; each opens by saying who relies on it and
what goes wrong without each of its pieces.

    after s03   endpoints      what compatible servers bend (arguments, cut calls, the history)
                bash, files    the hardened tools: process groups, floods, FIFOs, atomic writes
                spill          big results saved whole, the model shown head, tail and path
                session_log    every message saved as it goes, for --continue
    after s06   transcripts    layer 2's record on disk, and what a compaction says
                layer1_policy  when a batch is worth the cache it rewrites
                layer1_inputs  old write_file/edit_file texts cleared too
    after s07   task_record    the task record, its checks, the TaskStore every board implements
                board_files    a folder of task files, safe for several processes
                board_postgres one board for agents on many machines
                task_graph     the cycle check and the execution order
                board_text     the board as text, bounded after a compaction
                task_commands  /task and /tasks; live_board: what other agents did
                checklist      /task import: a Markdown checklist onto the board
    everywhere  config, cli    settings, the client, one-shot runs, the REPL, --demo
                terminal       what reaches the screen, control characters escaped
                session_record, session_views, session_page   /cost, /context, the session page
                demos          the scripted sessions behind --demo
                stand_in_api   the loopback Messages API the demos and tests talk to

Nothing here imports a lesson.
"""
