"""Validation of the planners against published runs."""
