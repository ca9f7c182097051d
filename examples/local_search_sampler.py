"""Your own Optuna sampler in the launcher: a local search around the best trial so far.

``LocalSearchSampler`` proposes each new configuration near the best COMPLETE trial of the
study: every hyperparameter moves by at most ``scale`` of its range (in log space for a log
range), and a categorical one changes to another choice with probability ``scale``. Until
``n_startup_trials`` trials are COMPLETE it samples at random. It is an ordinary
:class:`optuna.samplers.BaseSampler`, usable in any ``optuna.create_study(sampler=...)``; the
launcher builds it from a class path, with the sampler's other fields as its arguments::

    sampler: {class: "local_search_sampler:LocalSearchSampler", n_startup_trials: 3, scale: 0.2}
    seed: 0       # each trial gets its own seed from it (seed + 7919 * trial number)

with ``local_search_sampler.py`` importable (on ``PYTHONPATH``) where the launcher and its
workers run. This script tunes DropoutMLP on scikit-learn's digits (learning rate, first
dropout, first width; 16 trials of 3 epochs, 1 CPU slot) and prints each trial with the trial
its configuration was proposed around (``--out DIR`` keeps the study there)::

    python examples/local_search_sampler.py          # about 20 s on 2 cores

    trial  proposed      lr  dropout_1  num_hiddens_1  validation_error
        0    random  0.0443       0.57            161            0.0861
        1    random  0.0431       0.34            171            0.0722
        2    random  0.0205       0.71            248            0.1000
        3   near #1  0.0630       0.27            127            0.0639
        4   near #3  0.0166       0.37            167            0.1139
        ...
    best: trial 3, validation_error 0.0639 with lr=0.06295, dropout_1=0.2653, num_hiddens_1=127

How it behaves with the launcher: every worker process builds its own sampler, and samples a
trial when it claims it (a queued ticket's hyperparameters are filled in then, from the study
as the storage holds it at that moment), so two workers may propose around the same best
trial, each with its own seed. Only COMPLETE trials count, as the best and towards
``n_startup_trials``: a trial a pruner stopped early has a value from fewer epochs, not
comparable with a finished one. Under Hyperband the study it sees is the trial's bracket.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import FrozenTrial, TrialState


class LocalSearchSampler(optuna.samplers.BaseSampler):
    """Propose configurations near the best COMPLETE trial so far; random until there are
    ``n_startup_trials`` COMPLETE trials. Single-objective studies only.

    For each hyperparameter of the best trial (its distribution, as that trial suggested it):

    * a float or int range moves uniformly within ``scale * (high - low)`` of the best value,
      cut to the range (for ``log=True``: within ``scale * (log(high) - log(low))`` in log
      space, so the value stays positive); ints and ``step`` ranges are rounded to the grid;
    * a categorical keeps the best choice with probability ``1 - scale``, else takes one of
      the others at random.

    Hyperparameters the best trial does not have are sampled at random.

    Args:
        n_startup_trials: COMPLETE trials before the local search starts, ``>= 0``.
        scale: the neighbourhood, as a fraction of each range, in ``(0, 1]``.
        seed: seed of the random choices (None: unseeded).

    Raises:
        ValueError: a bad argument, or (when sampling) a multi-objective study.

    Example::

        >>> sampler = LocalSearchSampler(n_startup_trials=5, scale=0.1, seed=1)
        >>> study = optuna.create_study(sampler=sampler)
        >>> study.optimize(lambda t: (t.suggest_float("x", -10, 10) - 2) ** 2, n_trials=40)
        >>> round(study.best_params["x"], 1)  # random search, seed 1: 1.2
        2.0
    """

    def __init__(
        self, n_startup_trials: int = 10, scale: float = 0.2, seed: int | None = None
    ) -> None:
        if isinstance(n_startup_trials, bool) or not isinstance(n_startup_trials, int) \
                or n_startup_trials < 0:
            raise ValueError(
                f"The value of `n_startup_trials` is {n_startup_trials!r}, "
                "but must be an integer `n_startup_trials >= 0`."
            )
        if isinstance(scale, bool) or not isinstance(scale, int | float) \
                or not 0 < scale <= 1:
            raise ValueError(f"The value of `scale` is {scale!r}, but must be `0 < scale <= 1`.")
        self.n_startup_trials = n_startup_trials
        self.scale = float(scale)
        self._rng = np.random.default_rng(seed)
        self._random = optuna.samplers.RandomSampler(seed=seed)

    def reseed_rng(self) -> None:
        """Draw fresh seeds (Optuna calls it for each thread of ``optimize(n_jobs>1)``)."""
        self._rng = np.random.default_rng()
        self._random.reseed_rng()

    def best_trial(self, study: optuna.Study) -> FrozenTrial | None:
        """The trial proposals are made around: the best COMPLETE trial (the lowest number on a
        tie), or None while fewer than ``n_startup_trials`` trials are COMPLETE."""
        if len(study.directions) != 1:
            raise ValueError("LocalSearchSampler supports single-objective studies only.")
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if not complete or len(complete) < self.n_startup_trials:
            return None
        return _best(complete, study.direction.name.lower())

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        best = self.best_trial(study)
        if best is None:
            return {}
        return {name: dist for name, dist in best.distributions.items() if not dist.single()}

    def sample_relative(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        search_space: dict[str, BaseDistribution],
    ) -> dict[str, Any]:
        if not search_space:
            return {}
        best = self.best_trial(study)
        if best is None:  # cannot happen in one process; another one cannot lose a COMPLETE
            return {}
        return {
            name: self._near(dist, best.params[name])
            for name, dist in search_space.items()
            if name in best.params
        }

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self._random.sample_independent(study, trial, param_name, param_distribution)

    def _near(self, dist: BaseDistribution, value: Any) -> Any:
        """A value of ``dist`` within ``scale`` of ``value`` (see the class docstring)."""
        if isinstance(dist, CategoricalDistribution):
            choices: Sequence[Any] = dist.choices
            index = choices.index(value) if value in choices else None
            if index is None or (len(choices) > 1 and self._rng.random() < self.scale):
                others = [i for i in range(len(choices)) if i != index]
                index = others[int(self._rng.integers(len(others)))]
            return choices[index]
        if not isinstance(dist, FloatDistribution | IntDistribution):
            raise ValueError(f"LocalSearchSampler cannot sample a {type(dist).__name__}.")
        to_space, from_space = (math.log, math.exp) if dist.log else (float, float)
        low, high = to_space(dist.low), to_space(dist.high)
        center = min(max(to_space(value), low), high)
        width = self.scale * (high - low)
        drawn = from_space(self._rng.uniform(max(low, center - width), min(high, center + width)))
        if dist.step is not None:  # an int, or a float on a grid: round to it
            drawn = dist.low + round((drawn - dist.low) / dist.step) * dist.step
        drawn = min(max(drawn, dist.low), dist.high)
        return int(drawn) if isinstance(dist, IntDistribution) else float(drawn)


def _best(complete: Sequence[FrozenTrial], direction: str) -> FrozenTrial:
    """The best of COMPLETE trials for ``"minimize"`` or ``"maximize"``; the lowest number on a
    tie."""
    sign = 1.0 if direction == "minimize" else -1.0
    return min(complete, key=lambda t: (sign * float(t.values[0]), t.number))


def proposed_around(
    trials: Sequence[FrozenTrial], direction: str, n_startup_trials: int
) -> dict[int, int | None]:
    """For a study run by one worker (trials one after another, in number order): the trial
    each one's configuration was proposed around, None for a random (startup) one.

    Example::

        >>> study = optuna.create_study()
        >>> for value in (3.0, 1.0, 2.0, 0.5):
        ...     study.add_trial(optuna.trial.create_trial(value=value))
        >>> proposed_around(study.trials, "minimize", 2)
        {0: None, 1: None, 2: 1, 3: 1}
    """
    around: dict[int, int | None] = {}
    for trial in trials:
        before = [t for t in trials if t.number < trial.number and t.state == TrialState.COMPLETE]
        if not before or len(before) < n_startup_trials:
            around[trial.number] = None
        else:
            around[trial.number] = _best(before, direction).number
    return around


N_STARTUP = 3
N_TRIALS = 16


def main(out: Path) -> None:
    import lightning_hpo.launch

    here = str(Path(__file__).resolve().parent)
    # The workers build "local_search_sampler:LocalSearchSampler" too: put this folder on
    # their path.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [here, *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    study = lightning_hpo.launch.run({
        "study": "local-search",
        "storage": str(out / "local.journal"),
        "run_dir": str(out / "runs"),
        "model": {"name": "dropout_mlp", "num_hiddens_2": 64},
        "data": {"name": "digits", "batch_size": 64},
        "space": {
            "lr": {"loguniform": [0.001, 1.0]},
            "dropout_1": {"uniform": [0.0, 0.8]},
            "num_hiddens_1": {"randint": [16, 256]},
        },
        "sampler": {"class": "local_search_sampler:LocalSearchSampler",
                    "n_startup_trials": N_STARTUP, "scale": 0.2},
        "seed": 0,
        "pruner": "none",
        "trainer": {"max_epochs": 3},
        "devices": {"accelerator": "cpu", "count": 1},
        "stop": {"n_trials": N_TRIALS},
    })
    trials = study.get_trials(deepcopy=False)
    around = proposed_around(trials, "minimize", N_STARTUP)
    print("trial  proposed      lr  dropout_1  num_hiddens_1  validation_error")
    for t in trials:
        how = "random" if around[t.number] is None else f"near #{around[t.number]}"
        value = "-" if t.value is None else f"{t.value:.4f}"
        print(f"{t.number:5d}  {how:>8}  {t.params['lr']:6.4f}  {t.params['dropout_1']:9.2f}"
              f"  {t.params['num_hiddens_1']:13d}  {value:>16}")
    best = study.best_trial
    print(f"best: trial {best.number}, validation_error {best.value:.4f} with "
          + ", ".join(f"{k}={v:.4g}" for k, v in best.params.items()))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="folder for the study (default: temporary)")
    args = parser.parse_args()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        main(args.out)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
