"""Reading a config: :func:`load_config` and :func:`parse_config`, field by field.

Every problem is a :class:`~lightning_hpo.errors.ConfigError` naming the field and what is
allowed; nothing here imports torch. Checks that need the model and data classes are in
:mod:`lightning_hpo.launch.checks`.

Example::

    >>> cfg = parse_config({"study": "demo", "model": {"name": "lenet"},
    ...                     "space": {"lr": {"loguniform": [0.01, 1.0]}},
    ...                     "pruner": {"name": "asha", "max_resource": 9},
    ...                     "stop": {"n_trials": 20}})
    >>> cfg.max_epochs, cfg.storage, str(cfg.study_dir)
    (9, 'runs/demo.journal', 'runs/demo')
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import inspect
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lightning_hpo.errors import (
    ConfigError,
    field_choice,
    field_int,
    field_keys,
)
from lightning_hpo.launch.config._fields import check_applies, fields_of, read_fields
from lightning_hpo.launch.config._spec import (
    DIRECTIONS,
    LOGGERS,
    PRUNERS,
    SAMPLERS,
    TENSORBOARD_INSTALL,
    TOP_DEFAULTS,
    TOP_FIELDS,
    TRAINER_KEYS,
    CheckpointSpec,
    Config,
    HeartbeatSpec,
    PrunerSpec,
    StopSpec,
)
from lightning_hpo.launch.config.cli_spec import (
    OWNED_TRAINER,
    SECTIONS,
    is_cli_config,
    parse_cli,
)
from lightning_hpo.launch.config.devices import parse_devices
from lightning_hpo.launch.config.files import (
    read_config,
    run_dir_of,
    study_name,
)
from lightning_hpo.launch.config.space import Space, check_in_space, parse_space
from lightning_hpo.pruners.rungs import rung_levels

if TYPE_CHECKING:
    from optuna.samplers import BaseSampler



def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> Config:
    """Load, override and validate a config file (see :func:`resolve_config` for ``path``).

    Example::

        >>> cfg = load_config("quickstart", ["stop.n_trials=5"])
        >>> cfg.study, cfg.stop.n_trials, cfg.storage
        ('quickstart', 5, 'runs/quickstart.journal')
    """
    return parse_config(read_config(path, overrides))


# ------------------------------------------------------------------------------------------
# Validation, field by field.
# ------------------------------------------------------------------------------------------
def _section(raw: Mapping[str, Any], key: str, default: Any) -> Any:
    value = raw.get(key, default)
    return default if value is None else value


def _named(
    raw: Any, field_name: str, default_name: str | None = None
) -> tuple[str, dict[str, Any]]:
    """A ``{name: x, key: value...}`` section (or a bare name) -> (name, the other keys)."""
    if isinstance(raw, str):
        raw = {"name": raw}
    if raw is None and default_name is not None:
        raw = {"name": default_name}
    if not isinstance(raw, Mapping):
        raise ConfigError(field_name, f"must be a name or a mapping with 'name', got {raw!r}")
    args = dict(raw)
    name = args.pop("name", default_name)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{field_name}.name", f"is {name!r}, but must be a non-empty string")
    return name, args


#: The ``pruner.*`` keys besides the resources, by pruner name (from the definition).
PRUNER_KEYS: dict[str, tuple[str, ...]] = {
    name: tuple(item.name for item in fields_of(PrunerSpec)
                if item.doc.pruners is not None and name in item.doc.pruners)
    for name in PRUNERS
}


def _pruner(raw: Any) -> PrunerSpec:
    name, args = _named(raw, "pruner", TOP_DEFAULTS["pruner"])
    field_choice("pruner.name", name, PRUNERS)
    keys = [item.name for item in fields_of(PrunerSpec) if item.name != "name"
            and (item.doc.pruners is None or name in item.doc.pruners)]
    for key in args:  # one another pruner takes (left by --set pruner.name=sync_sh)
        takes = [other for other, known in PRUNER_KEYS.items() if key in known]
        if takes and name not in takes:
            raise ConfigError(f"pruner.{key}", f"is for pruner {', '.join(takes[:-1])} or "
                              f"{takes[-1]}, and the pruner is {name}: remove it (on the command "
                              f"line, --set '~pruner.{key}'); allowed: {', '.join(sorted(keys))}")
    pruner = PrunerSpec(**{**read_fields(PrunerSpec, args, "pruner", keys), "name": name})
    check_applies(PrunerSpec, args, "pruner", pruner)
    if pruner.max_resource is not None and pruner.max_resource < pruner.min_resource:
        raise ConfigError(
            "pruner.max_resource",
            f"is {pruner.max_resource}, but must be >= pruner.min_resource "
            f"({pruner.min_resource})",
        )
    if name in ("hyperband", "sync_hyperband") and pruner.max_resource is None:
        raise ConfigError("pruner.max_resource", f"is required for {name} (epochs, e.g. 27)")
    return pruner


def _checkpoint(raw: Any, pruner: PrunerSpec) -> CheckpointSpec:
    checkpoint = CheckpointSpec(**read_fields(CheckpointSpec, raw, "checkpoint"))
    check_applies(CheckpointSpec, raw, "checkpoint", pruner)
    return checkpoint


def _heartbeat(raw: Any, storage: str) -> HeartbeatSpec | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ConfigError("heartbeat", f"must be a mapping, got {raw!r}")
    field_keys(raw, [item.name for item in fields_of(HeartbeatSpec)], "heartbeat")
    if storage.startswith("grpc://"):
        raise ConfigError(
            "heartbeat",
            "is not carried by the gRPC proxy (Optuna's proxy has no heartbeat call); give the "
            "launchers the database URL, or leave heartbeat out",
        )
    if "://" not in storage or storage.startswith("sqlite"):
        raise ConfigError(
            "heartbeat",
            "is for PostgreSQL or MySQL storages (several machines); on one machine a dead "
            "worker is seen at once",
        )
    values = read_fields(HeartbeatSpec, raw, "heartbeat")
    if "grace_period" not in raw:
        values["grace_period"] = 3 * values["interval"]
    heartbeat = HeartbeatSpec(**values)
    if heartbeat.grace_period <= heartbeat.interval:
        raise ConfigError("heartbeat.grace_period", f"is {heartbeat.grace_period}, but must be > "
                          f"heartbeat.interval ({heartbeat.interval})")
    return heartbeat


def _stop(raw: Any) -> StopSpec:
    stop = StopSpec(**read_fields(StopSpec, raw, "stop"))
    if stop.n_trials is None and stop.max_wallclock_time is None:
        raise ConfigError("stop", "needs n_trials or max_wallclock_time (or both)")
    return stop


def _trainer(raw: Any, cli: bool = False) -> dict[str, Any]:
    """``trainer``: any Lightning Trainer argument but those the launcher owns.

    The types of :data:`TRAINER_KEYS` are checked here; any other key is checked against the
    Trainer's signature by :func:`check_against_registry` (a CLI config's by the CLI's parser).
    ``logger`` is the launcher's ``tensorboard | csv``; a CLI config may instead give the CLI's
    own logger (a class path mapping, a list of them, or true/false), and ``callbacks``.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError("trainer", f"must be a mapping, got {raw!r}")
    for key, value in raw.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ConfigError(f"trainer.{key}", "is not a Trainer argument name")
        if key in OWNED_TRAINER:
            raise ConfigError(f"trainer.{key}", f"is set by the launcher: {OWNED_TRAINER[key]}")
        if not cli and key == "callbacks":
            raise ConfigError("trainer.callbacks", f"needs a LightningCLI config: {_CLI_HOW}")
        if not cli and key == "logger" and not isinstance(value, str | None):
            raise ConfigError("trainer.logger", f"is {value!r}, but must be tensorboard or csv; "
                              f"a logger of your own needs a LightningCLI config: {_CLI_HOW}")
        types = TRAINER_KEYS.get(key)
        if types is None or (cli and key != "max_epochs"):  # the CLI's parser checks them
            continue
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in _tuple(types)):
            raise ConfigError(f"trainer.{key}", f"is {value!r}, but must be {type_words(key)}")
    out = dict(raw)
    if cli and out.get("logger") not in (None, "tensorboard", "csv"):
        out.pop("logger")  # the CLI's own logger, in cli.sections
    return out


