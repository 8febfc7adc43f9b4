"""Never lose a measurement: check the store and --out before measuring, keep a copy if saving
still fails.

Bench commands call `preflight` before spending device time, so an unusable ``--db`` (a text
file, a folder, read-only media, a store with a dropped column) or an ``--out`` that is a folder
fails in a second. If saving fails anyway (the disk filled up meanwhile), `keep` writes the
result document to a fallback file and the error names it; the command still prints the
result.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopwise.errors import FlopwiseError

#: Folder (under $FLOPWISE_HOME) for results the store could not take.
UNSAVED_DIR = "unsaved"


def check_out_path(out: str | None) -> None:
    """--out must name a file we can create or overwrite, in an existing folder."""
    if out is None:
        return
    p = Path(out)
    if p.is_dir():
        raise FlopwiseError(f"--out {out!r} is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise FlopwiseError(f"--out {out!r}: folder {str(parent)!r} does not exist")
    existed = p.exists()
    try:
        with open(p, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise FlopwiseError(f"cannot write --out {out!r}: {exc.strerror or exc}") from None
    if not existed:
        p.unlink(missing_ok=True)


def preflight(db: str | Path | None, out: str | None = None) -> None:
    """Raise a one-line FlopwiseError now if the result could not be stored or written later."""
    from flopwise.results.store import ResultStore

    ResultStore(db).check_writable()
    check_out_path(out)


@dataclass
class SaveOutcome:
    """The stored id (None when the store refused) and what went wrong, in one line."""

    result_id: int | None
    problem: str | None = None


def _plain_json(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, default=str)


def _fallback_dirs() -> list[Path]:
    from flopwise.catalog._files import flopwise_home

    return [flopwise_home() / UNSAVED_DIR, Path.cwd(), Path(tempfile.gettempdir())]


def write_fallback(kind: str, doc: dict[str, Any]) -> Path | None:
    """Write `doc` to the first folder that takes it; None when none does."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = f"flopwise-unsaved-{kind}-{stamp}-{os.getpid()}.json"
    text = _plain_json(doc) + "\n"
    for folder in _fallback_dirs():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / name
            path.write_text(text, encoding="utf-8")
            return path
        except OSError:
            continue
    return None


def keep(
    kind: str,
    doc: dict[str, Any],
    save: Callable[[], int],
    out: str | None = None,
    to_text: Callable[[Any], str] = _plain_json,
) -> SaveOutcome:
    """Store the result (setting doc['result_id']) and write --out; never raise for either.

    On a failure the document goes to a fallback file and `problem` says where.
    """
    outcome = SaveOutcome(result_id=None)
    try:
        outcome.result_id = save()
    except FlopwiseError as exc:
        outcome.problem = f"the result was not stored: {exc}"
    doc["result_id"] = outcome.result_id
    if out is not None:
        try:
            Path(out).write_text(to_text(doc) + "\n", "utf-8")
        except OSError as exc:
            why = f"cannot write --out {out!r}: {exc.strerror or exc}"
            outcome.problem = f"{outcome.problem}; {why}" if outcome.problem else why
    if outcome.problem is not None:
        path = write_fallback(kind, doc)
        where = f"kept in {path}" if path else "no fallback file could be written either"
        outcome.problem = f"{outcome.problem} (measurement {where})"
    return outcome
