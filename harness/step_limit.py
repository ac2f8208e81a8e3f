"""The step limit: what a lesson's loop returns when its turn used up its model calls.

Relied on by all three lessons, whose loops return reached(max_steps), and by cli, which tells
it from an answer: a one-shot run then exits 3 (cli.STEPS_RAN_OUT) and says how to go on.
Kept apart from cli so that importing a lesson does not load the command line.
"""


class StepLimit(str):
    """What a loop returns when its turn used up its budget of model calls (not finished)."""


def reached(steps: int) -> StepLimit:
    calls = "model call" if steps == 1 else "model calls"
    return StepLimit(f"[stopped: {steps} {calls} in this turn without finishing; say "
                     "'continue' to go on, or raise --max-steps]")
