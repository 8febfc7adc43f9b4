"""The planner side must not import torch (it starts fast and works without it)."""

from __future__ import annotations

import subprocess
import sys


def test_planning_commands_do_not_import_torch() -> None:
    code = (
        "import sys; from flopwise.cli.main import main; "
        "main(['plan','train','llama-3.1-8b','-a','h100','--gpus','8','--tokens','1T','--json']); "
        "main(['model','deepseek-v3','--json']); main(['catalog','accelerators','--json']); "
        "import flopwise; "
        "sys.exit(3 if 'torch' in sys.modules else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-500:]


def test_public_api_imports() -> None:
    import flopwise

    for name in flopwise.__all__:
        assert hasattr(flopwise, name), name


def test_every_public_name_resolves_lazily() -> None:
    import flopwise

    for name in flopwise.__all__:
        assert getattr(flopwise, name) is not None, name
    import pytest

    with pytest.raises(AttributeError):
        _ = flopwise.no_such_name  # type: ignore[attr-defined]
