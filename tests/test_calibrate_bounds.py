"""What a fit reports where the data give a bound rather than a value, and what the written
profile carries then (``docs/calibration.md``, "Bounds").

- Every decision's error rate at the simulator's 0.95 cap: any lower right-move rate fits as
  well, so ``p_correct`` is an upper bound; the profile takes the largest rate that keeps every
  decision seen at the cap.
- A pool's unit weight far below its pool's other weights (a model that almost never stops
  early) lies on a long, nearly flat stretch: its interval must span it.
- A field not identified only because its interval is wide keeps the default, unless the
  interval excludes the default: then the profile takes the fit's estimate.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from planarena.experiments.calibrate import fit as calibrate_fit
from planarena.experiments.calibrate import table
from planarena.experiments.calibrate.calibrate import Calibration
from planarena.experiments.calibrate.observe import observe
from planarena.experiments.calibrate.registry import Estimate, FitOptions
from test_calibrate_recovery import sim_run

# A model wrong at (almost) every decision that almost never stops a tool call early (and
# never omits a check: a step written without one reads as a right step, docs/calibration.md,
# Limits).
TRUTH = {"p_correct": 0.02, "systematic_share": 1.0, "w_stop": 0.02, "w_stop_plan": 1.0,
         "w_unchecked": 0.0}  # fmt: skip


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    run = sim_run(tmp_path_factory.mktemp("capped") / "run", 8, TRUTH, env="[report,research]",
                  planners="[react,plan_execute_replan]")  # fmt: skip
    return table.build(observe(run, split="all"))


@pytest.fixture(scope="module")
def peaked(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """The same model omitting checks too: a step written without its checks reads as a
    right one, so the base rate has a best value above a flat stretch at the cap."""
    truth = {k: v for k, v in TRUTH.items() if k != "w_unchecked"}
    run = sim_run(tmp_path_factory.mktemp("peaked") / "run", 8, truth, env="[report,research]",
                  planners="[react,plan_execute_replan]")  # fmt: skip
    return table.build(observe(run, split="all"))


def _pooled(frame: pd.DataFrame) -> dict[str, Estimate]:
    options = FitOptions(boot=200, seed=0)
    return {e.parameter: e for e in calibrate_fit.fit_decisions(frame, options)
            if e.group == "pooled"}  # fmt: skip


def test_a_rate_at_the_cap_is_an_upper_bound(capped: pd.DataFrame) -> None:
    est = _pooled(capped)["p_correct"]
    assert est.identified and est.reason.startswith("an upper bound"), est
    assert est.lo == 0.0 and est.value is not None and est.hi is not None
    assert est.lo <= TRUTH["p_correct"] <= est.hi and est.value <= est.hi
    # the bound: every decision seen is at the cap there (the shortest prompt just so), and
    # a higher rate would take the shortest prompt's decision off it
    c = calibrate_fit.choices_of(capped)
    assert c is not None
    least = float(np.min(c.scale * (1 + c.tokens / calibrate_fit.DEFAULT_SCALE)))
    assert (1 - est.value) * least == pytest.approx(0.95, abs=2e-3)


def test_a_tiny_unit_weights_interval_spans_its_likelihood_range(capped: pd.DataFrame) -> None:
    """The stop weight's interval (normalised over its pool) holds the true value and every
    value the likelihood allows along the pool's scale: at each end of that range, the other
    weights of the pool (``w_other`` too) scaled together, the log-likelihood is 1.92 below
    its maximum."""
    est = _pooled(capped)["w_stop"]
    true = 3 * TRUTH["w_stop"] / (1.0 + 1.0 + TRUTH["w_stop"])
    assert est.lo is not None and est.hi is not None and est.value is not None
    assert est.lo <= true <= est.hi, (true, est)
    c = calibrate_fit.choices_of(capped)
    assert c is not None
    held = np.array([q == "context_scale_tokens" for q in calibrate_fit.PARAMS])
    x = calibrate_fit.mle_x(c, calibrate_fit._to_x({**calibrate_fit.START,
                            "context_scale_tokens": 4000.0}), fixed=held)  # fmt: skip
    lo, hi = calibrate_fit.unit_interval(c, x, "w_stop")
    ix = {q: i for i, q in enumerate(calibrate_fit.PARAMS)}
    pool = [ix[q] for q in ("w_hallucinate", "w_premise", "w_other")]
    rest = x[ix["w_hallucinate"]] + x[ix["w_premise"]]

    def drop(unit: float) -> float:  # the log-likelihood lost at this normalised stop weight
        y = x.copy()
        y[pool] *= (3 / unit - 1) / rest
        return calibrate_fit.loglik(c, calibrate_fit._from_x(x)) - calibrate_fit.loglik(
            c, calibrate_fit._from_x(y)
        )

    assert drop(lo) == pytest.approx(1.92, abs=0.05) and drop(hi) == pytest.approx(1.92, abs=0.05)
    assert est.lo <= lo * 1.01 and hi <= est.hi * 1.01  # the reported interval spans it


def test_an_optimiser_stopped_on_the_flat_stretch_moves_off_it(peaked: pd.DataFrame) -> None:
    """A point where every decision is at the cap (nothing moves there, so a simplex started
    on it stays): the scan of the base rate finds the better point; and the fit reports a
    value, not a bound."""
    c = calibrate_fit.choices_of(peaked)
    assert c is not None
    held = np.array([q == "context_scale_tokens" for q in calibrate_fit.PARAMS])
    best = calibrate_fit.mle_x(c, calibrate_fit._to_x({**calibrate_fit.START,
                               "context_scale_tokens": 4000.0}), fixed=held)  # fmt: skip
    on_flat = best.copy()
    on_flat[calibrate_fit.P_CORRECT] = 0.01

    def ll(x: np.ndarray) -> float:
        return calibrate_fit.loglik(c, calibrate_fit._from_x(x))

    nudged = on_flat.copy()
    nudged[calibrate_fit.P_CORRECT] = 0.02
    assert ll(nudged) == ll(on_flat)  # flat there
    moved = calibrate_fit.off_the_flat(c, on_flat, held)
    assert ll(moved) > ll(on_flat) + 1.0
    est = _pooled(peaked)["p_correct"]
    assert not est.reason.startswith("an upper bound"), est
    assert est.value is not None and est.value > 0.1


def _cal(*estimates: Estimate) -> Calibration:
    return Calibration(["run"], "fit", None, list(estimates))  # type: ignore[arg-type]


def test_a_wide_interval_that_excludes_the_default_gives_the_estimate() -> None:
    wide = Estimate("w_stop", 0.01, 0.0, 0.25, 300, 27, False, "interval spans more than 3x",
                    bounded=True)  # fmt: skip
    values, kept = _cal(wide).profile()
    assert values["w_stop"] == 0.01 and any("the fit's estimate" in k for k in kept)
    inside = Estimate("w_premise", 1.9, 0.9, 3.0, 300, 27, False, "wide", bounded=True)
    assert _cal(inside).profile()[0]["w_premise"] == 1.0  # strong's, inside the interval
    few = Estimate("rollout_optimism", 1.0, 0.99, 1.0, 7, 15, False, "n=7 < 30")
    assert _cal(few).profile()[0]["rollout_optimism"] == 0.3  # too few to exclude anything
    # an unset optional field is compared by its shared field's value (strong's 1.0 here)
    plan = Estimate("w_hallucinate_plan", 0.4, 0.1, 0.86, 449, 24, False, "wide", bounded=True)
    assert _cal(plan).profile()[0]["w_hallucinate_plan"] == 0.4
    wider = Estimate("w_hallucinate_plan", 0.4, 0.1, 1.2, 449, 24, False, "wide", bounded=True)
    assert _cal(wider).profile()[0]["w_hallucinate_plan"] is None  # unset: takes the shared


def test_a_pool_of_mistake_weights_comes_whole_from_the_fit() -> None:
    """Only ratios within a pool are identified: where the data rule out ``strong``'s
    inventions (a fitted 0), the pool's other weights are the fit's too, not ``strong``'s 1s
    (the 1.5B fit's plan steps: 98 % of mistakes calls to another tool, which a profile mixing
    the two sources wrote as half stops, half unchecked steps)."""
    plan = [
        Estimate("w_hallucinate_plan", 0.0, 0.0, 0.56, 768, 20, False, "wide", bounded=True),
        Estimate("w_premise_plan", 0.0, 0.0, 0.73, 768, 20, False, "wide", bounded=True),
        Estimate("w_stop_plan", 4.0, None, None, 768, 20, False, "flat"),
        Estimate("w_dependency", 0.0, 0.0, 0.72, 555, 20, False, "wide", bounded=True),
        Estimate("w_unchecked", 1.0, 1.0, 1.0, 0, 0, False, "cannot be told"),
        Estimate("w_other_plan", 208.0, 0.0, 373.0, 768, 20, False, "wide", bounded=True),
    ]
    values, kept = _cal(*plan).profile()
    assert (values["w_stop_plan"], values["w_other_plan"]) == (4.0, 208.0)
    assert values["w_hallucinate_plan"] == values["w_dependency"] == 0.0
    assert values["w_unchecked"] == 1.0 and any("with its pool" in k for k in kept)
    # a pool where nothing rules strong's out keeps strong's whole
    inside = [
        Estimate("w_premise", 1.9, 0.9, 3.0, 300, 27, False, "wide", bounded=True),
        Estimate("w_other", 5.0, 0.0, 9.0, 300, 27, False, "wide", bounded=True),
    ]
    assert _cal(*inside).profile()[0]["w_other"] == 0.0  # fmt: skip


def test_a_flat_likelihood_is_not_bounded() -> None:
    """An interval no wider than rounding (the likelihood does not move) excludes nothing."""
    est = Estimate("context_scale_tokens", 20.0, 20.0, 20.0, 770, 27, False,
                   "the likelihood does not move", bounded=False)  # fmt: skip
    assert _cal(est).profile()[0]["context_scale_tokens"] == 4000


def test_every_decision_at_the_cap_leaves_the_decay_without_a_value() -> None:
    """At the cap for every decision the base rate and the decay trade off along a ridge:
    ``all_capped`` says so (the fit then holds the decay and takes the base rate's bound,
    even where the resamples moved: the shipped ten-task fit once called a decay of 34
    tokens identified, outside its own interval 37..41); one decision below the cap breaks
    the ridge."""
    from types import SimpleNamespace

    from planarena.experiments.calibrate import fit

    def x_at(p_correct: float, scale: float) -> np.ndarray:
        return fit._to_x({**fit.START, "p_correct": p_correct, "context_scale_tokens": scale})

    capped = SimpleNamespace(scale=np.ones(3), tokens=np.array([600.0, 1200.0, 3000.0]))
    assert fit.all_capped(capped, x_at(0.10, 4000.0))  # type: ignore[arg-type]
    assert fit.all_capped(capped, x_at(0.88, 34.0))  # type: ignore[arg-type]
    assert not fit.all_capped(capped, x_at(0.88, 4000.0))  # type: ignore[arg-type]
    short = SimpleNamespace(scale=np.ones(2), tokens=np.array([10.0, 3000.0]))
    assert not fit.all_capped(short, x_at(0.10, 4000.0))  # type: ignore[arg-type]


def test_a_rate_with_no_event_is_bounded_by_its_n_not_by_a_point() -> None:
    """0 broken answers of 47 across 12 tasks: every task resample sees none, but the data
    do not say the rate is below 0.05; the interval's far end is the exact binomial bound."""
    from planarena.experiments.calibrate.registry import bernoulli

    rows = pd.DataFrame({"task": [f"t{i % 12}" for i in range(47)], "outcome": 0})
    options = FitOptions(boot=200, seed=0, level=0.995)
    est = bernoulli(rows, "p_malformed_replan", options, absent="-")
    assert est.value == 0.0 and est.lo == 0.0
    assert est.hi is not None and 0.05 < est.hi < 0.15
    ones = bernoulli(rows.assign(outcome=1), "p_malformed_replan", options, absent="-")
    assert ones.value == 1.0 and ones.lo is not None and 0.85 < ones.lo < 0.95


