"""Reading a posed `flopwise plan train` argument list in tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from flopwise.validate.unseen_training import load_unseen_training_runs, pose_argv


def published_rows(prefix: str) -> list[dict[str, str]]:
    """The training-unseen rows of one source, by their id prefix ("torchprime_")."""
    return [r for r in load_unseen_training_runs() if r["id"].startswith(prefix)]


def posed_flags(row: Mapping[str, str]) -> tuple[list[str], Callable[[str], str]]:
    """(argv, flag): the arguments a training-unseen row is posed with, and the value of one
    of its flags (`flag("--tp")`); the row must be posed, not skipped."""
    argv = pose_argv(dict(row))
    assert isinstance(argv, list), argv

    def flag(name: str) -> str:
        return argv[argv.index(name) + 1]

    return argv, flag
