"""The script a user writes with Syne Tune 0.16: ``Tuner``, ``LocalBackend`` and ``ASHA``.

The same search as ``make demo`` (the quickstart): LeNet on scikit-learn's digits, the same
space, asynchronous successive halving with rungs at epochs 1, 3 and 9 (``grace_period=1``,
``reduction_factor=3``, ``max_t=9``, stopping type), 2 workers, each trial a process of
``syne_tune_train.py`` with one torch thread, reporting ``validation_error`` with the 1-based
epoch as the resource (as Syne Tune's examples do)::

    PYTHONPATH=SYNE_SITE:benchmarks/peers python syne_tune_asha.py --configs configs.json \\
        --run-dir runs/syne-tune --times times.json

What differs from the documented example, for a fair comparison (see ``bench_peers.py``): the
trials train exactly the configurations of ``--configs`` (a JSON list of dicts with ``lr``,
``batch_size``, ``momentum``, ``activation``), in order. They are the baseline's
``points_to_evaluate``; since ASHA's searcher goes on with random configurations once they are
used up, the scheduler here suggests nothing after them (the tuner then waits for the running
trials and ends), which a stopping criterion alone cannot do: ``max_num_trials_started``
counts "more than", and the tuner fills every free worker before it checks it, so it can start
a trial too many. Syne Tune's results go to ``--run-dir`` (``SYNETUNE_FOLDER``) rather than
``~/syne-tune``. Everything else is Syne Tune's default, the tuner's 5-second polling
(``--sleep-time``) included.

``--times`` writes the plain Optuna baseline's format, which the benchmark reads:
``{"process_start", "trials": [{"trial", "start", "end", "epochs"}], "values"}``, unix
seconds, ``trial`` the configuration's index; ``values`` holds every ``validation_error`` the
trials reported. The trials log their own times (``syne_tune_train.py``, ``SYNE_BENCH_TIMES``):
a trial's start is its process's start, before its imports. Its end is when its training
ended or, for a trial the tuner killed (ASHA's stop, and at ``max_t`` when the process is
still running), the moment the tuner decided to kill it (a callback, just before the kill):
the epochs it trained after its report and before the tuner read it count as its epochs.
"""

from __future__ import annotations

import time

START = time.time()  # before the imports: what a user waits for includes them

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from syne_tune import StoppingCriterion, Tuner  # noqa: E402
from syne_tune.backend import LocalBackend  # noqa: E402
from syne_tune.config_space import choice, loguniform, randint, uniform  # noqa: E402
from syne_tune.optimizer.baselines import ASHA  # noqa: E402
from syne_tune.optimizer.scheduler import SchedulerDecision  # noqa: E402
from syne_tune.results_callback import StoreResultsCallback  # noqa: E402
from syne_tune.tuner_callback import TunerCallback  # noqa: E402

HERE = Path(__file__).resolve().parent


class ASHAOnTheseConfigs(ASHA):
    """The ASHA baseline on its ``points_to_evaluate`` only: no suggestion once they are used."""

    def suggest(self) -> Any:
        if not self.searcher.points_to_evaluate:
            return None  # the tuner then waits for the running trials and ends
        return super().suggest()


class StopTimes(TunerCallback):
    """When the tuner decided to stop each trial (it kills the process right after)."""

    def __init__(self) -> None:
        self.stopped: dict[int, float] = {}

    def on_trial_result(self, trial: Any, status: str, result: dict[str, Any],
                        decision: str) -> None:
        if decision == SchedulerDecision.STOP:
            self.stopped.setdefault(trial.trial_id, time.time())


def collect(folder: Path, configs: list[dict[str, Any]], stopped: dict[int, float],
            tuner_end: float) -> dict[str, Any]:
    """The trials' timing lines, in the plain Optuna baseline's format."""
    trials, values = [], []
    for path in sorted(folder.glob("*.jsonl"), key=lambda p: int(p.stem)):
        events = [json.loads(line) for line in path.read_text().splitlines() if line]
        head = events[0]
        index = head["trial_id"]  # trial ids count from 0 in the order of points_to_evaluate
        if index >= len(configs) or head["config"] != configs[index]:
            raise SystemExit(f"trial {index} trained {head['config']}, not configuration "
                             f"{index} of the list")
        ends = [e["end"] for e in events if "end" in e]
        epochs = [e["time"] for e in events if "epoch" in e]
        values += [e["validation_error"] for e in events if "epoch" in e]
        end = ends[0] if ends else stopped.get(index, tuner_end)
        trials.append({"trial": index, "start": head["start"], "end": end, "epochs": epochs})
    if len(trials) != len(configs):
        raise SystemExit(f"{len(trials)} trials logged their times, {len(configs)} expected")
    return {"process_start": START, "trials": trials, "values": values}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", required=True, help="JSON list of the configurations")
    parser.add_argument("--epochs", type=int, default=9)
    parser.add_argument("--repeat", type=int, default=1, help="each image N times an epoch")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--run-dir", default="runs/syne-tune", help="SYNETUNE_FOLDER")
    parser.add_argument("--sleep-time", type=float, default=5.0,
                        help="the tuner's polling interval (default 5, Syne Tune's)")
    parser.add_argument("--times", help="write the timestamps here (JSON)")
    args = parser.parse_args()
    configs = json.loads(Path(args.configs).read_text())
    os.environ["SYNETUNE_FOLDER"] = str(Path(args.run_dir).resolve())
    config_space = {
        "lr": loguniform(0.01, 1.0),
        "batch_size": randint(32, 256),
        "momentum": uniform(0.0, 0.9),
        "activation": choice(["relu", "sigmoid"]),
        "epochs": args.epochs,  # constants: passed to the script like the hyperparameters
        "repeat": args.repeat,
    }
    scheduler = ASHAOnTheseConfigs(
        config_space, metric="validation_error", do_minimize=True, time_attr="epoch",
        max_t=args.epochs, grace_period=1, reduction_factor=3, points_to_evaluate=configs,
    )
    stop_times = StopTimes()
    tuner = Tuner(
        trial_backend=LocalBackend(entry_point=str(HERE / "syne_tune_train.py")),
        scheduler=scheduler,
        # "more than n - 1": all n finished (the exhausted scheduler also ends the tuning)
        stop_criterion=StoppingCriterion(max_num_trials_finished=len(configs) - 1),
        n_workers=args.workers,
        sleep_time=args.sleep_time,
        callbacks=[StoreResultsCallback(), stop_times],
    )
    times_dir = tuner.tuner_path / "bench-times"
    times_dir.mkdir(parents=True)
    os.environ["SYNE_BENCH_TIMES"] = str(times_dir)  # the trials inherit the environment
    tuner.run()
    tuner_end = time.time()
    if args.times:
        record = collect(times_dir, configs, stop_times.stopped, tuner_end)
        Path(args.times).write_text(json.dumps(record))


if __name__ == "__main__":
    main()
