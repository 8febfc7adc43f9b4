"""Write the architectures of the published training runs as catalog configs (pub-*.json).

`flopwise validate` poses every published run as a `flopwise plan train MODEL ...` command.
Where no stock catalog model has the run's exact architecture, MODEL is a pub-* config written
here from the row's published shape (catalog/data/published/training_runs.csv, and the
training_unseen.csv rows that publish an architecture instead of naming a model; each row's
source and notes say where the shape comes from). Run after refreshing either file:

    python scripts/published_models.py

tests/train/test_validation.py checks that the shipped files are what this script writes.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from flopwise.validate.train_rows import (
    arch_config,
    family_of,
    load_training_runs,
    published_model_id,
)
from flopwise.validate.unseen_training import load_unseen_training_runs, unseen_published_model

OUT = Path(__file__).resolve().parent.parent / "src/flopwise/catalog/data/published/models"


def expected() -> dict[str, tuple[dict[str, object], str, str]]:
    """pub id -> (config, first row id using it, model label)."""
    out: dict[str, tuple[dict[str, object], str, str]] = {}
    for row in load_training_runs():
        family = family_of(row["id"])
        if family is None:
            continue
        cfg = arch_config(row, family)
        if isinstance(cfg, str):
            continue
        ident, cfg = published_model_id(row, cfg)
        if ident.startswith("pub-") and ident not in out:
            out[ident] = (cfg, row["id"], row["model"])
    # training-unseen rows that publish their architecture instead of naming a model (the
    # Megatron-LM README's GPT weak-scaling table): Megatron's GPT defaults
    for unseen in load_unseen_training_runs():
        got = unseen_published_model(unseen)
        if got is None:
            continue
        ident, cfg = got
        if ident.startswith("pub-") and ident not in out:
            out[ident] = (cfg, unseen["id"], unseen["table_model"])
    return out


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    wanted = sorted(expected().items())  # before removing anything the index still names
    training_ids = {r["id"] for r in load_training_runs()}
    from_training = {i for i, (_, rid, _) in wanted if rid in training_ids}
    for old in OUT.glob("pub-*.json"):
        old.unlink()
    rows = []
    for ident, (cfg, rid, label) in wanted:
        (OUT / f"{ident}.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
        rows.append(
            {
                "id": ident,
                "hf_repo": "",
                "aliases": "",
                "config": f"{ident}.json",
                "source": "catalog/data/published/"
                + ("training_runs.csv" if ident in from_training else "training_unseen.csv"),
                "as_of": "2026-11-22",
                "note": f"{label}: architecture as published with run {rid} (see its notes)",
            }
        )
    with (OUT / "index.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {len(rows)} published architectures to {OUT}")


if __name__ == "__main__":
    main()
