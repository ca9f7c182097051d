"""What builds the user's classes to check a config before any trial runs (imports torch).

* :mod:`~lightning_hpo.launch.checks.classes`: :func:`check_against_registry`, the model and
  data module the config names built at the ends of every searched range;
* :mod:`~lightning_hpo.launch.checks.project`: a trial built through a project's own
  LightningCLI (:func:`build_trial`, which the worker uses too);
* :mod:`~lightning_hpo.launch.checks.cli_checks`: a project's config tried against its own
  parser (:func:`check_cli`).

torch and Lightning are imported when a check runs, not when this package is imported, so
the launcher's own process pays for them only where it checks a config itself (``--check``).
"""

from lightning_hpo.launch.checks.classes import check_against_registry

__all__ = ["check_against_registry"]
