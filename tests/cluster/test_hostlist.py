"""Slurm host lists: scontrol when present, else a parser for the forms Slurm documents."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from flopwise.bench.hostlist import expand_nodelist, parse_hostlist
from flopwise.errors import FlopwiseError


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node1", ["node1"]),
        ("tux[0-3,5]", ["tux0", "tux1", "tux2", "tux3", "tux5"]),  # slurm.conf(5) NodeName
        ("gpu[01-03,07],login1", ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]),
        ("lx[15,18,32-33]", ["lx15", "lx18", "lx32", "lx33"]),  # scontrol(1) example
        ("linux[000-002]", ["linux000", "linux001", "linux002"]),
        # several brackets: a product, leftmost slowest (the old parser broke here)
        ("rack[1-2]-node[1-2]", ["rack1-node1", "rack1-node2", "rack2-node1", "rack2-node2"]),
        ("a[1-2]b,c[3]", ["a1b", "a2b", "c3"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
    ],
)
def test_documented_forms(text: str, hosts: list[str]) -> None:
    assert parse_hostlist(text) == hosts


@pytest.mark.parametrize("bad", ["node[1-", "node]1[", "node[a-b]", "node[5-2]", "x[[1]]", ""])
def test_bad_lists_are_one_line_errors(bad: str) -> None:
    with pytest.raises(FlopwiseError, match="cannot read Slurm node list"):
        parse_hostlist(bad)


def test_scontrol_is_asked_first_when_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "scontrol"
    fake.write_text('#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && printf "alpha\\nbeta\\n"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert expand_nodelist("whatever[1-9]") == ["alpha", "beta"]


def test_without_scontrol_the_parser_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert expand_nodelist("rack[1-2]-node[1]") == ["rack1-node1", "rack2-node1"]
