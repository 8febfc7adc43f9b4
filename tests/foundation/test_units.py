from __future__ import annotations

import pytest

from flopwise.errors import FlopwiseError
from flopwise.units import parse_count, parse_positive_int, parse_size_bytes


@pytest.mark.parametrize(
    ("text", "value"),
    [("15T", 15e12), ("2e12", 2e12), ("300B", 300e9), ("4M", 4e6), ("1.5t", 1.5e12), ("7", 7)],
)
def test_counts(text: str, value: float) -> None:
    assert parse_count(text) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("80GB", 80e9),
        ("80GiB", 80 * 2**30),
        ("32K", 32 * 1024),
        ("1G", 2**30),
        ("4096", 4096),
        ("1.5 TB", 1.5e12),
        ("512MiB", 512 * 2**20),
    ],
)
def test_sizes(text: str, value: float) -> None:
    assert parse_size_bytes(text) == value


@pytest.mark.parametrize("text", ["", "abc", "-5", "0", "1e999", "15X", "nan"])
def test_bad_counts(text: str) -> None:
    with pytest.raises(FlopwiseError):
        parse_count(text)


@pytest.mark.parametrize("text", ["80 parsecs", "-1G", "0", "G"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(FlopwiseError):
        parse_size_bytes(text)


@pytest.mark.parametrize("text", ["abc", "ten", "4 steps"])
def test_bad_whole_numbers_say_what_a_whole_number_looks_like(text: str) -> None:
    with pytest.raises(FlopwiseError, match=r"'.*' is not a whole number; use e\.g\. 8, 512 or 4K"):
        parse_positive_int(text, "--scheduler-poll-steps")


@pytest.mark.parametrize(("text", "value"), [("8", 8), ("4K", 4000), ("1_024", 1024)])
def test_whole_numbers(text: str, value: int) -> None:
    assert parse_positive_int(text, "n") == value


@pytest.mark.parametrize("text", ["0", "-3", "2.5"])
def test_whole_numbers_must_be_positive_and_whole(text: str) -> None:
    with pytest.raises(FlopwiseError, match=r"must be a (positive|whole) number"):
        parse_positive_int(text, "n")
