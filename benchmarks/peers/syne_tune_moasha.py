"""Syne Tune 0.16's MOASHA on the error-vs-size task: ``Tuner``, ``LocalBackend``, ``MOASHA``.

The task of ``configs/lenet_error_vs_size.yaml`` (LeNet on scikit-learn's digits,
``validation_error`` and ``parameters``, both minimised, at most 9 epochs), MOASHA with rungs
at epochs 1, 3 and 9 (``grace_period=1``, ``reduction_factor=3``, ``max_t=9``, its default
non-dominated-sort priority, stopping type), each trial a process of
``syne_tune_train_mo.py`` reporting both metrics with the 1-based epoch as ``time_attr``::

    PYTHONPATH=SYNE_SITE:benchmarks/peers python syne_tune_moasha.py --configs configs.json \\
        --max-epochs-total 108 --run-dir runs/syne-tune --times times.json
    PYTHONPATH=SYNE_SITE python syne_tune_moasha.py --check   # its decision at one rung

What differs from the documented example, so that it is compared on what the others train
(``bench_multiobjective.py``): MOASHA samples nothing itself; its trials train the
configurations of ``--configs`` (a JSON list of dicts with ``lr``, ``momentum``, ``width``) in
order, and it suggests nothing once they are used up. The tuner stops once the trials have
reported more than ``--max-epochs-total - 1`` results (``StoppingCriterion(
max_num_evaluations=...)``: one result is one epoch). Results go to ``--run-dir``
(``SYNETUNE_FOLDER``). Everything else is Syne Tune's default, the tuner's 5-second polling
(``--sleep-time``) included: a trial MOASHA stops trains on until the tuner reads its result.

``--times`` writes what the benchmark reads: ``{"trials": [{"trial", "start", "end",
"config", "epochs": [{"epoch", "time", "validation_error", "parameters"}]}]}``, unix seconds,
``trial`` the configuration's index; every epoch a trial logged counts (those it trained after
a stop decision, before the tuner killed it, too).

``--check`` prints, as JSON, the decision MOASHA returns for a result of (0.1, 0.1) at epoch 1
when the rung already holds (0.5, 0.5), (0.6, 0.6) and (0.7, 0.7) (eta 3, both minimised):
the new result dominates every other, and Syne Tune 0.16 says STOP, because it reads the
index order its non-dominated sort returns as if it were each result's rank.
"""

from __future__ import annotations

import time

START = time.time()  # before the imports: what a user waits for includes them

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from syne_tune import StoppingCriterion, Tuner  # noqa: E402
from syne_tune.backend import LocalBackend  # noqa: E402
from syne_tune.backend.trial_status import Trial  # noqa: E402
from syne_tune.config_space import loguniform, uniform  # noqa: E402
from syne_tune.optimizer.scheduler import TrialSuggestion  # noqa: E402
from syne_tune.optimizer.schedulers.multiobjective.moasha import MOASHA  # noqa: E402
from syne_tune.results_callback import StoreResultsCallback  # noqa: E402

HERE = Path(__file__).resolve().parent
METRICS = ["validation_error", "parameters"]
#: The rung of ``--check``: results already recorded at epoch 1, then the new one.
CHECK_RUNG = [(0.5, 0.5), (0.6, 0.6), (0.7, 0.7)]
CHECK_NEW = (0.1, 0.1)


