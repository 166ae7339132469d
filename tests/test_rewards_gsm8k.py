"""The grader agrees with GSM8K's own gold on every train+test solution (8,792), and rejects a wrong gold.

python -m pytest tests/test_rewards_gsm8k.py -q
"""

from decimal import Decimal

from _rewards_helpers import gold_of, gsm8k_rows

from rewards.answers import extract_answer, is_correct


def test_every_gsm8k_solution_grades_correct_against_its_gold_and_wrong_against_another():
    rows = gsm8k_rows()
    assert len(rows) == 8_792
    golds = [gold_of(row["answer"]) for row in rows]
    disagreements = []
    for index, (row, gold) in enumerate(zip(rows, golds)):
        solution = row["answer"]
        others = (golds[(index + step) % len(golds)] for step in range(1, len(golds)))
        other = next(g for g in others if Decimal(g) != Decimal(gold))
        checks = (
            is_correct(solution, gold),  # plain gold, as the dataset's `gold` column holds it
            is_correct(solution, solution),  # GSM8K's form: "... #### 1,080"
            extract_answer(solution) == gold,
            not is_correct(solution, other),
            not is_correct(solution, str(Decimal(gold) + 1)),
        )
        if not all(checks):
            disagreements.append((index, gold, checks, solution[-120:]))
    assert disagreements == []
