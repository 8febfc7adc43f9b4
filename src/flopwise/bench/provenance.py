"""Where and how a measurement was taken, and saving it to the results store."""

from __future__ import annotations

import os
import platform
import socket
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from flopwise.bench.device import DeviceInfo, accelerator_id

if TYPE_CHECKING:
    from flopwise.results.safe_save import SaveOutcome


def provenance(torch: Any, info: DeviceInfo) -> dict[str, Any]:
    """Host, software versions, device state and time of a run (UTC). Unknown stays None."""
    from flopwise import __version__
    from flopwise.bench.host_state import accelerator_state, relevant_env, tunableop_state

    version = getattr(torch, "version", None)
    return {
        "host": socket.gethostname(),
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "torch_version": str(torch.__version__),
        "backend_version": info.backend_version,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "flopwise_version": __version__,
        "torch_threads": int(torch.get_num_threads()),
        "pid": os.getpid(),
        "argv": sys.argv[1:],
        "cuda_version": getattr(version, "cuda", None),
        "rocm_version": getattr(version, "hip", None),
        "device_state": accelerator_state(info.type, info.index, info.is_rocm),
        "tunableop": tunableop_state(torch) if info.type == "cuda" else None,
        "env": relevant_env(),
    }


def save_run(
    kind: str,
    *,
    summary: dict[str, Any],
    payload: dict[str, Any],
    status: str,
    info: DeviceInfo,
    db: str | Path | None,
) -> int:
    """Store one run (transactional; safe with several processes writing) and return its id."""
    from flopwise.results.store import ResultStore

    return ResultStore(db).add(
        kind,
        summary,
        payload,
        status=status,
        device=info.spec,
        device_name=info.name,
        accelerator=accelerator_id(info),
        host=str(payload.get("provenance", {}).get("host") or socket.gethostname()),
    )


class _Run(Protocol):
    @property
    def status(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...

    def summary(self) -> dict[str, Any]: ...


def keep_run(
    kind: str,
    run: _Run,
    info: DeviceInfo,
    db: str | Path | None,
    out: str | None,
    to_text: Callable[[Any], str],
) -> tuple[dict[str, Any], SaveOutcome]:
    """The run's document, stored (``doc['result_id']``) and written to --out without ever
    raising (``results.safe_save.keep``: a failure goes to a fallback file and is reported)."""
    from flopwise.results.safe_save import keep

    doc = run.to_dict()
    outcome = keep(
        kind,
        doc,
        lambda: save_run(
            kind,
            summary=run.summary(),
            payload=doc,  # keep() sets doc["result_id"] only after this save
            status=run.status,
            info=info,
            db=db,
        ),
        out,
        to_text,
    )
    return doc, outcome
