"""The job flags, defined once for every front door, and job files (``--config job.toml``).

Every job flag of ``plan train|infer``, ``compare train|infer`` and ``report train|infer`` is one
:class:`JobFlag` in :data:`JOB_FLAGS`. :func:`add_job_args` adds the flags of a kind (``train``
or ``infer``) to a parser for a front door (``plan`` or ``compare``; ``report`` is ``compare``
with ``--out``). A job file is TOML whose keys are the long flag names (``seq-len`` or
``seq_len``); values on the command line override the file, and the file overrides the defaults.

To add a job flag everywhere (every front door and job files): append one ``JobFlag`` to
``JOB_FLAGS`` (or call :func:`register_flag` from your own module before the parser is built),
stating its kinds and, if it is not meaningful on every front door, its doors. Its value arrives
on ``args`` under the flag's dest (``--memory-headroom`` -> ``args.memory_headroom``).

Argparse defaults are all None so that "not given" is visible; the flag's own default is applied
after the file is merged (:func:`resolve_job`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from flopwise.cli._args import add_db, add_json, typed
from flopwise.cli.job_flag import (
    ACTIVATION_DTYPES,
    BOOL,
    DOORS,
    FLAG,
    KINDS,
    KV_DTYPES,
    WEIGHT_DTYPES,
    JobFlag,
    _csv_list,
)
from flopwise.cli.job_flags import JOB_FLAGS
from flopwise.errors import FlopwiseError
from flopwise.plan.train.job import TRAIN_DTYPES

__all__ = [
    "ACTIVATION_DTYPES",
    "BOOL",
    "DOORS",
    "FLAG",
    "JOB_FLAGS",
    "KINDS",
    "KV_DTYPES",
    "TRAIN_DTYPES",
    "WEIGHT_DTYPES",
    "JobFlag",
    "add_job_args",
    "flags_for",
    "job_command",
    "load_job_file",
    "register_flag",
    "resolve_job",
    "to_toml",
]


def register_flag(flag: JobFlag) -> None:
    """Add a job flag to every front door of its kinds and to job files (call before parsing)."""
    if any(f.name == flag.name and set(f.kinds) & set(flag.kinds) for f in JOB_FLAGS):
        raise ValueError(f"job flag --{flag.name} is already defined")
    JOB_FLAGS.append(flag)


def flags_for(kind: str, door: str) -> list[JobFlag]:
    return [f for f in JOB_FLAGS if f.applies(kind, door)]


def _known_names(kind: str) -> set[str]:
    return {f.name for f in JOB_FLAGS if kind in f.kinds}


def add_job_args(p: argparse.ArgumentParser, kind: str, door: str) -> None:
    """The MODEL argument, --config/--print-config, every job flag of `kind` for `door`, --json
    and --db. Call :func:`resolve_job` (or wrap the handler in :func:`job_command`) to merge."""
    p.add_argument(
        "model",
        metavar="MODEL",
        nargs="?",
        help="catalog id, alias, HF repo name (org/name) or config.json path (or `model` in "
        "--config)",
    )
    p.add_argument(
        "--config",
        metavar="JOB.toml",
        help="job file: TOML whose keys are these long flag names; flags given override it",
    )
    p.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved job as TOML (a job file) and exit",
    )
    groups: dict[str, Any] = {}
    exclusive: dict[str, Any] = {}
    for f in flags_for(kind, door):
        target: Any = p
        if f.group:
            if f.group not in groups:
                groups[f.group] = p.add_argument_group(f.group)
            target = groups[f.group]
        if f.exclusive and not f.combines_with:
            if f.exclusive not in exclusive:
                exclusive[f.exclusive] = target.add_mutually_exclusive_group()
            target = exclusive[f.exclusive]
        names = [f"--{f.name}", *([f.short] if f.short else [])]
        help_ = f.help + (" [required]" if f.required else "")
        kw: dict[str, Any] = {"dest": f.dest, "default": None, "help": help_}
        if f.action == BOOL:
            kw["action"] = argparse.BooleanOptionalAction
        elif f.action == FLAG:
            kw["action"] = "store_const"
            kw["const"] = True
        else:
            if f.parse is not None:
                kw["type"] = typed(f.parse)
            if f.choices is not None:
                kw["choices"] = f.choices
            if f.metavar:
                kw["metavar"] = f.metavar
            if f.const is not None:
                kw["nargs"] = "?"
                kw["const"] = f.const
        target.add_argument(*names, **kw)
    p.set_defaults(job_kind=kind, job_door=door)
    add_db(p)
    add_json(p)


def load_job_file(path: str) -> dict[str, Any]:
    """Read a TOML job file into {flag name: value} (keys normalised to '-')."""
    import tomllib

    file = Path(path)
    if not file.is_file():
        raise FlopwiseError(f"--config {path!r}: no such file")
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise FlopwiseError(f"--config {path!r} is not valid TOML: {exc}") from None
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            raise FlopwiseError(
                f"--config {path!r}: [{key}] tables are not job keys; write flat `name = value` "
                "lines"
            )
        out[key.replace("_", "-")] = value
    return out


def _model_from_file(model: str, path: str) -> str:
    """A relative config.json path in a job file is relative to the job file's folder."""
    candidate = Path(path).parent / model
    looks_like_path = model.endswith(".json") or model.startswith((".", "/", "~"))
    if looks_like_path and not Path(model).is_absolute() and candidate.exists():
        return str(candidate)
    return model