class MOASHAOnTheseConfigs(MOASHA):
    """MOASHA training the given configurations in order; nothing once they are used up."""

    def __init__(self, configs: list[dict[str, Any]], constants: dict[str, Any],
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._queue = [{**c, **constants} for c in configs]

    def suggest(self) -> TrialSuggestion | None:
        if not self._queue:
            return None  # the tuner then waits for the running trials and ends
        return TrialSuggestion.start_suggestion(self._queue.pop(0))


def config_space(epochs: int) -> dict[str, Any]:
    """The space of ``configs/lenet_error_vs_size.yaml``, and the constant ``epochs``."""
    return {"lr": loguniform(0.01, 1.0), "momentum": uniform(0.0, 0.9),
            "width": loguniform(0.1, 2.0), "epochs": epochs}


def check() -> dict[str, Any]:
    """MOASHA's decision for :data:`CHECK_NEW` at a rung holding :data:`CHECK_RUNG`."""
    scheduler = MOASHA(config_space(9), metrics=["a", "b"], do_minimize=True,
                       time_attr="epoch", max_t=9, grace_period=1, reduction_factor=3)
    now = dt.datetime.now()
    decisions = []
    for trial_id, (a, b) in enumerate([*CHECK_RUNG, CHECK_NEW]):
        trial = Trial(trial_id=trial_id, config={}, creation_time=now)
        scheduler.on_trial_add(trial)
        decisions.append(str(scheduler.on_trial_result(trial, {"epoch": 1, "a": a, "b": b})))
    return {"rung": CHECK_RUNG, "new": CHECK_NEW, "decision": decisions[-1],
            "decisions": decisions}


def collect(folder: Path, configs: list[dict[str, Any]]) -> dict[str, Any]:
    """Every trial's logged start, end, configuration and epochs."""
    trials = []
    for path in sorted(folder.glob("*.jsonl"), key=lambda p: int(p.stem)):
        events = [json.loads(line) for line in path.read_text().splitlines() if line]
        head = events[0]
        index = head["trial_id"]  # trial ids count from 0 in the order suggested
        if index >= len(configs) or head["config"] != configs[index]:
            raise SystemExit(f"trial {index} trained {head['config']}, not configuration "
                             f"{index} of the list")
        ends = [e["end"] for e in events if "end" in e]
        trials.append({
            "trial": index, "start": head["start"], "end": ends[0] if ends else None,
            "config": head["config"],
            "epochs": [{k: e[k] for k in ("epoch", "time", *METRICS)}
                       for e in events if "epoch" in e],
        })
    return {"process_start": START, "trials": trials}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="print MOASHA's decision at the example rung (JSON) and exit")
    parser.add_argument("--configs", help="JSON list of the configurations")
    parser.add_argument("--epochs", type=int, default=9, help="max_t")
    parser.add_argument("--max-epochs-total", type=int, required=False,
                        help="stop once the trials reported this many epochs in all")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--run-dir", default="runs/syne-tune", help="SYNETUNE_FOLDER")
    parser.add_argument("--sleep-time", type=float, default=5.0,
                        help="the tuner's polling interval (default 5, Syne Tune's)")
    parser.add_argument("--seed", type=int, default=0, help="the scheduler's random_seed")
    parser.add_argument("--times", help="write the trials' times and values here (JSON)")
    args = parser.parse_args()
    if args.check:
        print(json.dumps(check()))
        return
    if not args.configs or not args.max_epochs_total:
        parser.error("--configs and --max-epochs-total are required (or --check)")
    configs = json.loads(Path(args.configs).read_text())
    os.environ["SYNETUNE_FOLDER"] = str(Path(args.run_dir).resolve())
    scheduler = MOASHAOnTheseConfigs(
        configs, {"epochs": args.epochs}, config_space=config_space(args.epochs),
        metrics=METRICS, do_minimize=True, time_attr="epoch", max_t=args.epochs,
        grace_period=1, reduction_factor=3, random_seed=args.seed,
    )
    tuner = Tuner(
        trial_backend=LocalBackend(entry_point=str(HERE / "syne_tune_train_mo.py")),
        scheduler=scheduler,
        # "more than n - 1" results: n epochs reported in all
        stop_criterion=StoppingCriterion(max_num_evaluations=args.max_epochs_total - 1),
        n_workers=args.workers,
        sleep_time=args.sleep_time,
        callbacks=[StoreResultsCallback()],
    )
    times_dir = tuner.tuner_path / "bench-times"
    times_dir.mkdir(parents=True)
    os.environ["SYNE_BENCH_TIMES"] = str(times_dir)  # the trials inherit the environment
    tuner.run()
    if args.times:
        Path(args.times).write_text(json.dumps(collect(times_dir, configs)))


if __name__ == "__main__":
    main()
