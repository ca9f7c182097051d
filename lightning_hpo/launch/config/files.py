"""The launcher's config file as a file: find it, read its YAML, apply ``--set`` overrides.

Light on purpose (YAML and the standard library, no Optuna): ``python -m lightning_hpo.launch``
reads the file and starts its workers (:mod:`lightning_hpo.launch.processes.early`) before it
imports what validates the config (:func:`~lightning_hpo.launch.config.parse_config`). The two
fields that say where a run writes, ``study`` and ``run_dir``, are checked here too: the
early start makes the workers' log folder from them.

Example::

    >>> raw = apply_overrides(read_yaml(resolve_config("quickstart")), ["stop.n_trials=5"])
    >>> raw["study"], raw["stop"]["n_trials"], study_name(raw["study"])
    ('quickstart', 5, 'quickstart')
"""

from __future__ import annotations

import copy
import datetime
import importlib.resources
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config.cli_spec import is_cli_config

__all__ = [
    "CONFIG_DIR",
    "DEFAULT_CONFIG",
    "apply_overrides",
    "read_config",
    "read_yaml",
    "resolve_config",
    "run_dir_of",
    "shipped_configs",
    "study_name",
]


def _shipped_config_dir() -> Path:
    """``configs/`` inside the installed package (a wheel), else the source checkout's own.

    pyproject.toml maps the top-level ``configs/`` folder into the wheel as
    ``lightning_hpo/configs/``; a checkout on ``PYTHONPATH`` or an editable install has no such
    folder in the package and reads the checkout's ``configs/`` next to ``lightning_hpo/``.
    """
    packaged = importlib.resources.files("lightning_hpo") / "configs"
    if isinstance(packaged, Path) and packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "configs"