def _tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def type_words(key: str) -> str:
    """What ``trainer.<key>`` of :data:`TRAINER_KEYS` may be, in words.

    Example::

        >>> type_words("check_val_every_n_epoch"), type_words("limit_val_batches")
        ('an integer >= 1, or null (validate by val_check_interval)', 'an int or a float')
    """
    from lightning_hpo.launch.config.trainer_values import ALLOWED

    if key in ALLOWED:
        return ALLOWED[key][1]
    names = {"int": "an int", "float": "a float", "str": "a string", "bool": "true or false",
             "NoneType": "null"}
    return " or ".join(names[t.__name__] for t in _tuple(TRAINER_KEYS[key]))


def _tensorboard_available() -> bool:
    """Whether the ``tensorboard`` package is installed (found, not imported: no torch here).

    Lightning's ``TensorBoardLogger`` writes with ``torch.utils.tensorboard``, which needs it.
    """
    return importlib.util.find_spec("tensorboard") is not None


def default_logger() -> Literal["tensorboard", "csv"]:
    """``trainer.logger`` when the config leaves it out: ``tensorboard`` when the package is
    installed, else ``csv``."""
    return "tensorboard" if _tensorboard_available() else "csv"


def _trainer_logger(value: Any) -> str:
    """``trainer.logger`` -> ``tensorboard`` or ``csv``; left out: :func:`default_logger`."""
    if value is None:
        return default_logger()
    name = field_choice("trainer.logger", value, LOGGERS)
    if name == "tensorboard" and not _tensorboard_available():
        raise ConfigError(
            "trainer.logger",
            f"is tensorboard, but the tensorboard package is not installed: {TENSORBOARD_INSTALL} "
            "(or set trainer.logger: csv)",
        )
    return name


