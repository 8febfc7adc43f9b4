"""Benchmarks: they measure, then write results to the store. torch is imported lazily here."""
