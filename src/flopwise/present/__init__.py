"""Presenters: turn result objects into terminal tables, JSON and HTML. They never compute."""
