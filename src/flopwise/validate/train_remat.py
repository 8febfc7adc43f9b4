"""How a published MaxText run recomputed: its remat_policy as a `--recompute` value, and for
``custom`` the `--remat-tensors` its recipe names (workload/remat.py describes each policy).
"""

from __future__ import annotations

from collections.abc import Mapping

from flopwise.workload.remat import POLICIES

Row = Mapping[str, str]

#: MaxText recipes with remat_policy=custom: the tensors they offload to host memory (every
#: other named tensor is rematerialised). benchmarks/maxtext_trillium_model_configs.py:
#: llama3_1_70b_8192 at 92e59fdf (L959) and llama3-1-405b-8192-fsdp-dcn at 5e6a7caf (L723).
_MAXTEXT_CUSTOM_REMAT: dict[str, tuple[str, str]] = {
    "maxtext_tier_v6e_llama31_70b": (
        "decoder_layer_input=offload,query_proj=offload,key_proj=offload,value_proj=offload",
        "maxtext_trillium_model_configs.py@92e59fdf llama3_1_70b_8192",
    ),
    "maxtext_tier_v6e_llama31_405b": (
        "decoder_layer_input=offload,query_proj=offload,key_proj=offload,value_proj=offload,"
        "out_proj=offload",
        "maxtext_trillium_model_configs.py@5e6a7caf llama3-1-405b-8192-fsdp-dcn",
    ),
    "maxtext_tier_v6e_llama31_8b": (
        "decoder_layer_input=offload,out_proj=offload,query_proj=offload,key_proj=offload,"
        "value_proj=offload",
        "tpu-recipes training/trillium/Llama3.1-8B-MaxText/v6e-256 (llama3_1_8b_8192)",
    ),
}

#: Layouts of MaxText tiering rows whose shared-file entry left them blank, as the tier table's
#: linked recipe states them (AI-Hypercomputer/tpu-recipes training/trillium, read
#: 2026-11-23): tp, dp (ici_fsdp / ici_fsdp_transpose over the slice), the per-device batch
#: and the remat policy. Each recipe's README shows the run's own log line, which matches the
#: tier table's tokens/s per device, so the log wins where it and the listed config differ.
MAXTEXT_RECIPE_LAYOUTS: dict[str, tuple[dict[str, str], str]] = {
    "maxtext_tier_v6e_llama31_8b": (
        {"tp": "1", "dp": "256", "microbatch": "4", "recompute": "remat_policy=custom"},
        "layout from tpu-recipes Llama3.1-8B-MaxText/v6e-256 (MaxText tpu-recipes-v0.1.4 "
        "llama3_1_8b_8192: per_device_batch_size 4, ici_fsdp -1; its log: 7,207 tokens/s/device, "
        "total_weights 8,388,608 = 4 x 256 x 8,192)",
    ),
    "maxtext_tier_v6e_llama2_70b": (
        {"tp": "1", "dp": "256", "microbatch": "2", "recompute": "remat_policy=qkv_proj_offloaded"},
        "layout from tpu-recipes Llama2-70B-MaxText (MaxText tpu-recipes-v0.1.2 "
        "llama2_70b_4096_sc: ici_fsdp_transpose -1, remat qkv_proj_offloaded); per-device "
        "batch 2 from its log (9.052 s/step x 905 tokens/s/device = 8,192 tokens; total_weights "
        "2,097,152 = 2 x 256 x 4,096), where the listed config says 3",
    ),
}


def with_recipe_layout(row: Row) -> tuple[Row, str]:
    """The row with the layout its recipe states filled in (MAXTEXT_RECIPE_LAYOUTS), and why."""
    found = MAXTEXT_RECIPE_LAYOUTS.get(row["id"])
    if found is None:
        return row, ""
    fields, why = found
    return {**row, **fields}, why


#: The v5e README table (MaxText/configs/v5e/README.md) was published at 76bd53b (Dec 2023),
#: when 128b.sh ran remat_policy=full; the script moved to minimal_offloaded and then to
#: qkv_proj_offloaded on 2024-04-24 (62b50123b) without a new table. The table's numbers are
#: the Dec 2023 script's.
_MAXTEXT_REMAT_AT_TABLE: dict[str, tuple[str, str]] = {
    f"maxtext_v5e_128b_{n}x256": (
        "full",
        "remat_policy=full as MaxText/configs/v5e/128b.sh at 76bd53b, the commit of the "
        "table (qkv_proj_offloaded came on 2024-04-24, 62b50123b)",
    )
    for n in (1, 2, 4, 8, 16, 32)
}


def maxtext_remat(row: Row) -> tuple[str | None, str, str]:
    """(the --recompute value, the --remat-tensors value, a note) for a MaxText row: its
    remat_policy as MaxText names it (workload/remat.py), or custom with its recipe's tensors."""
    rid, text = row["id"], row.get("recompute", "").strip()
    if rid in _MAXTEXT_REMAT_AT_TABLE:
        policy, why = _MAXTEXT_REMAT_AT_TABLE[rid]
        return policy, "", why
    if rid in _MAXTEXT_CUSTOM_REMAT:
        tensors, where = _MAXTEXT_CUSTOM_REMAT[rid]
        return "custom", tensors, f"remat_policy=custom offloading to host per {where}"
    if not text:
        return None, "", ""
    name = text.split("=", 1)[1].strip() if "=" in text else text
    if name in ("full", "none") or name in POLICIES:
        return name, "", ""
    return None, "", f"remat {text!r} is not a MaxText remat_policy name: searched"
