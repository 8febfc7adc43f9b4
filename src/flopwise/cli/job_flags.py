"""Every job flag of every front door, as data (see flopwise.cli.job_args for how they are
added to parsers, read from job files and merged).

To add a job flag everywhere: append one ``JobFlag`` to its section's list (here for the hardware
and the candidates, cli/job_flags_train.py, cli/job_flags_infer.py) or call
``job_args.register_flag``, stating its kinds and, if it is not meaningful on every front door,
its doors. ``JobFlag`` and the shared parsers live in cli/job_flag.py.
"""

from __future__ import annotations

from flopwise.cli._args import non_negative_float
from flopwise.cli.job_flag import _CMP, FLAG, JobFlag, _csv_list, _measured
from flopwise.cli.job_flags_infer import INFER_FLAGS
from flopwise.cli.job_flags_train import GOODPUT_FLAGS, TRAIN_FLAGS

#: The hardware of a plan (in compare: narrows the candidates).
_HARDWARE: list[JobFlag] = [
    JobFlag(
        "accelerator",
        "accelerator id or alias (see flopwise catalog accelerators); plan: required; compare: "
        "only this accelerator's offers, or its catalog node type at --price-per-gpu-hour",
        short="-a",
        metavar="ID",
    ),
    JobFlag("system", "node type (see flopwise catalog systems)", metavar="ID"),
    JobFlag(
        "measured",
        "use stored benchmark results: a result id or latest (compare: latest)",
        parse=_measured,
        const="latest",
        metavar="ID|latest",
    ),
    JobFlag(
        "price-per-gpu-hour",
        "price per GPU-hour for the cost (compare: prices --accelerator(s); offers carry "
        "their own prices)",
        parse=non_negative_float,
        metavar="USD",
    ),
]

#: Which candidates (compare and report).
_CANDIDATES: list[JobFlag] = [
    JobFlag(
        "accelerators",
        "compare these accelerators (or system ids) on their catalog node "
        "types instead of offers; priced by --price-per-gpu-hour or the cheapest catalog "
        "offer",
        doors=_CMP,
        parse=lambda t: _csv_list(t),
        metavar="A,B,...",
    ),
    JobFlag(
        "provider",
        "only offers of these providers",
        doors=_CMP,
        parse=lambda t: _csv_list(t),
        metavar="A,B",
    ),
    JobFlag(
        "max-price",
        "only offers at most this many dollars per instance-hour",
        doors=_CMP,
        parse=non_negative_float,
        metavar="USD",
    ),
    JobFlag(
        "spot",
        "price offers at their published spot price (offers without one are left out)",
        doors=_CMP,
        action=FLAG,
        default=False,
    ),
    JobFlag(
        "sort", "row order (default: cost)", doors=_CMP, choices=("cost", "time"), default="cost"
    ),
]

#: Every job flag of every front door, in --help order.
JOB_FLAGS: list[JobFlag] = [*_HARDWARE, *TRAIN_FLAGS, *GOODPUT_FLAGS, *INFER_FLAGS, *_CANDIDATES]
