"""The tuned values did not vary the run: tuning trials with different params that reported the
same curves (planner._core.records.tuned_values_identical), read from records the test trainables
really report."""

from __future__ import annotations

from types import SimpleNamespace

from planner._core.records import tuned_values_identical
from planner._stats.decide import tuned_values_did_not_vary
from tests.trainables import synthetic

LRS = [0.001, 0.01, 0.1, 0.3]


def tuning_records(trainable, arm="treat", seed=100, lrs=LRS, status="completed"):
    """The records of one sweep: `trainable` really called once per lr, its reports kept as a run
    keeps them."""
    out = []
    for i, lr in enumerate(lrs):
        reports = []
        trial = SimpleNamespace(
            seed=seed,
            budget=4,
            phase="tune",
            report=lambda step, _r=reports, **m: _r.append({"step": step, "metrics": m}),
        )
        trainable({"recipe": {"name": "b", "level": 0.7, "lr": lr, "best_lr": 0.01}}, trial)
        out.append(
            {
                "trial_id": f"tune-{arm}-s{seed}-t{i:03d}",
                "phase": "tune",
                "arm": arm,
                "seed": seed,
                "params": {"recipe.lr": lr},
                "status": status,
                "reports": reports,
            }
        )
    return out


def test_a_trainable_that_ignores_the_tuned_value_is_found():
    assert tuned_values_identical(tuning_records(synthetic.ignores_lr), "val_acc") == {"treat": 4}
    why = tuned_values_did_not_vary("treat", {"treat": 4}, "base")
    assert why == (
        "Invalid: the tuned values did not vary the run: 4 tuning trials of arm treat with "
        "different "
        "params reported the same curves; check that the trainable uses them (the tuned keys of "
        "its "
        "config or command line)."
    )
    assert "the baseline base" in tuned_values_did_not_vary("treat", {"base": 4}, "base")
    assert tuned_values_did_not_vary("treat", {}, "base") is None


def test_a_trainable_that_uses_the_tuned_value_is_not_flagged():
    assert tuned_values_identical(tuning_records(synthetic.train), "val_acc") == {}


def test_a_tie_on_the_final_value_with_different_curves_is_not_flagged():
    records = tuning_records(synthetic.ties_at_the_end)
    assert len({r["reports"][-1]["metrics"]["val_acc"] for r in records}) == 1  # the finals tie
    assert tuned_values_identical(records, "val_acc") == {}


def test_what_the_rule_needs_before_it_says_anything():
    assert (
        tuned_values_identical(tuning_records(synthetic.ignores_lr, lrs=[0.01, 0.01]), "val_acc")
        == {}
    )
    one_stopped = tuning_records(synthetic.ignores_lr)
    one_stopped[1]["status"] = "early_stopped"
    assert tuned_values_identical(one_stopped, "val_acc") == {}
    # a sweep of the arm whose curves differ: the values reach the run there
    both = tuning_records(synthetic.ignores_lr) + tuning_records(synthetic.train, seed=200)
    assert tuned_values_identical(both, "val_acc") == {}


def test_a_slimmed_tuning_record_is_compared_on_the_curve_it_kept():
    from planner._core.records import metric_curve

    records = tuning_records(synthetic.train)
    slim = [
        {**r, "metric_curve": metric_curve(r, "val_acc"), "reports": r["reports"][-1:]}
        for r in records
    ]
    assert tuned_values_identical(slim, "val_acc") == {}
    same = tuning_records(synthetic.ignores_lr)
    slim = [{**r, "metric_curve": metric_curve(r, "val_acc"), "reports": []} for r in same]
    assert tuned_values_identical(slim, "val_acc") == {"treat": 4}


def test_a_trial_resumed_from_its_checkpoint_counts_but_its_partial_curve_is_not_compared():
    records = tuning_records(synthetic.ignores_lr)
    records[2] = {
        **records[2],
        "resumed": True,
        "reports": records[2]["reports"][2:],
    }  # steps 3 and 4 only
    assert tuned_values_identical(records, "val_acc") == {"treat": 4}