def _is_yaml_value(value: Any) -> bool:
    """Whether ``value`` is what YAML (and JSON, which carries the config to workers) holds."""
    if isinstance(value, list):
        return all(_is_yaml_value(item) for item in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _is_yaml_value(v) for k, v in value.items())
    return value is None or isinstance(value, str | int | float | bool)


def _sampler(raw: Any, seed: Any) -> tuple[str, dict[str, Any], int | None]:
    """``sampler:`` -> (built-in name or class path, the class's arguments, seed).

    ``random | tpe | gp``, ``{name: random|tpe|gp, seed: N}``, or ``{class: "package.module:
    Class", seed: N, <constructor arguments>...}``. Pure: the class is imported by
    :func:`check_against_registry`.
    """
    wanted = "a 'package.module:Class' path to an optuna.samplers.BaseSampler subclass"
    if isinstance(raw, Mapping) and "class" in raw:
        args = dict(raw)
        name = args.pop("class")
        if "name" in args:
            raise ConfigError("sampler.name", "give sampler.name (a built-in sampler) or "
                              "sampler.class (your own), not both; on the command line, "
                              "replace the section: --set 'sampler={class: \"module:Class\"}'")
        module_name, colon, attr = name.partition(":") if isinstance(name, str) else ("", "", "")
        if not (colon and module_name and attr):
            raise ConfigError("sampler.class", f"is {name!r}, but must be {wanted}")
    else:
        name, args = _named(raw, "sampler", TOP_DEFAULTS["sampler"])
        if name not in SAMPLERS:
            hint = (f"; a sampler class goes in sampler.class: {{class: {name!r}}}"
                    if ":" in name else f", or sampler.class: {wanted}")
            raise ConfigError("sampler.name", f"is {name!r}; allowed: {', '.join(SAMPLERS)}{hint}")
    top = _seed("seed", seed)
    own = _seed("sampler.seed", args.pop("seed", None))
    if own is not None and top is not None and own != top:  # one seed: sampler and training
        raise ConfigError("seed", f"is {top}, but sampler.seed is {own}: the sampler and the "
                          "trials' training take one seed; give one of them")
    seed = top if own is None else own
    if name in SAMPLERS:
        field_keys(args, ("name", "seed"), "sampler")
        return name, {}, seed
    for key, value in args.items():
        if not isinstance(key, str) or not _is_yaml_value(value):
            raise ConfigError(f"sampler.{key}", f"is {value!r}, but must be a YAML value "
                              "(number, string, bool, null, or a list or mapping of them)")
    return name, args, seed


#: The largest seed: numpy's, Optuna's samplers' and Lightning's ``seed_everything``'s.
MAX_SEED = 2**32 - 1


def _seed(field: str, value: Any) -> int | None:
    """``seed`` or ``sampler.seed``: an integer from 0 to :data:`MAX_SEED`, or None."""
    seed = field_int(field, value, minimum=0, optional=True)
    if seed is not None and seed > MAX_SEED:
        raise ConfigError(field, f"is {seed}, but must be an integer from 0 to {MAX_SEED}")
    return seed


def sampler_class(name: str) -> type[BaseSampler]:
    """The Optuna sampler class of ``sampler.name`` (built-in) or ``sampler.class`` (a path).

    Imports Optuna and, for a ``"package.module:Class"`` path, that module (which must be
    importable where the launcher and its workers run: on ``PYTHONPATH``, or in the folder
    ``python -m lightning_hpo.launch`` is started from).

    Raises:
        ConfigError: ``sampler.class`` when the module cannot be imported, has no such class, or
            the class is not an ``optuna.samplers.BaseSampler`` subclass.

    Example::

        >>> sampler_class("tpe").__name__, sampler_class("optuna.samplers:QMCSampler").__name__
        ('TPESampler', 'QMCSampler')
    """
    import optuna

    from lightning_hpo._registry import resolve_class

    builtin: dict[str, type[BaseSampler]] = {
        "random": optuna.samplers.RandomSampler, "tpe": optuna.samplers.TPESampler,
        "gp": optuna.samplers.GPSampler,
    }
    key = "class" if ":" in name else "name"
    return resolve_class("sampler", name, builtin, optuna.samplers.BaseSampler, key)


def sampler_kwargs(cfg: Config, seed: int | None) -> dict[str, Any]:
    """The arguments :func:`~lightning_hpo.launch.study.search.build_sampler` builds the sampler
    with: ``cfg.sampler_args``, plus ``seed`` when the class takes one (a ``**kwargs`` class
    does).

    Args:
        cfg: a parsed config.
        seed: the seed for this worker's sampler (None: unseeded).

    Raises:
        ConfigError: ``sampler.class`` for a bad class (:func:`sampler_class`),
            ``sampler.<key>`` for an argument the constructor does not take or a required one
            left out, ``sampler.seed`` when ``sampler.seed`` is set but the class takes none.

    Example::

        >>> cfg = parse_config({"study": "s", "model": {"name": "lenet"},
        ...     "space": {"lr": {"loguniform": [0.01, 1.0]}}, "pruner": "none",
        ...     "trainer": {"max_epochs": 3}, "stop": {"n_trials": 4},
        ...     "sampler": {"class": "optuna.samplers:QMCSampler", "scramble": True}})
        >>> sampler_kwargs(cfg, 7)
        {'scramble': True, 'seed': 7}
    """
    from lightning_hpo._registry import accepts_any_keyword, init_parameters

    cls = sampler_class(cfg.sampler)
    params = init_parameters(cls)
    any_keyword = accepts_any_keyword(cls)
    if not any_keyword:
        allowed = ", ".join(key for key in params if key != "seed") or "none"
        for key in cfg.sampler_args:
            if key not in params or key == "seed":
                raise ConfigError(
                    f"sampler.{key}", f"unknown argument of {cfg.sampler!r}; allowed: {allowed}"
                )
    for key, param in params.items():
        if param.default is inspect.Parameter.empty and key not in (*cfg.sampler_args, "seed"):
            raise ConfigError(f"sampler.{key}", f"is required by {cfg.sampler!r} but was not given")
    kwargs = dict(cfg.sampler_args)
    if "seed" in params or any_keyword:
        kwargs["seed"] = seed
    else:  # the top-level seed (also the trials' training seed) is not an error here
        section = cfg.raw.get("sampler")
        if isinstance(section, Mapping) and section.get("seed") is not None:
            raise ConfigError("sampler.seed", f"is set, but {cfg.sampler!r} takes no seed")
    return kwargs


