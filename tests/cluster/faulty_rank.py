"""Run the flopwise CLI, but make one rank die or hang right after the process group exists.

Used by the tests as a torchrun/srun entry point: FLOPWISE_TEST_FAULT_RANK picks the rank,
FLOPWISE_TEST_FAULT_MODE is 'die' (exit at once), 'hang' (sleep far past any timeout) or
'die-in-collective' (exit inside the first timed collective of bench comms, after the others
have entered it).
"""

from __future__ import annotations

import os
import sys
import time

from flopwise.bench import dist
from flopwise.cli.main import main

_start = dist.start


def _faulty_start(*args: object, **kwargs: object) -> dist.Session:
    session = _start(*args, **kwargs)  # type: ignore[arg-type]
    mode = os.environ.get("FLOPWISE_TEST_FAULT_MODE", "die")
    if session.rank == int(os.environ["FLOPWISE_TEST_FAULT_RANK"]):
        if mode == "die-in-collective":
            _die_inside_collectives()
            return session
        if mode == "die":
            os._exit(3)
        time.sleep(3600)
    return session


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
sys.exit(main(sys.argv[1:]))