def test_identical_curves_of_a_diverged_training_name_the_divergence_not_an_ignored_value():
    """SGD at lr 1e3-1e5: every trial's losses went NaN and its val_acc sat at chance, the same in
    all. The verdict said the trainable ignores its tuned values, and its seed; the values reached
    the model."""
    from planner._core.records import non_finite_metrics
    from planner._stats.decide import seeds_did_not_vary

    records = [
        {
            "arm": "treat",
            "phase": "tune",
            "reports": [
                {"step": 1, "metrics": {"val_acc": 0.48, "train_loss": "nan", "val_loss": "nan"}}
            ],
        },
        {
            "arm": "base",
            "phase": "tune",
            "reports": [{"step": 1, "metrics": {"val_acc": 0.7, "val_loss": 0.4}}],
        },
    ]
    diverged = non_finite_metrics(records)
    assert diverged == {"treat": ["train_loss", "val_loss"]}
    why = tuned_values_did_not_vary("treat", {"treat": 4}, "base", diverged)
    assert "NaN or infinite values of train_loss, val_loss: the training diverged" in why
    assert "check that the trainable uses them" not in why
    why = seeds_did_not_vary("treat", {"treat": 3}, "base", "val_acc", diverged)
    assert "the training diverged" in why and "ignores its seed" not in why
    assert "ignores its seed" in seeds_did_not_vary("treat", {"treat": 3}, "base", "val_acc", {})


def _saturated(config, trial):
    """Uses its lr and its seed, on a task so easy that val_acc is 1.0 at every epoch (its loss,
    not named in the contract's metrics, is what varies)."""
    for step in range(1, trial.budget + 1):
        trial.report(step, val_acc=1.0)


def test_a_saturated_metric_is_not_read_as_values_or_seeds_that_did_not_vary():
    """val_acc 1.0 at every step in every trial: identical curves, but a curve that never moves
    tells nothing of the tuned values or of the seed. The arm was `invalid` with 'the trainable
    ignores its seed'."""
    from planner._core.records import seeds_identical

    assert tuned_values_identical(tuning_records(_saturated), "val_acc") == {}
    confirm = [
        {**r, "phase": "confirm", "seed": seed}
        for seed, r in enumerate(tuning_records(_saturated)[:3])
    ]
    assert seeds_identical(confirm) == {}
    # a curve that moves over its steps and is the same for every seed is still the seed ignored
    moving = [
        {**r, "phase": "confirm", "seed": seed}
        for seed, r in enumerate(tuning_records(synthetic.ignores_lr)[:3])
    ]
    for r in moving:
        r["params"] = {}
    assert seeds_identical(moving) == {"treat": 3}


def test_one_report_is_no_flat_curve_and_one_flat_trial_does_not_hide_a_sweep_that_varied():
    """A script that reports once at its end: the same value on every seed or param set is the seed
    (or the values) ignored, as before the flat-curve exception; and a sweep whose curves differ,
    one of them flat (an lr stuck at chance), still shows that the values reach the run."""
    from planner._core.records import seeds_identical

    def once(config, trial):
        trial.report(trial.budget, val_acc=0.7)

    assert tuned_values_identical(tuning_records(once), "val_acc") == {"treat": 4}
    confirm = [
        {**r, "phase": "confirm", "seed": seed, "params": {}}
        for seed, r in enumerate(tuning_records(once)[:3])
    ]
    assert seeds_identical(confirm) == {"treat": 3}

    def stuck_at_chance(config, trial):
        for step in range(1, trial.budget + 1):
            trial.report(step, val_acc=0.1 if config["recipe"]["lr"] > 0.05 else 0.2 + 0.1 * step)

    varied = tuning_records(stuck_at_chance)
    same = tuning_records(synthetic.ignores_lr, seed=200)
    assert tuned_values_identical(varied + same, "val_acc") == {}
