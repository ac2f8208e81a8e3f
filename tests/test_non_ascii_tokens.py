"""Text in Chinese, Russian or emoji is counted by its characters, as English is (issue #46).

The one token estimate (harness/tokens.py) measures a value as a request sends it, as JSON: an
escaped character (\\u6570, six characters) would count six times over, and a whole Chinese
conversation up to six times its size. Layer 2 would then summarise far too early, and /context
would say the context is far fuller than it is. Here the estimate itself, and then s06's REPL
as a user meets it: /context and layer 2 on a Chinese conversation against an ASCII one of the
same length.
"""

import re

import pytest

import s06_compact
from harness import tokens
from harness.stand_in.script import reply, text

LENGTH = 4_000      # characters of each prompt and answer below


def of_length(sample: str, length: int = LENGTH) -> str:
    return (sample * (length // len(sample) + 1))[:length]


SAMPLES = {"ascii": "Design the data model first. ",
           "chinese": "先设计数据模型，然后实现接口。",
           "russian": "Сначала спроектируйте модель данных. ",
           "emoji": "🙂🚀✅🐍"}


@pytest.mark.parametrize("language", ["chinese", "russian", "emoji"])
def test_the_estimate_counts_non_ascii_text_by_its_characters(language):
    sample = of_length(SAMPLES[language])
    assert len(sample) == LENGTH
    assert tokens.estimate(sample) == tokens.estimate(of_length(SAMPLES["ascii"]))
    assert tokens.estimate(sample) == (LENGTH + 2) // tokens.CHARS_PER_TOKEN   # with its quotes


def context_of(run_main, language):
    """s06's REPL, with layer 2 at 4,000 tokens: two prompts of LENGTH characters in
    `language`, each answered in half as many, then /context: (the tokens /context says the
    context holds, its text row). About 3,400 tokens in all, under the threshold: layer 2
    must not compact."""
    prompts = [of_length(SAMPLES[language]) for _ in range(2)]
    script = [reply(text(of_length(SAMPLES[language], LENGTH // 2))) for _ in range(2)]
    code, out, err, api = run_main(s06_compact, stdin="\n".join([*prompts, "/context", "q"]),
                                   script=script, summary="Summary: two long prompts.",
                                   env={"COMPACT_THRESHOLD": "4000"})
    assert code == 0 and api.violations == [], err
    assert "[compacted" not in err, f"layer 2 compacted {LENGTH:,} {language} characters"
    assert len(api.requests) == 2                         # the two turns' calls, no summary
    total = re.search(r"context now: ~?([\d,]+) tokens", out)
    row = re.search(r"x text +~([\d,]+) ", out)
    assert total and row, out[-2000:]
    return int(total[1].replace(",", "")), int(row[1].replace(",", ""))


def test_context_and_layer_2_count_a_chinese_conversation_as_an_ascii_one_of_its_length(run_main):
    ascii_total, ascii_text = context_of(run_main, "ascii")
    total, text_row = context_of(run_main, "chinese")
    assert ascii_text >= 2_900 and abs(text_row - ascii_text) <= ascii_text // 50   # within 2%
    assert ascii_total > ascii_text and abs(total - ascii_total) <= ascii_total // 50
