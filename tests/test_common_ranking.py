"""The one best-result rule that the best pointer, the alarms, the plateau stop and the curves share."""

from common.ranking import best_by_accuracy


def _accuracy_and_step(evaluation: dict) -> tuple[float, int]:
    return evaluation["accuracy"], evaluation["step"]


def test_the_highest_accuracy_wins_and_ties_go_to_the_earliest_step_whatever_the_order():
    evaluations = [
        {"step": 300, "accuracy": 0.5},
        {"step": 100, "accuracy": 0.4},
        {"step": 200, "accuracy": 0.5},
        {"step": 400, "accuracy": 0.5},
    ]
    assert best_by_accuracy(evaluations, _accuracy_and_step) == {"step": 200, "accuracy": 0.5}
    assert best_by_accuracy(reversed(evaluations), _accuracy_and_step) == {"step": 200, "accuracy": 0.5}
    assert best_by_accuracy(evaluations[:2], _accuracy_and_step) == {"step": 300, "accuracy": 0.5}
    assert best_by_accuracy([], _accuracy_and_step) is None
