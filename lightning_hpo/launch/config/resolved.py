"""The config as the launcher runs it: every section, defaults filled, ``--set`` applied.

:func:`resolved_config` turns a parsed :class:`~lightning_hpo.launch.config.Config` back into the
config grammar, with every field the launcher reads given its value (what ``--print-config``
prints, as LightningCLI's ``--print_config`` does). Fed back to
:func:`~lightning_hpo.launch.config.parse_config` it gives the same config. The storage's
password or token is masked.

Example::

    >>> from lightning_hpo.launch.config import load_config
    >>> printed = resolved_config(load_config("quickstart", ["stop.n_trials=5"]))
    >>> printed["stop"]["n_trials"], printed["pruner"]["mode"], printed["trainer"]["max_epochs"]
    (5, 'stop', 9)
"""

from __future__ import annotations

from typing import Any

from lightning_hpo.launch.config._fields import applies, fields_of
from lightning_hpo.launch.config._spec import Config
from lightning_hpo.storage import mask

__all__ = ["resolved_config"]

#: Sections a LightningCLI project's config keeps as it wrote them (its CLI resolves them).
_CLI_SECTIONS = ("cli", "config", "model", "data", "trainer", "optimizer", "lr_scheduler")


def resolved_config(cfg: Config) -> dict[str, Any]:
    """``cfg`` in the config file's grammar, every launcher field filled in, in the file's order.

    Args:
        cfg: a config from :func:`~lightning_hpo.launch.config.parse_config`.

    Returns:
        A mapping ready for ``yaml.safe_dump``: the storage masked, ``trainer.max_epochs`` and
        ``trainer.logger`` resolved, a LightningCLI project's own sections as written.
    """
    out: dict[str, Any] = {"study": cfg.study, "storage": mask(cfg.storage),
                           "run_dir": cfg.run_dir}
    if cfg.cli is None:
        out["model"] = {"name": cfg.model, **cfg.model_args}
        out["data"] = {"name": cfg.data, **cfg.data_args}
    else:
        out.update({key: cfg.raw[key] for key in _CLI_SECTIONS if key in cfg.raw})
    out["metric"] = list(cfg.metrics) if cfg.several else cfg.metric
    out["direction"] = list(cfg.directions) if cfg.several else cfg.direction
    out["space"] = cfg.raw.get("space") or {}
    out["initial"] = cfg.initial
    sampler = {"name": cfg.sampler} if not cfg.sampler_args and ":" not in cfg.sampler else {
        "class": cfg.sampler, **cfg.sampler_args}
    out["sampler"] = {**sampler, "seed": cfg.seed}
    for key in ("pruner", "devices", "stop", "checkpoint", "heartbeat"):
        if getattr(cfg, key) is not None:
            out[key] = _section(getattr(cfg, key), cfg)
    if cfg.cli is None:
        out["trainer"] = {**cfg.trainer, "max_epochs": cfg.max_epochs, "logger": cfg.logger}
    else:
        trainer = cfg.raw.get("trainer")
        out["trainer"] = {**(trainer if isinstance(trainer, dict) else {}), "logger": cfg.logger}
    return out


def _section(section: Any, cfg: Config) -> dict[str, Any]:
    """A section's fields in the definition's order, those that apply to ``cfg``'s pruner only
    (``pruner.prefact`` for sync_*, ``checkpoint.max_paused`` for mode promotion...)."""
    return {item.name: getattr(section, item.name) for item in fields_of(type(section))
            if applies(item, cfg.pruner)}
