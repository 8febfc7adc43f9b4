"""The report in a real headless Chromium (Debian's package, driven by Playwright).

Checks what a person would: the table has the expected rows, the filter narrows them, sorting
works, every chart draws, nothing logs an error, nothing is fetched but the file itself, and
user strings show as text. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium is absent: apt-get install chromium chromium-driver")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield b
        b.close()


class Opened:
    """A page with everything it logged and requested recorded."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.console: list[str] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_selector("body[data-ready='1']", timeout=10_000)

    def visible_rows(self) -> int:
        return int(self.page.locator("#offers tbody tr:not([hidden])").count())

    def column(self, name: str) -> list[str]:
        return list(
            self.page.eval_on_selector_all(
                "#offers tbody tr:not([hidden])",
                """(rows, name) => {
                    const heads = [...document.querySelectorAll('#offers thead th')]
                        .map(th => th.textContent);
                    const i = heads.indexOf(name);
                    return rows.map(r => r.children[i].textContent);
                }""",
                name,
            )
        )

    def assert_clean(self, path: Path) -> None:
        assert self.console == [], self.console
        assert self.dialogs == []
        assert self.requests and all(u.startswith("file://") for u in self.requests), self.requests
        assert self.requests == [path.resolve().as_uri()]

    def close(self, screenshot: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / screenshot), full_page=True)
        self.page.close()


