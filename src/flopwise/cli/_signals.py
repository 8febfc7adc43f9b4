"""Signals and exit codes shared by the commands.

SIGTERM is what Slurm sends at a job's time limit and on `scancel`, and what torchrun sends to
its workers: benchmarks treat it like Ctrl-C, so the partial result is kept and marked
'interrupted' instead of being killed with nothing stored.
"""

from __future__ import annotations

import os
import sys

# one definition, in the torch-free bench helpers that bench io uses too
from flopwise.bench.io_ops import terminate_as_interrupt

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "exit_code",
    "silence_stdout",
    "terminate_as_interrupt",
]

#: Exit status of a run stopped by Ctrl-C or SIGTERM (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130
#: Exit status of a measurement that produced no usable figure (e.g. every shape ran out of
#: memory); the run is stored with status 'failed'.
EXIT_FAILED = 1


def exit_code(status: str) -> int:
    """The exit status for a stored run's status."""
    if status == "interrupted":
        return EXIT_INTERRUPTED
    if status == "failed":
        return EXIT_FAILED
    return 0


def silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the final flush at exit cannot fail
    (the Python documentation's advice for SIGPIPE, library/signal.html#note-on-sigpipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