def _from_file(f: JobFlag, value: Any, path: str) -> Any:
    where = f"--config {path!r}: {f.name}"
    if f.action in (BOOL, FLAG):
        if not isinstance(value, bool):
            raise FlopwiseError(f"{where} = {value!r} must be true or false")
        return value
    if isinstance(value, bool):
        raise FlopwiseError(f"{where} = {value!r}: not a true/false option")
    if isinstance(value, list) and f.name in ("accelerators", "provider"):
        return _csv_list(value)
    text = (
        value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
    )
    try:
        parsed = f.parse(text) if f.parse is not None else text
    except (FlopwiseError, ValueError) as exc:
        raise FlopwiseError(f"{where} = {value!r}: {exc}") from None
    if f.choices is not None and parsed not in f.choices:
        valid = ", ".join(str(c) for c in f.choices)
        raise FlopwiseError(f"{where} = {value!r}; valid: {valid}")
    return parsed


def resolve_job(args: argparse.Namespace) -> dict[str, Any]:
    """Merge flags over the job file over the defaults into `args`; return the resolved job
    ({flag name: value}, unset values left out)."""
    done = getattr(args, "_resolved_job", None)
    if done is not None:
        return dict(done)
    kind, door = args.job_kind, args.job_door
    mine = {f.name: f for f in flags_for(kind, door)}
    file_values: dict[str, Any] = {}
    if getattr(args, "config", None):
        raw = load_job_file(args.config)
        known = _known_names(kind) | {"model"}
        ignored = []
        for key, value in raw.items():
            if key == "model":
                file_values[key] = _model_from_file(str(value), args.config)
            elif key in mine:
                file_values[key] = _from_file(mine[key], value, args.config)
            elif key in known:
                ignored.append(key)
            else:
                raise FlopwiseError(
                    f"--config {args.config!r}: unknown key {key!r}; valid for {kind} jobs: "
                    f"{', '.join(sorted(known))}"
                )
        if ignored:
            sys.stderr.write(
                f"flopwise: note: {door} {kind} ignores {', '.join(ignored)} from "
                f"{args.config} (used by another front door)\n"
            )
    if args.model is None:
        args.model = file_values.get("model")
    if not args.model:
        raise FlopwiseError("MODEL is required (as an argument or `model = ...` in --config)")
    resolved: dict[str, Any] = {"model": args.model}
    for name, f in mine.items():
        value = getattr(args, f.dest)
        if value is None:
            value = file_values.get(name, f.default)
        setattr(args, f.dest, value)
        if value is not None:
            resolved[name] = value
    for name, f in mine.items():
        if f.required and getattr(args, f.dest) is None:
            raise FlopwiseError(f"--{name} is required (on the command line or in --config)")
    _check_exclusive(mine.values(), args)
    if door == "plan" and getattr(args, "accelerator", None) is None:
        raise FlopwiseError("--accelerator is required (on the command line or in --config)")
    args._resolved_job = dict(resolved)
    return resolved


def _check_exclusive(flags: Iterable[JobFlag], args: argparse.Namespace) -> None:
    sets: dict[str, list[JobFlag]] = {}
    for f in flags:
        value = getattr(args, f.dest)
        if f.exclusive and value not in (None, False):
            sets.setdefault(f.exclusive, []).append(f)
    for given in sets.values():
        for i, a in enumerate(given):
            for b in given[i + 1 :]:
                if b.name not in a.combines_with and a.name not in b.combines_with:
                    raise FlopwiseError(f"--{a.name} and --{b.name} cannot be combined; give one")


def to_toml(job: Mapping[str, Any]) -> str:
    """A resolved job as a TOML job file (flat keys, the long flag names)."""
    lines = []
    for key, value in job.items():
        lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if value == value else '"nan"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a TOML basic string is a JSON string for these values


def job_command(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Wrap a command handler: resolve the job (flags > file > defaults); --print-config prints
    the resolved job as TOML and returns 0 instead of running."""

    def handler(args: argparse.Namespace) -> int:
        job = resolve_job(args)
        if args.print_config:
            sys.stdout.write(to_toml(job))
            return 0
        return run(args)

    handler.__name__ = getattr(run, "__name__", "handler")
    return handler
