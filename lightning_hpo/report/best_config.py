"""The best trial's ``config.yaml``: what ``python main.py fit --config`` takes to retrain it.

Each trial of a LightningCLI project (:mod:`lightning_hpo.launch.checks.project`) writes its fully
resolved ``fit`` config into its folder (the study's ``log_dir`` attribute of the trial). The
launcher copies the best one to ``run_dir/<study>/best_config.yaml`` when a run ends;
``python -m lightning_hpo.report --best-config PATH`` writes it for any such study, and
``--best-config PATH --trial N`` trial ``N``'s (a study of several objectives has no single best
trial: pick one on its Pareto front).

Example::

    number, path = write_best_config(study, Path("best_config.yaml"))
    # python main.py fit --config best_config.yaml
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from optuna.trial import TrialState

from lightning_hpo.errors import ConfigError
from lightning_hpo.schema import ATTR

__all__ = ["CONFIG_NAME", "best_config_source", "write_best_config", "write_text_whole"]

#: The name of the ``fit`` config a trial of a LightningCLI project writes in its folder.
CONFIG_NAME = "config.yaml"


def best_config_source(study: Any, trial: int | None = None) -> tuple[int, Path]:
    """The best COMPLETE trial's number and its ``config.yaml`` (Optuna's ``best_trial``), or
    trial ``trial``'s when one is named (any state: a trial picked on a study's Pareto front,
    or the best at some epoch).

    Raises:
        ConfigError: ``best-config`` when no trial is COMPLETE, or the trial wrote no
            ``config.yaml`` (a study of registry models, or its folder is not on this machine),
            or the study has several objectives and no trial is named (no single best trial:
            the message lists its Pareto-optimal COMPLETE trials to choose from); ``trial`` when
            the study has no such trial.
    """
    if trial is not None:
        trials = study.get_trials(deepcopy=False)
        if isinstance(trial, bool) or not isinstance(trial, int) or not 0 <= trial < len(trials):
            raise ConfigError("trial", f"is {trial!r}, but study '{study.study_name}' has trials "
                              f"0 to {len(trials) - 1}" if trials else
                              f"is {trial!r}, but study '{study.study_name}' has no trial")
        return trial, _config_of(trials[trial], "the one named")
    if len(study.directions) > 1:
        front = sorted(t.number for t in study.best_trials)
        choose = (f"choose one of its Pareto-optimal trials ({', '.join(map(str, front))}) with "
                  "--trial N" if front else "it has no COMPLETE trial yet")
        raise ConfigError("best-config", f"study '{study.study_name}' has "
                          f"{len(study.directions)} objectives, so no single best trial: {choose}")
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        raise ConfigError("best-config", f"study '{study.study_name}' has no COMPLETE trial yet")
    best = study.best_trial
    return best.number, _config_of(best, "the best")


def _config_of(trial: Any, which: str) -> Path:
    """The ``config.yaml`` in ``trial``'s folder; ``best-config`` error naming the trial (and
    ``which`` it is) when there is none."""
    folder = trial.user_attrs.get(ATTR.LOG_DIR)
    path = Path(folder) / CONFIG_NAME if isinstance(folder, str) else None
    if path is None or not path.is_file():
        where = f" ({path} not found)" if path is not None else ""
        raise ConfigError("best-config", f"trial {trial.number} ({which}) has no {CONFIG_NAME}"
                          f"{where}: trials write one when they are built through a "
                          "LightningCLI (cli:, config: or model.class_path), on the machine "
                          "that trained them")
    return path


def write_best_config(study: Any, dest: Path, trial: int | None = None) -> tuple[int, Path]:
    """Copy the best trial's ``config.yaml`` (or trial ``trial``'s) to ``dest``, whole or not
    at all, with a first comment line saying which trial it is.

    Returns:
        The trial's number and ``dest``.

    Raises:
        ConfigError: see :func:`best_config_source`; ``best-config`` when ``dest`` cannot be
            written.
    """
    number, source = best_config_source(study, trial)
    text = source.read_text(encoding="utf-8")
    if trial is None:
        what = "the best COMPLETE trial"
    else:
        frozen = study.get_trials(deepcopy=False)[number]
        what = f"the trial chosen ({frozen.state.name})"
    header = f"# trial {number} of study '{study.study_name}', {what}\n"
    try:
        write_text_whole(dest, header + text)
    except OSError as error:
        raise ConfigError("best-config", f"cannot write {dest}: {error.strerror or error}"
                          ) from None
    return number, dest


def write_text_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: into ``path.partial``, renamed over
    ``path``; on an error the partial file is removed and the ``OSError`` raised.

    Example::

        write_text_whole(Path("runs/shop/trial_00007/config.yaml"), config_text)
    """
    partial = path.with_name(path.name + ".partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise
