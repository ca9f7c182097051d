"""Build a trial through a project's own LightningCLI, and check a config against its parser.

A project's entry point (``cli:``, :mod:`lightning_hpo.launch.config.cli_spec`) is a function
that builds its CLI from ``args`` or a ``LightningCLI`` subclass. The launcher calls it as it
is, with the trial's ``fit`` command line, while :func:`_intercept` holds
``LightningCLI.__init__``: the project's CLI then parses, links, seeds and instantiates exactly
as in ``fit``, with these differences the launcher owns:

* ``fit`` is set up but not run: the CLI is handed back with its model, data module and Trainer;
* the Trainer gets the launcher's arguments
  (:data:`~lightning_hpo.launch.config.cli_spec.OWNED_TRAINER`) and its callbacks and loggers
  after the project's own, whose loggers write one run per trial into the trial's folder;
* the worker, not the CLI's save-config callback, writes the trial's ``config.yaml``
  (:attr:`Built.config_text`), which ``python main.py fit --config`` retrains it from;
* Lightning's default ``seed_everything`` becomes the launcher's seed for the trial (``seed +
  trial number``); a seed the project sets is used as it is;
* a ``ckpt_path`` in the project's config is not resumed from, and a progress bar among its
  callbacks is left out.

Importing this module imports Lightning and jsonargparse (Lightning's ``[extra]``).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import inspect
import logging
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from lightning.pytorch import Callback, LightningDataModule, LightningModule, Trainer
from lightning.pytorch.callbacks import ProgressBar
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.loggers import Logger

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config.cli_spec import (
    FIXED_TRAINER,
    OWNED_TRAINER,
    CliSpec,
    cli_args,
    format_value,
)

__all__ = ["LINKED_WORDS", "Built", "build_trial", "hand_over", "owned_lines"]

_logger = logging.getLogger(__name__)

class _Handed(BaseException):
    """Carries the CLI out of the project's entry point (a BaseException: ``except Exception``
    in the project's own code does not swallow it)."""

    def __init__(self, cli: LightningCLI, error: Exception | None = None) -> None:
        super().__init__("LightningCLI built")
        self.cli = cli
        self.error = error


@dataclass
class Built:
    """What the project's CLI built for one trial.

    ``config_text`` is the YAML of its ``fit`` config (what ``fit --config`` takes); ``seed``
    the seed it ran ``seed_everything`` with (None: the config says ``false``).
    """

    model: LightningModule
    datamodule: LightningDataModule | None
    trainer: Trainer
    config_text: str
    seed: int | None
    #: ``"fit"``, or ``""`` where the project's CLI is made with ``run=False`` (no subcommand).
    subcommand: str = "fit"


def _entry_point(entry: str) -> Any:
    """The object ``cli:`` names (imported from the current folder or ``PYTHONPATH``).

    The module is imported with the launcher's arguments out of ``sys.argv`` (as the project's
    CLI is called, :func:`_intercept`): a module that parses them at import sees none.
    """
    module_name, _, name = entry.partition(":")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # `python -m` adds the folder it ran in; workers too
    argv = sys.argv
    sys.argv = argv[:1]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if not _is_module_or_parent(error.name, module_name):  # found, but one of its imports not
            raise ConfigError("cli", f"importing module {module_name!r} failed: {error} (a "
                              "module it imports: install it, or put the folder that holds it "
                              "on PYTHONPATH)") from None
        raise ConfigError("cli", f"cannot import module {module_name!r} ({error}); run the "
                          "launcher in the project's folder, or put it on PYTHONPATH") from None
    except SystemExit as error:  # argparse at import, sys.exit in the module
        raise ConfigError("cli", f"importing module {module_name!r} exited ({error.code})"
                          ) from None
    except Exception as error:  # the module's own code raised: an ImportError of its own too
        raise ConfigError("cli", f"importing module {module_name!r} failed: "
                          f"{type(error).__name__}: {error}") from None
    finally:
        sys.argv = argv
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise ConfigError("cli", f"module {module_name!r} has no {name!r}")
        obj = getattr(obj, part)
    if isinstance(obj, type) and not issubclass(obj, LightningCLI):
        raise ConfigError("cli", f"{entry!r} is a class but not a LightningCLI subclass")
    if not callable(obj):
        raise ConfigError("cli", f"{entry!r} is not a function or a LightningCLI subclass")
    return obj


def _is_module_or_parent(missing: str | None, module_name: str) -> bool:
    """Whether a ``ModuleNotFoundError`` for ``missing`` is about ``module_name`` itself (or a
    package on its path), not about a module it imports.

    Example::

        >>> _is_module_or_parent("pkg", "pkg.train"), _is_module_or_parent("torchvision", "main")
        (True, False)
    """
    if missing is None:
        return True
    parts = module_name.split(".")
    return missing in {".".join(parts[:end]) for end in range(1, len(parts) + 1)}


@contextlib.contextmanager
def _intercept(args: list[str], adjust: Callable[[LightningCLI], None] | None,
               trainer_args: Callable[[LightningCLI], dict[str, Any]] | None,
               parse_only: bool, seed: int | None) -> Iterator[list[str]]:
    """While active, any ``LightningCLI(...)`` parses ``args`` for ``fit``, does not run it,
    and raises :class:`_Handed` with itself (see the module docstring). Yields the stages a
    CLI reached, for an error to say whose it is: ``"init"`` (its construction began; none:
    the entry point raised before), then ``"parse"`` (its parser is set up)."""
    original = LightningCLI.__init__
    stages: list[str] = []

    def init(self: LightningCLI, *positional: Any, **keywords: Any) -> None:
        stages.append("init")
        bound = inspect.signature(original).bind(self, *positional, **keywords)
        bound.apply_defaults()
        kwargs = dict(bound.arguments)
        kwargs.pop("self")
        cls = type(self)
        # run=False: the project parses without a subcommand (python main.py --config ...)
        self._lightning_hpo_subcommand = "fit" if kwargs.get("run", True) else ""  # type: ignore[attr-defined]
        kwargs.update(args=args, run=True, save_config_callback=None)
        parser_kwargs = dict(kwargs.get("parser_kwargs") or {})
        parser_kwargs["exit_on_error"] = False
        parser_kwargs["fit"] = {**parser_kwargs.get("fit", {}), "exit_on_error": False}
        kwargs["parser_kwargs"] = parser_kwargs
        if seed is not None and kwargs.get("seed_everything_default") is True:
            kwargs["seed_everything_default"] = seed
        fit = cls.subcommands()["fit"]
        self.subcommands = lambda: {"fit": fit}  # type: ignore[method-assign]
        self._run_subcommand = lambda subcommand: None  # type: ignore[method-assign]

        def parse(parser: Any, given: Any) -> None:
            stages.append("parse")
            try:
                cls.parse_arguments(self, parser, given)
            except Exception as error:  # jsonargparse's ArgumentError, a missing file
                raise _Handed(self, error) from error
            # ``seed_everything: true`` written out (as --print_config writes Lightning's
            # default) is the default too: the trial's seed, not Lightning's fallback seed 0
            # for every trial
            if seed is not None and self.config["fit.seed_everything"] is True:
                self.config["fit.seed_everything"] = seed
            # a ckpt_path in the project's config is not resumed from (the launcher's fit takes
            # the trial's own checkpoint), and Lightning would replace the trial's model values
            # with the hyperparameters saved in it: kept aside, for the check to say so
            self._lightning_hpo_ckpt_path = self.config.get("fit.ckpt_path")  # type: ignore[attr-defined]
            if self._lightning_hpo_ckpt_path is not None:  # type: ignore[attr-defined]
                self.config["fit.ckpt_path"] = None
            if parse_only:
                raise _Handed(self)

        self.parse_arguments = parse  # type: ignore[method-assign, assignment]
        if adjust is not None:
            def before() -> None:
                cls.before_instantiate_classes(self)
                adjust(self)

            self.before_instantiate_classes = before  # type: ignore[method-assign]
        if trainer_args is not None:
            def instantiate_trainer(**given: Any) -> Trainer:
                made_by = self.trainer_class

                def without_progress_bars(**config: Any) -> Trainer:
                    # the launcher owns the progress bar (off: its workers write logs); the
                    # config's, the CLI's trainer_defaults' and add_lightning_class_args' are
                    # all here (a Trainer without one refuses to take one)
                    config["callbacks"] = [callback for callback in config.get("callbacks") or []
                                           if not isinstance(callback, ProgressBar)]
                    return made_by(**config)

                self.trainer_class = without_progress_bars  # type: ignore[assignment]
                try:
                    return cls.instantiate_trainer(self, **{**given, **trainer_args(self)})
                finally:
                    self.trainer_class = made_by

            self.instantiate_trainer = instantiate_trainer  # type: ignore[method-assign]
        original(self, **kwargs)
        raise _Handed(self)

    argv = sys.argv
    LightningCLI.__init__ = init  # type: ignore[method-assign]
    sys.argv = argv[:1]  # LightningCLI warns when given args with a command line of its own
    try:
        yield stages
    finally:
        LightningCLI.__init__ = original  # type: ignore[method-assign]
        sys.argv = argv


def hand_over(entry: str, args: list[str], **intercept: Any) -> _Handed:
    """Call the project's entry point under :func:`_intercept` and take the CLI it built."""
    target = _entry_point(entry)
    with _intercept(args, **intercept) as stages:
        try:
            if isinstance(target, type):
                target()
            elif "args" in inspect.signature(target).parameters:
                target(args=args)
            else:
                target()
        except _Handed as handed:
            return handed
        except SystemExit as error:  # a parser of the project's own that exits
            raise ConfigError("cli", f"{entry!r} exited ({error.code}) before building its "
                              "LightningCLI") from None
        except Exception as error:
            if "parse" in stages:  # the CLI's parsing or classes: the caller says whose value
                raise
            reason = f"{type(error).__name__}: {error}"
            if not stages:
                raise ConfigError("cli", f"{entry!r} raised before building its LightningCLI: "
                                  f"{reason}") from None
            hint = ("; a LightningCLI subclass as cli: is made with no arguments: name the "
                    "function that makes it with its model and data (def cli_main(args=None): "
                    f"{target.__name__}(Model, Data, args=args))"
                    if isinstance(target, type) else "")
            raise ConfigError("cli", f"{entry!r} failed setting up its LightningCLI's parser "
                              f"(add_arguments_to_parser, link_arguments), before reading any "
                              f"config: {reason.rstrip('.')}{hint}") from None
    raise ConfigError("cli", f"{entry!r} returned without building a LightningCLI: name the "
                      "function that builds it (def cli_main(args=None): MyCLI(..., args=args))"
                      " or the LightningCLI subclass")


def _loggers_of(section: Any) -> list[Any]:
    """The logger entries (namespaces with ``init_args``) of a parsed ``trainer.logger``."""
    items = section if isinstance(section, list) else [section]
    return [item for item in items if getattr(item, "init_args", None) is not None]


def _into_trial_folder(cli: LightningCLI, trial_dir: Path) -> None:
    """The project's loggers write into the trial's folder (``save_dir``); Lightning's CSV and
    TensorBoard loggers one run per trial (``version: 0`` where the project leaves it out, so a
    resumed segment continues the run; another logger's ``version`` may name a remote run)."""
    for item in _loggers_of(cli.config["fit.trainer.logger"]):
        init = item.init_args
        if "save_dir" in init:
            init.save_dir = str(trial_dir)
        if "version" in init and init.version is None and _is_folder_logger(item.class_path):
            init.version = 0


def _is_folder_logger(class_path: str) -> bool:
    """Whether a logger class keeps its runs as ``save_dir/name/version_N`` folders."""
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    module, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return False
    return isinstance(cls, type) and issubclass(cls, CSVLogger | TensorBoardLogger)


def _cap_loader_workers(cli: LightningCLI, cores: int) -> None:
    """A data module's ``num_workers`` (by name, subclass mode or not) within the slot's
    share of the cores, but not below 1 where the project asks for loader processes: its
    ``DataLoader`` may take ``persistent_workers=True`` or a ``prefetch_factor``, which torch
    refuses without one. The trial's ``config.yaml`` keeps the project's value."""
    from lightning_hpo.launch.config.devices import split_cores

    for key in ("fit.data.num_workers", "fit.data.init_args.num_workers"):
        try:
            asked = cli.config[key]
        except (KeyError, AttributeError, TypeError):
            continue
        if isinstance(asked, int) and not isinstance(asked, bool):
            capped = split_cores(cores, asked)[1] or min(asked, 1)
            if capped < asked:
                cli.config[key] = capped
                _logger.info("data.num_workers %d -> %d: this slot's share is %d core(s)",
                             asked, capped, cores)


def _dump(cli: LightningCLI, max_epochs: int) -> str:
    """The ``fit`` config as the CLI's own save-config writes it, to ``max_epochs`` (its
    ``ckpt_path`` null: a trial trains from its start); without ``Trainer.fit``'s own
    arguments (``ckpt_path``, ``weights_only``) for a CLI made with ``run=False``, whose parser
    has no such keys."""
    config = copy.deepcopy(cli.config["fit"])
    config["trainer.max_epochs"] = max_epochs
    parser = cli._subcommand_parsers["fit"]
    text = str(parser.dump(config, skip_unset=False))  # null values kept (retrains as is)
    if _subcommand_of(cli):
        return text
    loaded = yaml.safe_load(text)
    given = LightningCLI.subcommands()["fit"]  # the model and data the CLI passes itself
    for name in set(inspect.signature(Trainer.fit).parameters) - set(given) - {"self"}:
        loaded.pop(name, None)
    return str(yaml.safe_dump(loaded, sort_keys=False))


def _subcommand_of(cli: LightningCLI) -> str:
    """``"fit"``, or ``""`` for a CLI the project makes with ``run=False`` (it then calls
    ``cli.trainer.fit`` itself, and retrains with ``python main.py --config ...``)."""
    return str(getattr(cli, "_lightning_hpo_subcommand", "fit"))


def build_trial(
    spec: CliSpec,
    values: Mapping[str, Any],
    *,
    trainer_args: dict[str, Any],
    callbacks: list[Callback],
    loggers: list[Logger],
    trial_dir: Path,
    seed: int | None,
    max_epochs: int,
    cores: int | None = None,
) -> Built:
    """Build one trial's model, data module and Trainer through the project's CLI.

    Args:
        spec: the config's ``cli``, ``config`` files and inline sections.
        values: the trial's hyperparameters by the CLI's dotted keys.
        trainer_args: the Trainer arguments the launcher owns (accelerator, devices, strategy,
            max_epochs, plugins, default_root_dir ...); ``plugins`` go after the project's.
        callbacks: the launcher's callbacks, after the project's own.
        loggers: the launcher's loggers (``metrics.csv`` first); with a project logger of its
            own only the first goes before it, with ``logger: false`` only the first is kept.
        trial_dir: the trial's folder (the project's loggers write there).
        seed: the trial's seed where the config leaves ``seed_everything`` at its default.
        max_epochs: ``trainer.max_epochs`` in :attr:`Built.config_text`.
        cores: the slot's share of the CPU cores: a data module's ``num_workers`` is lowered to
            at most ``cores - 1`` (:func:`~lightning_hpo.launch.config.devices.split_cores`), as for
            the built-in data modules, but not below 1 (:func:`_cap_loader_workers`); None
            leaves it.

    Raises:
        ConfigError: ``cli`` (cannot import or call it), or ``config`` / ``space.<key>`` (the
            CLI's parser refused the trial's command line).
    """
    dumped: list[str] = []

    def adjust(cli: LightningCLI) -> None:
        dumped.append(_dump(cli, max_epochs))
        _into_trial_folder(cli, trial_dir)
        if cores is not None:
            _cap_loader_workers(cli, cores)

    def owned(cli: LightningCLI) -> dict[str, Any]:
        made = cli.config_init["fit.trainer"]
        theirs = made.get("logger")
        if theirs is None or theirs is True:
            chosen = list(loggers)
        elif theirs is False:
            chosen = loggers[:1]
        else:
            chosen = [*loggers[:1], *(theirs if isinstance(theirs, list) else [theirs])]
        plugins = made.get("plugins") or []
        plugins = list(plugins) if isinstance(plugins, list) else [plugins]
        user_callbacks = made.get("callbacks") or []
        user_callbacks = (list(user_callbacks) if isinstance(user_callbacks, list)
                          else [user_callbacks])
        out = {**trainer_args, "logger": chosen, "callbacks": [*user_callbacks, *callbacks],
               "plugins": [*plugins, *trainer_args.get("plugins", [])],
               **FIXED_TRAINER}
        for key, quiet in (("enable_model_summary", False), ("num_sanity_val_steps", 0)):
            if made.get(key) is None:
                out[key] = quiet
        return out

    handed = hand_over(spec.entry, cli_args(spec, values), adjust=adjust, trainer_args=owned,
                        parse_only=False, seed=seed)
    if handed.error is not None:
        raise _parse_error(handed.error, values, spec)
    cli = handed.cli
    ran = cli.config["fit.seed_everything"]
    return Built(cli.model, cli.datamodule, cli.trainer, dumped[0],
                 None if ran is False else int(ran), _subcommand_of(cli))


