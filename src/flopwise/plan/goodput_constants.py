"""Named constants of the goodput model, each with where its value comes from.

All are overridable from the command line (flopwise.cli.goodput_args) or GoodputInputs.
"""

from __future__ import annotations

#: Seconds from a hang to the job noticing: PyTorch's default NCCL process-group timeout is
#: 10 minutes (torch.distributed.constants.default_pg_nccl_timeout, from
#: kProcessGroupNCCLDefaultTimeout = 10 * 60 * 1000 ms in
#: torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp). Crashes that kill a process are seen
#: sooner, hangs (NCCL watchdog timeouts, a dead NIC) only after the timeout: the default is the
#: conservative case.
FAILURE_DETECTION_S = 600.0

#: Seconds to replace the failed node, relaunch every rank and rebuild the process groups,
#: excluding the checkpoint load: FlashRecovery (Zhang et al. 2025, arXiv:2509.03047, abstract)
#: restores training on a 4,800-device cluster in 150 s with a restart path built for it
#: (scale-independent process-group rebuild); a plain relaunch is slower, so this is a floor.
RESCHEDULE_STARTUP_S = 150.0

#: Steps after a restart that run at well below full speed (allocator, NCCL communicator
#: warm-up, compilation caches): a flopwise assumption, counted as this many lost step times.
WARMUP_STEPS = 2.0

#: The storage tier assumed when neither the command line, a measured `bench io` result nor the
#: node type names one: Meta's Tectonic as used for Llama 3 (catalog storage.csv). It is an
#: assumption and every plan that uses it says so.
DEFAULT_STORAGE_TIER = "tectonic-llama3"

#: Goodput at or above this is reported as "near 1" with a one-line explanation.
NEAR_ONE = 0.99
