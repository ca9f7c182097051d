"""The best trial's ``config.yaml``: what ``python main.py fit --config`` takes to retrain it.

Each trial of a LightningCLI project (:mod:`lightning_hpo.launch.project`) writes its fully
resolved ``fit`` config into its folder (the study's ``log_dir`` attribute of the trial). The
launcher copies the best one to ``run_dir/<study>/best_config.yaml`` when a run ends;
``python -m lightning_hpo.report --best-config PATH`` writes it for any such study.

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


def best_config_source(study: Any) -> tuple[int, Path]:
    """The best COMPLETE trial's number and its ``config.yaml`` (Optuna's ``best_trial``).

    Raises:
        ConfigError: ``best-config`` when no trial is COMPLETE, or the best one wrote no
            ``config.yaml`` (a study of registry models, or its folder is not on this machine),
            or the study has several objectives (no single best trial: its Pareto-optimal
            trials are in the report's ``trials.csv``, ``front`` 0, each with its ``log_dir``).
    """
    if len(study.directions) > 1:
        raise ConfigError("best-config", f"study '{study.study_name}' has "
                          f"{len(study.directions)} objectives, so no single best trial: pick "
                          "one on its Pareto front (the report's trials.csv: front 0) and copy "
                          f"the {CONFIG_NAME} in its folder (its log_dir attribute)")
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        raise ConfigError("best-config", f"study '{study.study_name}' has no COMPLETE trial yet")
    best = study.best_trial
    folder = best.user_attrs.get(ATTR.LOG_DIR)
    path = Path(folder) / CONFIG_NAME if isinstance(folder, str) else None
    if path is None or not path.is_file():
        where = f" ({path} not found)" if path is not None else ""
        raise ConfigError("best-config", f"trial {best.number} (the best) has no {CONFIG_NAME}"
                          f"{where}: trials write one when they are built through a "
                          "LightningCLI (cli:, config: or model.class_path), on the machine "
                          "that trained them")
    return best.number, path


def write_best_config(study: Any, dest: Path) -> tuple[int, Path]:
    """Copy the best trial's ``config.yaml`` to ``dest``, whole or not at all.

    Returns:
        The best trial's number and ``dest``.

    Raises:
        ConfigError: see :func:`best_config_source`; ``best-config`` when ``dest`` cannot be
            written.
    """
    number, source = best_config_source(study)
    text = source.read_text(encoding="utf-8")
    header = f"# trial {number} of study '{study.study_name}', the best COMPLETE trial\n"
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
