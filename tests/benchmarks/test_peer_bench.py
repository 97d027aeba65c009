import pytest

from benchmarks.peer_bench import median_of_rounds


def _round(script_fit, script_acc, run_wall, run_acc, run_to_target):
    return {
        "script_fp32": {
            "wall_s": script_fit + 10,
            "fit_s": script_fit,
            "eval_accuracy": script_acc,
            "to_target_s": None,
        },
        "imgpipe_run": {"wall_s": run_wall, "eval_accuracy": run_acc, "to_target_s": run_to_target},
    }


def test_ratios_are_paired_within_a_round_and_summarised_by_median_and_span():
    rounds = [
        _round(100, 0.8, 80, 0.9, 80),  # 0.80x, met
        _round(200, 0.8, 120, 0.9, 120),  # 0.60x, met: a slow round for the script
        _round(100, 0.8, 110, 0.9, None),  # 1.10x, not met
    ]
    found = median_of_rounds(rounds)
    run = found["imgpipe_run"]
    assert run["wall_s"] == 110
    assert run["ratio"] == pytest.approx(0.8)  # not 110 / 100, the ratio of the medians
    assert run["ratio_range"] == pytest.approx((0.6, 1.1))
    assert run["goal_met_rounds"] == 2
    assert (run["to_target_s"], run["reached_rounds"]) == (100, 2)
    assert found["script_fp32"]["fit_s"] == 100
    assert (found["script_fp32"]["to_target_s"], found["script_fp32"]["reached_rounds"]) == (
        None,
        0,
    )


def test_a_round_at_lower_accuracy_does_not_meet_the_goal_however_fast():
    found = median_of_rounds([_round(100, 0.9, 50, 0.8, None)])
    assert found["imgpipe_run"]["goal_met_rounds"] == 0
    assert found["imgpipe_run"]["rounds"] == 1