_KEY = re.compile(r'(?:Parser key "|--)([A-Za-z_][\w.]*)')
#: jsonargparse's refusal of a value given for the target of a ``link_arguments``.
_LINKED = re.compile(r'Linked "([A-Za-z_][\w.]*)" must be given via "([^"]*)"')
#: How a space key that the project's CLI links from another one is refused (as it is, by
#: ``--check`` too: no value of it would do).
LINKED_WORDS = "cannot be searched: the project's CLI sets it"


def _parse_error(error: Exception, values: Mapping[str, Any], spec: CliSpec) -> ConfigError:
    """A parser error as a ConfigError on the space key it names, else on ``config``."""
    message = " ".join(str(error).split())
    linked = _LINKED.search(message)
    if linked is not None and linked.group(1) in values:
        return ConfigError(f"space.{linked.group(1)}", f"{LINKED_WORDS} from "
                           f"{linked.group(2)} (link_arguments); leave it out of space")
    for key in _KEY.findall(message):
        named = [name for name in values
                 if key == name or key.startswith(name + ".") or name.startswith(key + ".")]
        # The parser may name a parent ("optimizer") and quote the child ('nope'): prefer it.
        named.sort(key=lambda name: f"'{name.rpartition('.')[2]}'" not in message)
        if named:
            return ConfigError(f"space.{named[0]}", f"is refused by the CLI's parser: {message}")
    what = [*spec.files, *(["the tune config's sections"] if spec.sections else [])]
    return ConfigError("config", f"the CLI's parser refused {' + '.join(what) or 'the config'}: "
                       f"{message}")


# ------------------------------------------------------------------------------------------
# --check: every space key against the CLI's parser and classes.
# ------------------------------------------------------------------------------------------
def owned_lines(trainer: Mapping[str, Any], max_epochs: int | None = None) -> list[str]:
    """``trainer.devices=4 in the project's config is replaced: ...``, one line per owned
    Trainer argument the project's parsed config sets to something but its default (and but
    the launcher's own value, :data:`~lightning_hpo.launch.config.cli_spec.FIXED_TRAINER`), and one
    for a ``max_epochs`` other than the study's.

    Example::

        >>> owned_lines({"devices": 4, "accelerator": "auto", "max_epochs": 20}, 9)
        ... # doctest: +NORMALIZE_WHITESPACE
        ["trainer.max_epochs=20 in the project's config is replaced: the pruner decides, up to
          pruner.max_resource (9 epochs)",
         "trainer.devices=4 in the project's config is replaced: each trial runs on its slot's
          devices (set devices.per_trial)"]
    """
    defaults = {key: param.default for key, param in
                inspect.signature(Trainer.__init__).parameters.items()}
    lines = []
    given = trainer.get("max_epochs")
    if max_epochs is not None and given is not None and given != max_epochs:
        lines.append(f"trainer.max_epochs={given} in the project's config is replaced: the "
                     f"pruner decides, up to pruner.max_resource ({max_epochs} epochs)")
    for key, why in OWNED_TRAINER.items():
        value = trainer.get(key, defaults.get(key))
        same = key in FIXED_TRAINER and value == FIXED_TRAINER[key]
        if key in defaults and value != defaults[key] and not same:
            shown = format_value(value) if isinstance(value, str | int | float) else repr(value)
            lines.append(f"trainer.{key}={shown} in the project's config is "
                         f"replaced: {why}")
    return lines
