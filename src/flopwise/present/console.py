"""Rich console helpers shared by the terminal presenters (rich is imported lazily)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

_console: Console | None = None


def console() -> Console:
    global _console
    if _console is None:
        from rich.console import Console

        _console = Console(highlight=False, soft_wrap=False)
        # rich turns a closed pipe (`| head`) into a silent exit 1; let the CLI end quietly
        _console.on_broken_pipe = _broken_pipe  # type: ignore[method-assign]
    return _console


def _broken_pipe() -> None:
    raise BrokenPipeError("stdout was closed by the reader")


def table(
    title: str | None,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    caption: str | None = None,
    right: Sequence[int] = (),
) -> Table:
    from rich.table import Table

    t = Table(title=title, caption=caption, show_lines=False, title_justify="left")
    for i, name in enumerate(columns):
        t.add_column(name, justify="right" if i in right else "left", overflow="fold")
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    return t


def fmt_num(value: float | str | None, digits: int = 1, unknown: str = "unknown") -> str:
    if value is None:
        return unknown
    if isinstance(value, str):  # e.g. a measured device id ("cpu")
        return value
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def fmt_rate(value: float) -> str:
    """A rate with 1 decimal at accelerator sizes, 3 significant digits below 10 (CPUs)."""
    return f"{value:,.1f}" if value >= 10 else f"{value:.3g}"


def fmt_count(value: float | None) -> str:
    if value is None:
        return "unknown"
    from flopwise.units import human_count

    return human_count(value)


def fmt_sci(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.3e}"


def fmt_bytes_gib(n_bytes: float | None) -> str:
    return "unknown" if n_bytes is None else f"{n_bytes / 2**30:,.2f} GiB"


def fmt_money(value: float | None) -> str:
    return "—" if value is None else f"${value:,.0f}"
