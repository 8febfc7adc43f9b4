"""The self-contained HTML report: one file, CSS and JS inlined, no network request."""

from flopwise.present.html.builder import build_report, embed_json, write_report

__all__ = ["build_report", "embed_json", "write_report"]
