"""Run the flopwise CLI, but make one rank die or hang right after the process group exists.

Used by the tests as a torchrun/srun entry point: FLOPWISE_TEST_FAULT_RANK picks the rank,
FLOPWISE_TEST_FAULT_MODE is 'die' (exit at once) or 'hang' (sleep far past any timeout).
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
    if session.rank == int(os.environ["FLOPWISE_TEST_FAULT_RANK"]):
        if os.environ.get("FLOPWISE_TEST_FAULT_MODE", "die") == "die":
            os._exit(3)
        time.sleep(3600)
    return session


dist.start = _faulty_start  # type: ignore[assignment]
sys.exit(main(sys.argv[1:]))
