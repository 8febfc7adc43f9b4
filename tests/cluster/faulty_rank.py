"""Run the flopwise CLI, but make one rank die or hang right after the process group exists.

Used by the tests as a torchrun/srun entry point: FLOPWISE_TEST_FAULT_RANK picks the rank,
FLOPWISE_TEST_FAULT_MODE is 'die' (exit at once), 'hang' (sleep far past any timeout) or
'die-in-collective' (exit inside the first timed collective of bench comms, after the others
have entered it).
With FLOPWISE_TEST_FAULT_AT set, a 'die' or 'hang' fault happens elsewhere: 'start' before the
process group exists, any other text when that rank records progress starting with it (e.g.
'all_reduce'), i.e. in the middle of the run after it told the others it got there.
FLOPWISE_TEST_FAULT_STAMP names a file that gets the time of the fault.
"""

from __future__ import annotations

import os
import sys
import time

from flopwise.bench import dist, session
from flopwise.cli.main import main

_start = dist.start
_mark = session.Session.mark


def _faulty_rank() -> int:
    return int(os.environ["FLOPWISE_TEST_FAULT_RANK"])


def _fault() -> None:
    stamp = os.environ.get("FLOPWISE_TEST_FAULT_STAMP")
    if stamp:  # when the fault happened, for tests that time how long the others take
        with open(stamp, "w", encoding="utf-8") as f:
            f.write(repr(time.time()))
    if os.environ.get("FLOPWISE_TEST_FAULT_MODE", "die") == "die":
        os._exit(3)
    time.sleep(3600)


def _faulty_start(*args: object, **kwargs: object) -> dist.Session:
    at = os.environ.get("FLOPWISE_TEST_FAULT_AT")
    if at == "start" and dist.env_from().rank == _faulty_rank():
        _fault()  # before the process group exists
    s = _start(*args, **kwargs)  # type: ignore[arg-type]
    if s.rank == _faulty_rank() and not at:
        if os.environ.get("FLOPWISE_TEST_FAULT_MODE", "die") == "die-in-collective":
            _die_inside_collectives()
            return s
        _fault()
    return s


def _faulty_mark(self: session.Session, what: str) -> None:
    _mark(self, what)
    at = os.environ.get("FLOPWISE_TEST_FAULT_AT")
    if at and at != "start" and what.startswith(at) and self.rank == _faulty_rank():
        _fault()


def _die_inside_collectives() -> None:
    from flopwise.bench import comms

    prepare = comms.prepare

    def dying_prepare(*args: object, **kwargs: object) -> object:
        _run, check = prepare(*args, **kwargs)  # type: ignore[arg-type]

        def run() -> None:
            time.sleep(0.5)  # the others are inside the collective by now
            os._exit(3)

        return run, check

    comms.prepare = dying_prepare  # type: ignore[assignment]


dist.start = _faulty_start  # type: ignore[assignment]
session.Session.mark = _faulty_mark  # type: ignore[method-assign]
sys.exit(main(sys.argv[1:]))