#: The folder of the shipped configs (see :func:`_shipped_config_dir`).
CONFIG_DIR = _shipped_config_dir()
#: The config ``python -m lightning_hpo.launch`` runs with no argument.
DEFAULT_CONFIG = CONFIG_DIR / "quickstart.yaml"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class _Loader(yaml.SafeLoader):
    """YAML's safe loader that reads ``1e-3`` as a float (plain YAML 1.1 needs ``1.0e-3``) and
    refuses a key given twice in one mapping (YAML's loader keeps the last silently: a second
    ``space:`` would drop the first's parameters). Keys a merge (``<<: *base``) brings in may
    still be overridden. It notes the plain scalars without a tag (:attr:`plain`, by node id),
    whose type YAML guesses from their text, for :func:`_misread`."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.plain: set[int] = set()

    def compose_scalar_node(self, anchor: Any) -> yaml.ScalarNode:
        event = self.peek_event()
        node = super().compose_scalar_node(anchor)
        if event.implicit[0]:  # plain and untagged (``!!int 0777`` says what it means)
            self.plain.add(id(node))
        return node

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    earlier = first.setdefault(key, key_node)
                except TypeError:  # an unhashable key: the base class says so
                    continue
                if earlier is not key_node:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} is given twice (first on line "
                        f"{earlier.start_mark.line + 1}); keep one", key_node.start_mark)
        return super().construct_mapping(node, deep)  # type: ignore[no-any-return]


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _yaml(text: str, where: str = "") -> Any:
    """The YAML document ``text`` (one, or None when empty), read with :class:`_Loader`.

    Args:
        text: the YAML text.
        where: the dotted field the text is the value of (``--set`` overrides), "" for a file.

    Raises:
        _Misread: a plain scalar YAML 1.1 reads as something else than it is written as
            (:func:`_misread`).
        yaml.YAMLError: the text is not YAML.
    """
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        misread = _misread(node, loader.plain, where)
        if misread is not None:
            raise misread
        return loader.construct_document(node)
    finally:
        loader.dispose()


class _Misread(Exception):  # noqa: N818 (not an error of its own: read as a ConfigError)
    """A plain scalar that YAML 1.1 reads as something else than it is written as.

    Args:
        field: its dotted path (``stop.max_wallclock_time``, ``space.act.choice[0]``).
        text: how it is written (``1:30``).
        how: what YAML reads and what to write instead (``the octal number 511; write 511 or
            777 (no leading zero) for a number``; for a key, only what YAML reads):
            :meth:`error` adds how to write it as text.
    """

    def __init__(self, field: str, text: str, how: str) -> None:
        super().__init__(f"{field}: {text} is read by YAML 1.1 as {how}")
        self.field, self.text, self.how = field, text, how

    def error(self, field: str, quoted: str) -> ConfigError:
        """As a ConfigError on ``field``, advising ``quoted`` (how to write it as text)."""
        text = f", or {quoted} for text" if ";" in self.how else f"; write {quoted} for text"
        return ConfigError(field, f"{self.text} is read by YAML 1.1 as {self.how}{text}")


_OCTAL = re.compile(r"^([-+]?)0[0-7_]+$")
_YES_NO = ("yes", "no", "on", "off")
#: Fields whose own check says more (``study: 0777`` names the study, see :func:`study_name`).
_OWN_CHECK = ("study",)


def _misread(root: yaml.Node, plain: set[int], where: str = "") -> _Misread | None:
    """The first plain scalar (key or value) under ``root`` that YAML 1.1 reads as something
    else than it is written as, or None: ``1:30`` (the base-60 number 90), ``0777`` (the octal
    number 511), ``yes``, ``no``, ``on``, ``off`` (booleans; ``true`` and ``false`` are taken).

    Args:
        root: a composed YAML node.
        plain: the ids of the plain, untagged scalar nodes (:attr:`_Loader.plain`).
        where: the dotted field ``root`` is the value of ("" for a whole file).
    """
    pending: list[tuple[yaml.Node, str]] = [(root, where)]
    seen: set[int] = set()
    keys: set[int] = set()
    while pending:  # in the document's order; an alias is walked once
        node, path = pending.pop()
        if id(node) in seen or path in _OWN_CHECK:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            how = _misreading(node) if id(node) in plain else None
            if how is not None:
                if id(node) in keys:  # a name: text, never a number or a boolean
                    how = how.partition(";")[0]
                return _Misread(path or "config", str(node.value), how)
            continue
        children: list[tuple[yaml.Node, str]] = []
        if isinstance(node, yaml.SequenceNode):
            children = [(item, f"{path}[{index}]") for index, item in enumerate(node.value)]
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.tag == "tag:yaml.org,2002:merge":  # <<: *base, its keys land here
                    children.append((value, path))
                    continue
                name = f"{path}.{key.value}" if path else str(key.value)
                keys.add(id(key))
                children += [(key, name), (value, name)]
        pending.extend(reversed(children))
    return None


def _misreading(node: yaml.ScalarNode) -> str | None:
    """What YAML 1.1 reads the plain scalar ``node`` as and what to write instead, where that
    is not what it is written as; else None.

    Example::

        >>> _misreading(yaml.compose("1:30", Loader=_Loader))
        'the base-60 number 90 (1*60 + 30); write the number itself (e.g. 90) for a number'
        >>> _misreading(yaml.compose("0777", Loader=_Loader))
        'the octal number 511; write 511 or 777 (no leading zero) for a number'
        >>> _misreading(yaml.compose("10", Loader=_Loader)) is None
        True
    """
    text, tag = str(node.value), node.tag
    if tag == "tag:yaml.org,2002:bool" and text.lower() in _YES_NO:
        return f"the boolean {str(yaml.safe_load(text)).lower()}; write true or false for a boolean"
    if tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") and ":" in text:
        read = yaml.safe_load(text)
        parts = text.split(":")
        terms = " + ".join(f"{part}*{60 ** (len(parts) - 1 - at)}" if at < len(parts) - 1
                           else part for at, part in enumerate(parts))
        sum_of = f" ({terms})" if text[0].isdigit() else ""
        return (f"the base-60 number {read}{sum_of}; write the number itself (e.g. {read}) for "
                "a number")
    octal = _OCTAL.match(text)
    if tag == "tag:yaml.org,2002:int" and octal is not None:
        read = yaml.safe_load(text)
        decimal = octal.group(1) + (text.lstrip("+-").lstrip("0_") or "0")
        other = "" if decimal == str(read) else f" or {decimal} (no leading zero)"
        return f"the octal number {read}; write {read}{other} for a number"
    return None


def _decode(data: bytes, path: str | Path) -> str:
    """The text of a config file, which must be UTF-8 (a leading byte-order mark is fine)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ConfigError(
            "config",
            f"{path} is not UTF-8 text (byte 0x{data[error.start]:02x} on line {line}); "
            "save it as UTF-8",
        ) from None


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a UTF-8 config file with YAML's safe loader (no Python object tags).

    Raises:
        ConfigError: ``config: ...`` when the file cannot be read, is not UTF-8, is not YAML or
            does not hold a mapping; ``<field>: ...`` for a plain value YAML 1.1 reads as
            something else than written (``1:30`` is 90, ``0777`` is 511, ``on`` is true;
            :func:`_misread`), with how to write it.

    Example::

        >>> read_yaml(DEFAULT_CONFIG)["study"]
        'quickstart'
    """
    try:
        text = _decode(Path(path).read_bytes(), path)
    except OSError as error:
        names = list(shipped_configs()) if isinstance(error, FileNotFoundError) else []
        hint = f"; or name a shipped config: {', '.join(names)}" if names else ""
        raise ConfigError(
            "config", f"cannot read {path}: {error.strerror or error}{hint}"
        ) from None
    try:
        raw = _yaml(text)
    except _Misread as misread:
        raise misread.error(misread.field, f'"{misread.text}" in quotes') from None
    except RecursionError:
        raise ConfigError("config", f"{path} nests lists or mappings too deeply to "
                          "read") from None
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        if not at and isinstance(getattr(error, "position", None), int):  # a yaml.ReaderError
            at = f" at character {error.position + 1}"  # type: ignore[attr-defined]
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError("config", f"{path} is not valid YAML{at}: {problem}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        kind = type(raw).__name__
        raise ConfigError("config", f"{path} must hold a mapping of fields, got {kind}")
    endless = _endless(raw)
    if endless is not None:
        raise ConfigError("config", f"{path}: {endless}")
    return raw


def _endless(value: Any, prefix: str = "") -> str | None:
    """Why ``value`` never ends, or None: a YAML alias inside the anchor it names
    (``model: &m {name: lenet, args: *m}``) makes a mapping or list that holds itself, which no
    check, copy to JSON or class can take.

    Example::

        >>> loop: dict = {"name": "lenet"}
        >>> loop["args"] = loop
        >>> _endless({"model": loop})
        'model.args is an alias (*name) inside the anchor it names (&name): a structure
         without end; write its values out'
        >>> _endless({"a": [1], "b": [1]}) is None
        True
    """
    pending: list[tuple[Any, str, frozenset[int]]] = [(value, prefix, frozenset())]
    while pending:  # not recursive: a deep structure must not exhaust Python's stack
        node, where, above = pending.pop()
        if not isinstance(node, dict | list):
            continue
        if id(node) in above:
            return (f"{where} is an alias (*name) inside the anchor it names (&name): a "
                    "structure without end; write its values out")
        inner = above | {id(node)}
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, item in items:
            path = f"{where}[{key}]" if isinstance(node, list) else (
                f"{where}.{key}" if where else str(key))
            pending.append((item, path, inner))
    return None


def apply_overrides(raw: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Return a copy of ``raw`` with ``--set`` overrides applied, in order, as Hydra reads them:

    * ``key.sub=value`` sets a field to ``value`` read as YAML (``null`` or ``~``: YAML's null,
      which for most fields means "not given": the default), creating sections on the way;
    * ``key.sub=`` (nothing after ``=``) sets it to the empty string, which a field that needs a
      name or a choice refuses;
    * ``~key.sub`` removes the field (``~pruner.mode`` after ``pruner.name=sync_sh``); one that
      is not there is refused.

    Raises:
        ConfigError: ``--set`` for an item of neither form, ``--set <key>`` for a value that is
            not YAML or that YAML 1.1 reads as something else than written (as
            :func:`read_yaml`), a path through a field that is not a section, or nothing to
            remove.

    Example::

        >>> apply_overrides({"stop": {"n_trials": 50}}, ["stop.n_trials=20"])
        {'stop': {'n_trials': 20}}
        >>> apply_overrides({"pruner": {"name": "asha", "mode": "promotion"}},
        ...                 ["pruner.name=sync_sh", "~pruner.mode"])
        {'pruner': {'name': 'sync_sh'}}
    """
    out = copy.deepcopy(dict(raw))
    study_text: str | None = None  # the text of the last override of `study`
    for item in overrides:
        remove = item.strip().startswith("~")
        key, sep, text = item.strip().removeprefix("~").partition("=")
        key = ".".join(part.strip() for part in key.split("."))  # `--set "stop.n_trials = 5"`
        if remove and sep:
            raise ConfigError("--set", f"'{item}': to remove a field give its key alone, "
                              f"--set '~{key}'; to set it, {key}={text}")
        if (not sep and not remove) or not key or any(not part for part in key.split(".")):
            raise ConfigError("--set", f"'{item}' must look like key.sub=value, or ~key.sub to "
                              "remove a field")
        value: Any = None
        if not remove:
            shown_text = text if text.isprintable() else repr(text)[1:-1]  # a NUL, a tab
            try:
                value = _yaml(text, key) if text.strip() else ""  # Hydra's `key=`: ""
            except _Misread as misread:
                quoted = (f"--set {key}='\"{misread.text}\"'" if misread.field == key
                          else f'"{misread.text}" in quotes')
                raise misread.error(f"--set {misread.field}", quoted) from None
            except RecursionError:
                raise ConfigError(f"--set {key}", "nests lists or mappings too deeply to "
                                  "read") from None
            except yaml.YAMLError as error:
                problem = getattr(error, "problem", None)
                why = f": {problem}" if isinstance(problem, str) and "twice" in problem else ""
                raise ConfigError(f"--set {key}",
                                  f"cannot parse value '{shown_text}' as YAML{why}") from None
            endless = _endless(value, key)
            if endless is not None:
                raise ConfigError(f"--set {key}", endless)
        shown = f"--set ~{key}" if remove else f"--set {key}"
        node: dict[str, Any] = out
        parts = _override_path(out, key.split("."))
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None and not remove:
                child = node[part] = {}
            if depth == 0 and isinstance(child, str) and part in _NAMED_SECTIONS:
                child = node[part] = {"name": child}  # `pruner: none` -> `pruner.name=asha`
            if not isinstance(child, dict):
                where = ".".join(parts[: depth + 1])
                what = "not in the config" if child is None else "not a mapping"
                raise ConfigError(shown, f"'{where}' is {what}")
            node = child
        if remove:
            if parts[-1] not in node:
                raise ConfigError(shown, "is not in the config: there is nothing to remove")
            del node[parts[-1]]
            continue
        node[parts[-1]] = value
        if parts == ["study"]:
            study_text = text.strip()
    if study_text is not None and _not_text(out.get("study")):  # 0777: quote what was typed
        study_name(out["study"], typed=study_text, source="--set")
    return out