def _initial(raw: Any, space: Space) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not all(isinstance(item, Mapping) for item in raw):
        raise ConfigError("initial", "must be a list of {hyperparameter: value} mappings")
    for index, item in enumerate(raw):
        check_in_space(item, space, f"initial[{index}]")
    return [dict(item) for item in raw]


TOP_LEVEL = tuple(TOP_FIELDS)


def parse_config(raw: Mapping[str, Any]) -> Config:
    """Validate a config mapping and fill in defaults. Pure: no I/O, no torch.

    Sections are read in the order of :data:`TOP_LEVEL` (one helper each), so the first
    offending field is the one reported.

    Raises:
        ConfigError: naming the first offending field and what is allowed.
    """
    field_keys(raw, TOP_LEVEL, "")
    study = study_name(raw.get("study"))
    storage = _storage(_section(raw, "storage", f"runs/{study}.journal"))
    run_dir = run_dir_of(_section(raw, "run_dir", TOP_DEFAULTS["run_dir"]))
    cli = parse_cli(raw) if is_cli_config(raw) else None
    if cli is None:
        model, model_args = _named(raw.get("model"), "model")
        data, data_args = _named(raw.get("data"), "data", TOP_DEFAULTS["data"])
        for key in ("optimizer", "lr_scheduler"):
            if raw.get(key) is not None:
                raise ConfigError(key, f"is a LightningCLI section: {_CLI_HOW}")
    else:
        model, model_args, data, data_args = "", {}, "", {}
    metrics, directions = _objectives(raw.get("metric"), raw.get("direction"))
    metric, direction = metrics[0], directions[0]
    space = _space(_section(raw, "space", {}), fixed={**model_args, **data_args},
                   dotted=cli is not None)
    initial = _initial(_section(raw, "initial", list(TOP_DEFAULTS["initial"])), space)
    sampler, sampler_args, seed = _sampler(_section(raw, "sampler", TOP_DEFAULTS["sampler"]),
                                           raw.get("seed", TOP_DEFAULTS["seed"]))
    pruner = _pruner(_section(raw, "pruner", TOP_DEFAULTS["pruner"]))
    devices = parse_devices(_section(raw, "devices", {}))
    stop = _stop(_section(raw, "stop", {}))
    trainer = _trainer(_section(raw, "trainer", {}), cli=cli is not None)
    trainer_epochs = trainer.pop("max_epochs", None)
    logger = _trainer_logger(trainer.pop("logger", None))
    if cli is not None:
        trainer = {}  # the CLI's section (cli.sections), parsed by the CLI's own parser
    pruner, max_epochs = _max_epochs(pruner, trainer_epochs, cli=cli is not None)
    checkpoint = _checkpoint(_section(raw, "checkpoint", {}), pruner)
    if stop.n_trials is not None and len(initial) > stop.n_trials:  # each one is a trial
        raise ConfigError("initial", f"lists {len(initial)} configurations, but stop.n_trials "
                          f"is {stop.n_trials}: give at most {stop.n_trials}, or raise "
                          "stop.n_trials")
    return Config(
        study=study, storage=storage, run_dir=run_dir, model=model, model_args=model_args,
        data=data, data_args=data_args, metric=metric, direction=direction,  # type: ignore[arg-type]
        space=space, initial=initial, sampler=sampler, seed=seed, sampler_args=sampler_args,
        pruner=pruner, devices=devices, stop=stop, trainer=trainer, max_epochs=max_epochs,
        raw=copy.deepcopy(dict(raw)),
        checkpoint=checkpoint,
        heartbeat=_heartbeat(raw.get("heartbeat"), storage),
        logger=logger,  # type: ignore[arg-type]
        cli=cli,
        metrics=metrics if len(metrics) > 1 else (),
        directions=directions if len(metrics) > 1 else (),  # type: ignore[arg-type]
    )


#: How a config gets ``optimizer:``, ``lr_scheduler:``, Trainer callbacks and loggers.
_CLI_HOW = ("give the model as model: {class_path: package.module.Class} "
            "(lightning_hpo.builtin.models.LeNet works), or name your project's CLI "
            "(cli: main:cli_main, config: [config.yaml]); see the README, "
            "'Your Lightning project as it is'")