def test_a_base_rate_pinned_at_the_held_decay_is_the_profiles(tmp_path: Path) -> None:
    """Where the decay is not identified, the profile writes the default decay, so the base
    rate it writes beside it must be the one the data give at that decay. The 1.5B
    recording's decisions pin it there (about 0.3) while the free fit, trading the base rate
    against a decay of tens of tokens, spans 0.14 to 1: the profile takes the pinned value,
    never strong's 0.97 (an error rate of a few percent the data rule out)."""
    from planarena.experiments.calibrate.calibrate import calibrate
    from planarena.experiments.run import recording

    rec = Path(__file__).parent / "data" / "recordings" / "qwen2.5-coder-1.5b"
    with recording.unpacked_cache(rec) as cache:
        cal = calibrate([rec / "run"], cache=str(cache))
    est = cal.pooled()["p_correct"]
    assert est.identified and "given context_scale_tokens" in est.reason
    values, _ = cal.profile()
    assert values["context_scale_tokens"] == 4000 and values["p_correct"] < 0.5


def test_the_held_decay_is_the_one_a_profile_falls_back_to() -> None:
    """A decay the data do not identify is held at DEFAULT_SCALE for the fit, and the profile
    writes strong's value for it: the two must be one number, or the base rate fitted at the
    held decay would be written beside another."""
    from planarena.experiments.calibrate.calibrate import BASE
    from planarena.planners.llm.profiles import SKILLS

    assert SKILLS[BASE].context_scale_tokens == calibrate_fit.DEFAULT_SCALE