def _not_text(value: Any) -> bool:
    """Whether YAML read a plain scalar as something other than text (0777, 1e3, yes, an
    ISO date)."""
    return isinstance(value, int | float | datetime.date)  # bool is an int, datetime a date


def read_config(path: str | Path | None, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """:func:`read_yaml` with ``--set`` overrides applied (:func:`apply_overrides`).

    A ``study`` that YAML read as a number (``study: 0777`` is octal 511), a boolean
    (``study: yes``) or a date is refused here, where the text it was read from is known, so
    the advice quotes the name as it was typed.

    Raises:
        ConfigError: as :func:`read_yaml` and :func:`apply_overrides`; ``study`` for a name
            YAML read as something else than text.

    Example::

        >>> read_config("quickstart", ["study=demo"])["study"]
        'demo'
    """
    path = resolve_config(path)
    raw = apply_overrides(read_yaml(path), overrides)
    if _not_text(raw.get("study")):  # from the file: apply_overrides refused an override's
        study_name(raw["study"], typed=_typed_text(path, "study"))
    return raw


def _typed_text(path: str | Path, key: str) -> str | None:
    """The text the top-level ``key`` of the YAML file ``path`` is written as (``0777``), when
    it is a plain scalar there (not brought in by a merge key); None otherwise."""
    try:
        root = yaml.compose(_decode(Path(path).read_bytes(), path), Loader=_Loader)
    except (OSError, ConfigError, yaml.YAMLError):
        return None
    if not isinstance(root, yaml.MappingNode):
        return None
    for key_node, value_node in root.value:
        if key_node.value == key and isinstance(value_node, yaml.ScalarNode):
            return str(value_node.value)
    return None


#: Sections that may be a bare name (``pruner: none``): an override of one of their keys reads
#: it as ``{name: none}``.
_NAMED_SECTIONS = ("model", "data", "pruner", "sampler")


def _override_path(raw: Mapping[str, Any], parts: list[str]) -> list[str]:
    """The path of an override: in a LightningCLI config a space key is one dotted name, so
    ``space.model.hidden_dim`` is ``["space", "model.hidden_dim"]`` (the longest existing key
    of ``space`` that starts the rest, followed by what remains; else the whole rest).

    Example::

        >>> cli = {"cli": "main:cli_main", "space": {"model.dropout": {"uniform": [0, 1]}}}
        >>> _override_path(cli, ["space", "model", "hidden_dim"])
        ['space', 'model.hidden_dim']
        >>> _override_path(cli, ["space", "model", "dropout", "uniform"])
        ['space', 'model.dropout', 'uniform']
        >>> _override_path({"space": {}}, ["space", "lr", "loguniform"])
        ['space', 'lr', 'loguniform']
    """
    if len(parts) <= 2 or parts[0] != "space" or not is_cli_config(raw):
        return parts
    space = raw.get("space")
    keys = space if isinstance(space, Mapping) else {}
    for end in range(len(parts), 1, -1):
        if ".".join(parts[1:end]) in keys:
            return ["space", ".".join(parts[1:end]), *parts[end:]]
    return ["space", ".".join(parts[1:])]


def shipped_configs() -> dict[str, Path]:
    """The configs shipped with the package, by name (the file name without ``.yaml``).

    Example::

        >>> list(shipped_configs())  # doctest: +NORMALIZE_WHITESPACE
        ['dropout_mlp_tpe_hyperband', 'lenet_ddp', 'lenet_error_vs_size', 'lenet_fashion_mnist',
         'quickstart', 'random_search']
    """
    return {path.stem: path for path in sorted(CONFIG_DIR.glob("*.yaml"))}


def resolve_config(path: str | Path | None) -> Path:
    """The config file to read: ``path`` itself, or the shipped config it names.

    ``None`` is the quickstart (:data:`DEFAULT_CONFIG`). A bare name (no folder) that is not
    a file here, such as ``lenet_ddp`` or ``lenet_ddp.yaml``, is the shipped config of that name
    (:func:`shipped_configs`); any other path is returned as given, relative to the current
    folder, for :func:`read_yaml` to read or to report.

    Example::

        >>> resolve_config("lenet_ddp") == CONFIG_DIR / "lenet_ddp.yaml"
        True
        >>> resolve_config(None) == DEFAULT_CONFIG
        True
        >>> str(resolve_config("experiments/mine.yaml"))
        'experiments/mine.yaml'

    Raises:
        ConfigError: ``config`` for a URL that is not a file here (a storage URL typed where
            the config goes), its password masked.
    """
    if path is None:
        return DEFAULT_CONFIG
    if "://" in str(path) and not Path(path).exists():  # a storage URL typed where CONFIG goes
        from lightning_hpo.storage import mask  # only when refusing: it imports Optuna

        raise ConfigError("config", f"is a URL ({mask(str(path))}), but must be a YAML file or "
                          "a shipped config's name; a storage URL goes in --set storage=URL")
    path = Path(path)
    if len(path.parts) == 1 and not path.exists():
        shipped = shipped_configs().get(path.name.removesuffix(".yaml"))
        if shipped is not None:
            return shipped
    return path




def study_name(study: Any, typed: str | None = None,
               source: Literal["file", "--set"] = "file") -> str:
    """``study``: the study's name, which also names its folder under ``run_dir``.

    Args:
        study: the value of ``study``.
        typed: the text YAML read ``study`` from, where known: a name such as ``0777`` that
            YAML reads as a number (octal 511) is quoted back as it was typed.
        source: where ``typed`` was written: ``"file"`` (``study: "0777"``) or ``"--set"``
            (``--set study='"0777"'``).

    Example::

        >>> study_name("lenet-asha")
        'lenet-asha'
        >>> study_name(511, typed="0777", source="--set")
        Traceback (most recent call last):
        ...
        lightning_hpo.errors.ConfigError: study: is 0777, which YAML reads as the number 511:
            quote the name, --set study='"0777"'
    """
    if study is None:  # an empty file, or `study:` with no value (~ in YAML)
        raise ConfigError("study", "is missing: name the study (study: lenet-asha), or start "
                          "from a shipped config (python -m lightning_hpo.launch --list-configs)")
    if study == "":
        raise ConfigError("study", "is empty: name the study (study: lenet-asha)")
    if isinstance(study, str) and _NAME.match(study):
        return study
    number = isinstance(study, int | float) and not isinstance(study, bool)
    typed = typed if _not_text(study) else None  # what YAML read as something else than text
    shown = repr(study)
    if typed is not None:
        read = _reading(study, typed)
        if _NAME.match(typed):
            quoted = f"--set study='\"{typed}\"'" if source == "--set" else f'study: "{typed}"'
            raise ConfigError("study", f"is {typed}, which YAML reads as {read}: quote the "
                              f"name, {quoted}")
        shown = f"{typed} (YAML reads {read})"
    quote = (" (a number, not a name: in YAML, write the name in quotes, study: \"0777\")"
             if number and typed is None else "")
    raise ConfigError(
        "study",
        f"is {shown}, but must be 1-128 ASCII letters, digits, '.', '_' or '-', starting with a "
        f"letter or digit (it names a folder under run_dir){quote}",
    )


def _reading(value: Any, typed: str) -> str:
    """What YAML read the plain scalar ``typed`` as, in words (``value``: what it read).

    Example::

        >>> _reading(511, "0777"), _reading(123, "123"), _reading(True, "yes")
        ('the number 511', 'a number', 'the boolean true')
    """
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return "a number" if typed == str(value) else f"the number {value}"
    return "a date"


def run_dir_of(run_dir: Any) -> str:
    """``run_dir``: the folder that holds each study's trial folders (default ``runs``)."""
    if not isinstance(run_dir, str) or not run_dir:
        raise ConfigError("run_dir", f"is {run_dir!r}, but must be a folder path")
    return os.path.expanduser(run_dir)  # ~/runs is in the home folder, as in a shell