def _storage(storage: Any) -> str:
    """``storage``: a journal file path or a storage URL (opened and checked by the launcher)."""
    if not isinstance(storage, str) or not storage.strip():
        raise ConfigError("storage", "must be an Optuna storage URL or a journal file path")
    # ~/studies/s.journal is in the home folder, as in a shell (not a folder named "~")
    return storage if "://" in storage else os.path.expanduser(storage)


def _objectives(metric: Any, direction: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``metric`` and ``direction``: a name and a direction, or equally long lists of them (a
    study with several objectives). Whether the model logs them is
    :func:`check_against_registry`'s.

    Example::

        >>> _objectives(["validation_error", "parameters"], ["minimize", "minimize"])
        (('validation_error', 'parameters'), ('minimize', 'minimize'))
        >>> _objectives(None, None)
        (('validation_error',), ('minimize',))
    """
    if metric is None:
        metric = TOP_DEFAULTS["metric"]
    if isinstance(metric, list):
        if not metric:
            raise ConfigError("metric", "is an empty list, but must name at least one metric")
        for index, name in enumerate(metric):
            if not isinstance(name, str) or not name:
                shown = "empty" if name == "" else repr(name)
                raise ConfigError(f"metric[{index}]", f"is {shown}, but must be the name of a "
                                  "logged metric")
        twice = sorted({name for name in metric if metric.count(name) > 1})
        if twice:
            raise ConfigError("metric", f"names {', '.join(twice)} twice; each objective is a "
                              "different metric")
        if not isinstance(direction, list):
            shown = "missing" if direction is None else repr(direction)
            raise ConfigError("direction", f"is {shown}, but metric lists {len(metric)} metrics: "
                              f"give a list of {len(metric)} directions (minimize or maximize), "
                              "one per metric")
        if len(direction) != len(metric):
            raise ConfigError("direction", f"lists {len(direction)} direction(s) for "
                              f"{len(metric)} metrics; give one per metric, in the same order")
        directions = tuple(field_choice(f"direction[{index}]", d, DIRECTIONS)
                           for index, d in enumerate(direction))
        return tuple(metric), directions
    if not isinstance(metric, str) or not metric:
        shown = "empty" if metric == "" else repr(metric)  # --set metric=
        raise ConfigError("metric", f"is {shown}, but must be the name of a logged metric, or a "
                          "list of them (several objectives)")
    if isinstance(direction, list):
        raise ConfigError("direction", f"is a list of {len(direction)}, but metric is one name "
                          f"({metric}); give one direction, or a list of metrics")
    direction = TOP_DEFAULTS["direction"] if direction is None else direction
    return (metric,), (field_choice("direction", direction, DIRECTIONS),)


def _space(raw: Any, fixed: Mapping[str, Any], dotted: bool = False) -> Space:
    """``space``: at least one searched hyperparameter, none also ``fixed`` under model/data."""
    space = parse_space(raw, dotted=dotted)
    if not any(not isinstance(v, (str, int, float, bool, type(None))) for v in space.values()):
        raise ConfigError("space", "must search at least one hyperparameter")
    overlap = sorted(set(space) & set(fixed))
    if overlap:
        raise ConfigError(f"space.{overlap[0]}", "is also fixed under model/data; keep one")
    if dotted:  # a LightningCLI's keys: what the launcher sets for every trial is not searched
        for name, dist in space.items():
            section, _, key = name.partition(".")
            if not key and section in SECTIONS:
                _whole_section(name, dist, space)
            key = key.partition(".")[0]
            if section == "trainer" and key == "max_epochs":
                raise ConfigError(f"space.{name}", "is set by the launcher: the pruner decides "
                                  "how long a trial trains (pruner.max_resource)")
            if section == "trainer" and key in OWNED_TRAINER:
                raise ConfigError(f"space.{name}", f"is set by the launcher: {OWNED_TRAINER[key]}")
            if section == "ckpt_path":
                raise ConfigError(f"space.{name}", "is set by the launcher: a trial resumes from "
                                  "its own checkpoint")
    return space


def _whole_section(name: str, dist: Any, space: Mapping[str, Any]) -> None:
    """``space.model`` of a LightningCLI config: the CLI takes a whole section as a class path
    (``--model=package.module.Class``), so a choice of class paths is searched; a number, a
    range or a choice of them is refused here (the CLI's parser refused it as the value of the
    section's first other key, and the check blamed that key)."""
    from optuna.distributions import CategoricalDistribution

    values = dist.choices if isinstance(dist, CategoricalDistribution) else [dist]
    if all(isinstance(value, str) for value in values):
        return
    keys = [key for key in space if key.startswith(f"{name}.")]
    example = (f"space.{keys[0]}, as this space does" if keys else
               f"space.{name}.<argument>, as the CLI's fit --help lists them")
    classes = ("" if name == "trainer" else f", or choose among classes ({name}: {{choice: "
               "[package.module.A, package.module.B]})")
    raise ConfigError(f"space.{name}", f"names the whole {name} section, not one of its "
                      f"arguments: search an argument by its dotted key ({example}){classes}")


def _max_epochs(pruner: PrunerSpec, trainer_epochs: int | None,
                cli: bool = False) -> tuple[PrunerSpec, int]:
    """The epochs a trial may train: ``pruner.max_resource``, else ``trainer.max_epochs`` (which
    must agree when both are given); the pruner gets the resolved ``max_resource``. Neither is
    read from a LightningCLI project's own config files (``cli``): the study decides."""
    max_epochs = trainer_epochs
    if pruner.max_resource is not None:
        if max_epochs is not None and max_epochs != pruner.max_resource:
            raise ConfigError(
                "trainer.max_epochs",
                f"is {max_epochs}, but must equal pruner.max_resource ({pruner.max_resource}) "
                "or be left out",
            )
        max_epochs = pruner.max_resource
    if max_epochs is None:
        where = (" in this file: the trainer.max_epochs of the project's config files is not "
                 "read, the study decides") if cli else ""
        raise ConfigError("pruner.max_resource", "is required (the epochs a trial may train, "
                          f"e.g. 27; or trainer.max_epochs{where})")
    if pruner.name != "none" and pruner.max_resource is None:
        pruner = dataclasses.replace(pruner, max_resource=max_epochs)
    if pruner.min_resource > max_epochs:
        raise ConfigError("pruner.min_resource", f"is above max_epochs ({max_epochs})")
    return pruner, max_epochs


def range_end(dist: Any, end: int) -> Any:
    """The low (``end=0``) or high (``end=-1``) value of a distribution; constants as they are.

    Example::

        >>> from optuna.distributions import FloatDistribution
        >>> range_end(FloatDistribution(0.01, 1.0, log=True), -1), range_end(64, 0)
        (1.0, 64)
    """
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if isinstance(dist, CategoricalDistribution):
        return dist.choices[end]
    if isinstance(dist, FloatDistribution | IntDistribution):
        return (dist.low, dist.high)[end]
    return dist


def pause_levels(cfg: Config) -> list[int]:
    """The epochs at which the config's schedule pauses trials, ascending; empty where no trial
    pauses (stopping pruners, ``none``). Every pausing schedule's brackets are the full ladder
    or its tail (Hyperband's, :func:`~lightning_hpo.pruners.rungs.hyperband_rounds`), so together
    they pause at the full ladder's rungs.

    Example::

        >>> raw = {"study": "s", "model": "lenet", "space": {"lr": {"uniform": [0.01, 0.1]}},
        ...        "stop": {"n_trials": 9}}
        >>> pause_levels(parse_config({**raw, "pruner": {"name": "sync_hyperband",
        ...     "min_resource": 1, "max_resource": 9, "reduction_factor": 3}}))
        [1, 3, 9]
        >>> pause_levels(parse_config({**raw, "trainer": {"max_epochs": 9}}))  # ASHA: no pause
        []
    """
    p = cfg.pruner
    if not p.pauses:
        return []
    top = p.max_resource or cfg.max_epochs
    return rung_levels(p.min_resource, max_resource=top, reduction_factor=p.reduction_factor)
