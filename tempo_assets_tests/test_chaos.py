"""benchmarks/chaos.py's choice of kill moments: N of them, spread along the job, each on a step the
attempt still has to run, some inside a window's TEST phase; and the output lines that arm a kill."""
from __future__ import annotations

import random

from tempo_assets_tests.toolkit import load_benchmark

chaos = load_benchmark("chaos")
WINDOWS = ["window_job W1", "window_job W2"]
PLAN = ([f"release_job r{i}" for i in range(5)] + [f"cutoff_job c{i}" for i in range(4)]
        + [f"method_job c{i}|m" for i in range(8)] + WINDOWS + ["submission_job c3", "catalog_job None"])


def attempts(seed: int, kills: int) -> list:
    """The moments one seeded chaos run kills at, each attempt ending where it was killed (the killed
    step re-runs, the steps before it are built), as kill_loop replays them."""
    moments = chaos.plan_kills(random.Random(seed), PLAN, kills, max_delay=20.0)
    finished, targets = set(), []
    for moment in moments:
        remaining = chaos.remaining_steps(PLAN, finished)
        target = chaos.still_ahead(moment, PLAN, remaining)
        assert target.step in remaining  # the attempt still has work when its kill comes
        targets.append(target)
        finished |= set(PLAN[:PLAN.index(target.step)])
    return targets


def test_every_kill_falls_on_a_step_still_to_run_and_they_spread_along_the_job():
    for seed in range(50):
        targets = attempts(seed, kills=10)
        assert len(targets) == 10
        order = [PLAN.index(t.step) for t in targets]
        assert order == sorted(order), seed  # in job order: every kill finds its step still ahead
        assert order[0] < 3 and order[-1] >= len(PLAN) - 4, (seed, order)  # from the start to the end
        assert all(0.0 <= t.delay <= 20.0 for t in targets)
        assert not any(t.step.startswith("catalog_job") for t in targets)


def test_some_seeds_kill_inside_a_window_s_test_phase_and_a_seed_repeats_its_moments():
    phases = {seed: [t.step for t in attempts(seed, 10) if t.anchor == "test"] for seed in range(50)}
    assert any(phases.values()) and all(s in WINDOWS for steps in phases.values() for s in steps)
    tests = [t for seed in range(50) for t in attempts(seed, 10) if t.anchor == "test"]
    assert all(t.delay <= 20.0 * chaos.TEST_DELAY_SHARE for t in tests)  # the kill comes inside the short phase
    assert attempts(22, 10) == attempts(22, 10)
    assert len(attempts(3, kills=40)) == 40  # more kills than moments: some steps are killed twice


def test_a_moment_already_past_moves_to_the_next_step_still_to_run():
    past = chaos.KillTarget("cutoff_job c1", "start", 3.0)
    remaining = chaos.remaining_steps(PLAN, set(PLAN[:7]))
    assert chaos.still_ahead(past, PLAN, remaining) == chaos.KillTarget("cutoff_job c2", "start", 3.0)


def test_the_lines_that_arm_a_kill():
    start = chaos.KillTarget("window_job W1", "start", 1.0)
    test = chaos.KillTarget("window_job W1", "test", 1.0)
    started = "[18/20] window_job W1: started run 1a2b (valid_evaluation_set, valid_selection, test_growth)"
    progress = "[18/20] window_job W1: valid_selection: progress lightgbm grid: 4/8 (50.0%), elapsed 9s, 0.4/s"
    ended = "[18/20] window_job W1: ok in 80.0s (run 1a2b)"
    assert chaos.reaction(start, started) == ("arm", "the step started")
    assert chaos.reaction(test, started) == ("watch", "1a2b")  # its run's event log says when TEST begins
    assert chaos.reaction(test, progress) is None and chaos.reaction(start, progress) is None
    assert chaos.reaction(test, ended)[0] == "arm"  # the TEST phase never came: the kill lands in the next step
    assert chaos.reaction(start, "[19/20] window_job W2: started run 5e6f (valid_evaluation_set)") is None
    output = "\n".join(["[1/20] release_job r0: already materialised and current, skipped",
                        "[2/20] release_job r1: ok in 3.0s (run 9)", started])
    assert chaos.finished_steps(output) == {"release_job r0", "release_job r1"}
    closing = "summary: 2 ok, 21 skipped, 1 waiting\n  waiting: window_job W1: claimed\nmethod m at cutoff c0: ok\n"
    assert chaos.summary_lines(output + "\n" + closing) == ["summary: 2 ok, 21 skipped, 1 waiting",
                                                           "  waiting: window_job W1: claimed"]
