"""Benchmark results with provenance, stored in SQLite."""

from flopwise.results.store import KINDS, ResultStore, StoredResult, default_db_path

__all__ = ["KINDS", "ResultStore", "StoredResult", "default_db_path"]