def _report(tmp_path: Path, *args: str) -> tuple[Path, dict[str, Any]]:
    out = tmp_path / "report.html"
    proc = run_cli("report", *args, "--out", str(out), "--db", str(tmp_path / "results.sqlite"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(run_cli("compare", *args, "--json").stdout)
    return out, doc


def _seed_store(tmp_path: Path) -> None:
    from flopwise.results.store import ResultStore

    store = ResultStore(tmp_path / "results.sqlite")
    store.add(
        "matmul",
        {"dtype": "bf16", "best_tflops": 712.0, "best_shape": [8192, 8192, 8192]},
        {},
        accelerator="h100-sxm",
        device_name="NVIDIA H100 80GB HBM3",
        host="node1",
    )
    store.add("memory", {"triad_gbps": 2950.0}, {}, accelerator="h100-sxm", host="node1")
    store.add("comms", {"op": "all_reduce", "busbw_gbps": 360.0}, {}, accelerator="h100-sxm")


def test_train_report_table_filter_sort_and_charts(browser: Any, tmp_path: Path) -> None:
    _seed_store(tmp_path)
    path, doc = _report(tmp_path, "train", "llama-3.1-70b", "--tokens", "15T", "--gpus", "1024")
    rows = doc["rows"]
    view = Opened(browser, path)
    page = view.page
    # the table renders every row, in the CLI's order
    assert view.visible_rows() == len(rows) >= 20
    assert view.column("instance") == [r["instance"] for r in rows]
    assert view.column("Pareto").count("★") == sum(r["pareto"] for r in rows) >= 1
    assert set(view.column("price date")) == {"date unknown"}  # snapshots: no publication date
    # the answer is on screen at 1400 px without scrolling sideways
    for name in ("days", "cost"):
        box = page.locator(f"#offers thead th:text-is('{name}')").bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1400, (name, box)
    # every figure traces to its source and date
    first = page.locator("#offers tbody tr").first
    heads = view.page.eval_on_selector_all("#offers thead th", "hs => hs.map(h => h.textContent)")
    tips = dict(
        zip(heads, first.locator("td").evaluate_all("tds => tds.map(t => t.title)"), strict=True)
    )
    assert "matmul_tflops" in tips["days"] and "as of" in tips["days"]
    assert "published date unknown" in tips["cost"] and rows[0]["price_source"] in tips["cost"]
    assert rows[0]["ran"] in tips["GPUs"]
    # typing narrows the rows; every row left mentions what was typed
    page.fill("#filter", "H100")
    narrowed = view.visible_rows()
    expected = [r for r in rows if "h100" in (r["instance"] + r["accelerator"]).lower()]
    assert 0 < narrowed == len(expected) < len(rows)
    page.fill("#filter", "aws h100")
    assert view.column("instance") == ["p5.48xlarge"]
    page.fill("#filter", "no-such-offer")
    assert view.visible_rows() == 0
    assert "0 of" in page.text_content("#row-count")
    page.fill("#filter", "")
    assert view.visible_rows() == len(rows)
    # sorting by a column header
    page.click("#offers thead th:text-is('days')")
    days = [float(d.replace(",", "")) for d in view.column("days")]
    assert days == sorted(days)
    page.click("#offers thead th:text-is('days')")
    days = [float(d.replace(",", "")) for d in view.column("days")]
    assert days == sorted(days, reverse=True)
    # every chart draws
    assert page.locator("#pareto-chart svg circle").count() == len(rows)
    assert page.locator("#pareto-chart svg circle.pareto").count() == sum(r["pareto"] for r in rows)
    assert page.locator("#pareto-chart svg path.front").count() == (
        1 if sum(r["pareto"] for r in rows) > 1 else 0
    )
    top = rows[0]
    for chart, parts in (("#time-chart", "breakdown"), ("#memory-chart", "memory_breakdown")):
        positive = [k for k, v in top[parts].items() if v > 0]
        assert len(positive) >= 2
        assert page.locator(f"{chart} svg rect.bar").count() == len(positive)
    assert page.locator("#roofline-chart svg path.roof").count() == 1
    assert page.locator("#roofline-chart svg circle").count() == 2  # measured matmul + memory
    # offers whose 80% ranges overlap the first's are named, not ranked as settled
    close = doc.get("within_error_of_first") or []
    note = page.text_content("#table-note") or ""
    if close:
        assert "Within the model's error of the first row" in note
        assert page.locator("#offers tbody tr.close").count() == len(close)
        assert rows[close[0] - 1]["instance"] in note
    else:
        assert "No other row's 80% range" in note
    # benchmark history from the store
    assert page.locator("#history tbody tr").count() == 3
    assert "712" in page.text_content("#history tbody")
    view.assert_clean(path)
    view.close("report-train.png")


def test_infer_report_breakdown_bars(browser: Any, tmp_path: Path) -> None:
    path, doc = _report(
        tmp_path,
        "infer",
        "llama-3.1-70b",
        "--batch",
        "16",
        "--input-len",
        "1024",
        "--output-len",
        "256",
    )
    view = Opened(browser, path)
    page = view.page
    assert view.visible_rows() == len(doc["rows"])
    top = doc["rows"][0]
    for chart, parts in (("#time-chart", "breakdown"), ("#memory-chart", "memory_breakdown")):
        positive = [k for k, v in top[parts].items() if v > 0]
        assert len(positive) >= 2
        assert page.locator(f"{chart} svg rect.bar").count() == len(positive)
    assert page.locator("#pareto-chart svg circle").count() == len(doc["rows"])
    assert "no measured points" in page.text_content("#roofline-chart")
    assert "no benchmark runs" in page.text_content("#history")
    view.assert_clean(path)
    view.close("report-infer.png")


def test_fine_tuning_report_says_what_is_trained(browser: Any, tmp_path: Path) -> None:
    path, doc = _report(
        tmp_path, "train", "llama-3.1-8b", "--tokens", "1B", "--gpus", "8", "--lora-rank", "16",
        "--lora-targets", "qkv", "--qlora", "--document-len", "400",
    )  # fmt: skip
    view = Opened(browser, path)
    text = " ".join(view.page.text_content("#summary").split())
    assert "LoRA rank 16 on qkv; base weights frozen, stored in 4-bit NF4 (QLoRA)" in text
    assert "documents of 400 tokens" in text
    assert doc["job"]["lora_rank"] == 16
    view.assert_clean(path)
    view.close("report-lora.png")


def test_user_strings_show_as_text(
    browser: Any, tmp_path: Path, evil_offer: tuple[str, str]
) -> None:
    evil, evil_instance = evil_offer
    path, _ = _report(tmp_path, "train", "llama-3.1-70b", "--tokens", "15T", "--gpus", "1024")
    view = Opened(browser, path)
    page = view.page
    assert view.column("provider")[0] == evil
    assert view.column("instance")[0] == evil_instance
    assert page.locator("img").count() == 0
    assert page.evaluate("document.scripts.length") == 2
    page.fill("#filter", "alert(2)")
    assert view.visible_rows() == 1
    view.assert_clean(path)
    view.close("report-escaped.png")
