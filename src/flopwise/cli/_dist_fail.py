"""A distributed command that fails before its process group exists still answers as promised.

`check --json` promises one JSON document from rank 0; when a rank hangs or dies before the
process group is created (rendezvous or the start barrier times out) rank 0 prints that
document with ok=false and the problem, and every other rank prints the one-line error.
"""

from __future__ import annotations

import sys

from flopwise.errors import FlopwiseError

#: `check` exits 1 when the check fails (its --help says so), also before the group exists.
EXIT_CHECK_FAILED = 1


def report_early_failure(exc: FlopwiseError, backend: str, *, as_json: bool) -> int:
    from flopwise.bench.check import CheckResult, expected_sum
    from flopwise.bench.dist import env_from
    from flopwise.present import cluster_view

    try:
        env = env_from()
    except FlopwiseError:
        raise exc from None
    if env.rank == 0:
        result = CheckResult(
            world_size=env.world_size,
            backend=backend,
            expected=expected_sum(env.world_size),
            ranks=(),
            problem=str(exc),
        )
        cluster_view.check_report(result, as_json=as_json)
    else:
        sys.stderr.write(f"flopwise: check failed: {exc}\n")
    return EXIT_CHECK_FAILED
