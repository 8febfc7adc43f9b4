"""Render a report document into one HTML file.

Data goes in as JSON inside ``<script type="application/json">`` with ``<``, ``>``, ``&`` and the
JavaScript line separators escaped, so no user string (model name, instance, note) can close the
script element or inject markup; the page script only ever sets ``textContent``. A Content
Security Policy forbids every network fetch, so the file opens and works offline.
"""

from __future__ import annotations

import html
import json
import os
import tempfile
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.present.jsonout import _clean

_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)


def _asset(name: str) -> str:
    return (resources.files("flopwise.present") / "assets" / name).read_text(encoding="utf-8")


def embed_json(doc: Any) -> str:
    """JSON safe to place inside a <script> element (no '</script>', no '<!--')."""
    text = json.dumps(_clean(doc), allow_nan=False, sort_keys=False, separators=(",", ":"))
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _title(doc: dict[str, Any]) -> str:
    cmp = doc["compare"]
    what = "Training" if cmp["kind"] == "train" else "Serving"
    return f"flopwise: {what} {cmp['model']['name']}"


def build_report(doc: dict[str, Any]) -> str:
    """The whole HTML page for a report document (compare.report_data.report_document)."""
    css = _asset("report.css")
    js = _asset("report.js")
    if "</script" in js.lower() or "</style" in css.lower():
        raise FlopwiseError("report assets must not contain closing script/style tags")
    title = html.escape(_title(doc))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
{css}
</style>
</head>
<body>
<header><h1 id="title">{title}</h1><p id="subtitle"></p></header>
<main>
<section id="summary-section"><h2>Job</h2><dl id="summary"></dl></section>
<section id="table-section">
<h2>Where to run it</h2>
<label for="filter">Filter rows</label>
<input id="filter" type="search" placeholder="e.g. H100, aws, pareto" autocomplete="off">
<span id="row-count"></span>
<div class="scroll"><table id="offers"><thead></thead><tbody></tbody></table></div>
<p class="note" id="table-note"></p>
<details id="excluded-box"><summary id="excluded-summary"></summary><ul id="excluded"></ul></details>
</section>
<section id="pareto-section"><h2>Time vs cost</h2><div class="chart" id="pareto-chart"></div></section>
<section id="breakdown-section">
<h2 id="breakdown-title">Where the time and memory go</h2>
<div class="charts">
<div class="chart" id="time-chart"></div>
<div class="chart" id="memory-chart"></div>
</div>
</section>
<section id="roofline-section"><h2>Roofline</h2><div class="chart" id="roofline-chart"></div></section>
<section id="history-section">
<h2>Benchmark history</h2>
<div class="scroll"><table id="history"><thead></thead><tbody></tbody></table></div>
</section>
</main>
<footer id="footer"></footer>
<script type="application/json" id="flopwise-data">{embed_json(doc)}</script>
<script>
{js}
</script>
</body>
</html>
"""


def _default_mode() -> int:
    """0o666 minus the process umask: what open() would have created (mkstemp makes 0o600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_report(compare: dict[str, Any], out: Path, *, store: Any = None) -> Path:
    """Gather the store's runs, render and write the report atomically; return its path."""
    from flopwise.compare.report_data import HISTORY_LIMIT, report_document

    results = [] if store is None else store.list(limit=HISTORY_LIMIT)
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    page = build_report(report_document(compare, results, generated_at=now))
    out = out.expanduser()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:
        raise FlopwiseError(f"cannot write {str(out)!r}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(page)
        os.chmod(tmp, _default_mode())
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
