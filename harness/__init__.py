"""Everything the lessons use that is not their idea, one module per concern.

Read the lessons first (s03, s06, s07); then, to see how each piece is made safe:
config and cli (settings, the client, the REPL), terminal (what reaches the screen),
endpoints (what compatible servers bend), bash and files (the hardened tools),
task_record and board_files (the task and its storage), stand_in_api (the scripted API).
Nothing here imports a lesson.
"""
