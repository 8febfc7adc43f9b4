"""Terminal view of a training plan (the dict TrainPlan.to_dict() returns). No computing."""

from __future__ import annotations

from typing import Any

from flopwise.present.assumed_view import assumed_rows, value_text
from flopwise.present.console import console, fmt_count, fmt_money, fmt_num, fmt_sci, table

_MEMORY_ROWS = (
    ("weights_gib", "weights"),
    ("grads_gib", "gradients"),
    ("master_weights_gib", "fp32 master weights"),
    ("optimizer_gib", "optimizer states"),
    ("zero3_gathered_gib", "ZeRO-3 gathered layers"),
    ("activations_gib", "activations"),
    ("logits_gib", "logits / loss buffers"),
    ("allocator_fragmentation_gib", "allocator fragmentation"),
    ("framework_overhead_gib", "CUDA context, NCCL, workspaces"),
)

_TIME_ROWS = (
    ("compute_s", "compute (GEMMs, attention, elementwise)"),
    ("recompute_s", "activation recompute"),
    ("tp_comm_exposed_s", "tensor-parallel comms (exposed)"),
    ("cp_comm_exposed_s", "context-parallel comms (exposed)"),
    ("ep_comm_exposed_s", "expert-parallel all-to-all (exposed)"),
    ("pp_comm_exposed_s", "pipeline send/recv (exposed)"),
    ("pipeline_bubble_s", "pipeline bubble"),
    ("dp_comm_exposed_s", "data-parallel comms (exposed)"),
    ("optimizer_s", "optimizer step"),
    ("other_s", "other (fixed + ZeRO-2/3 gradient handling)"),
)

#: Short words for where a plan's attention rate comes from (plan/attention_rate.py bases).
_ATTENTION_BASIS_LABELS: dict[str, str] = {
    "measured": "this device's bench attention curve",
    "die": "the die's measured curve",
    "published": "the vendor's published curve",
    "fa2-on-hopper": "FlashAttention-3 paper's FA2 figures",
    "papers": "the FlashAttention papers' fractions",
}


def _measured_text(name: str, v: dict[str, Any]) -> str:
    """One measured input: its value and source, and how it priced the plan's compute where a
    note says so (the `bench sustained` share: plan/sustained.py training_compute_fraction)."""
    text = f"{name} {value_text(v['value'])} ({v['source']})"
    return text + (f"; in this plan: {v['training']}" if v.get("training") else "")


def _optimizer_text(opt: dict[str, Any]) -> str:
    """ ", optimizer muon (99.8% of params, 0.234 s Newton-Schulz per step)"; AdamW says nothing."""
    if opt.get("name") != "muon":
        return ""
    return (
        f", optimizer muon ({opt['managed_params_share']:.1%} of params, "
        f"{opt['newton_schulz_s']:.3f} s Newton-Schulz per step)"
    )


def _lora_rows(lora: dict[str, Any] | None) -> list[tuple[str, str]]:
    """'fine-tuning: LoRA rank 32 on qkv, proj, fc1, fc2: 67.4M trained params (1.0%), ...'."""
    if not lora:
        return []
    return [
        (
            "fine-tuning",
            f"LoRA rank {lora['rank']} on {', '.join(lora['targets'])}: "
            f"{fmt_count(lora['trainable_params'])} trained params "
            f"({lora['trainable_share']:.2%}); base weights frozen"
            + (", stored in 4-bit NF4 (QLoRA)" if lora.get("base_weights") == "nf4" else ""),
        )
    ]


def _block_text(n: int) -> str:
    """' (2 layers of each stage chunk)' for block recompute, '' for every layer."""
    return f" ({n} layer{'s' if n > 1 else ''} of each stage chunk)" if n else ""


def _layout_text(lay: dict[str, Any]) -> str:
    sp = " +SP" if lay["sequence_parallel"] else ""
    return (
        f"TP {lay['tp']} x PP {lay['pp']} x DP {lay['dp']} x CP {lay['cp']}"
        f"{' x EP ' + str(lay['ep']) if lay['ep'] > 1 else ''}"
        f"{' (expert TP ' + str(lay['etp']) + ')' if lay['ep'] > 1 and lay.get('etp', lay['tp']) != lay['tp'] else ''}"
        f"{sp}; "
        f"microbatch {lay['microbatch']} x {lay['microbatches_per_step']} per step; "
        f"vpp {lay['vpp']}; recompute {lay['recompute']}"
        f"{_block_text(lay.get('recompute_layers') or 0)}"
        f"; ZeRO-{lay['zero']}"
        f"{' HSDP' if lay.get('hsdp') else ''}"
        f"{', state sharded over ' + str(lay['zero_shard_gpus']) + ' GPUs' if lay.get('zero_shard_gpus', 1) > 1 else ''}"
    )


def _pipeline_rows(pl: dict[str, Any] | None) -> list[tuple[str, str]]:
    """'pipeline layout' row: the layout as given and each rank's transformer layers."""
    if not pl:
        return []
    per_rank = " ".join(str(n) for n in pl["rank_layers"])
    return [
        (
            "pipeline layout",
            f"{pl['layout']}: {pl['stages']} stages; layers per rank {per_rank}; embedding on "
            f"rank {pl['embedding_rank']}, loss on rank {pl['loss_rank']}",
        )
    ]


def _margin_text(doc: dict[str, Any]) -> str:
    margin, headroom = doc.get("memory_margin_gib"), doc.get("memory_headroom_gib")
    if margin is None:
        return ""
    text = f"; margin {margin:,.1f} GiB"
    if headroom:
        text += f" (search headroom {headroom:,.1f} GiB)"
    elif headroom == 0:
        text += " (judged against device capacity, no headroom)"
    return text


def _range(doc: dict[str, Any], key: str, fmt: str) -> str:
    """' (lo–hi)' for a figure's 80% interval, or '' when there is none."""
    iv = doc.get(f"{key}_interval")
    if not iv:
        return ""
    return f" ({format(iv[0], fmt)}–{format(iv[1], fmt)})"


def show_train_plan(doc: dict[str, Any]) -> None:
    out = console()
    if doc.get("fits") is False:
        why = (doc.get("search") or {}).get("nothing_fits", {}).get("why", "")
        out.print(f"[bold red]does not fit:[/] {why or 'see memory per GPU below'}")
    fits = {True: "yes", False: "NO", None: "unknown"}[doc["fits"]]
    cost = fmt_money(doc["cost_usd"])
    if doc["price_per_gpu_hour"] is not None:
        cost += f" at ${doc['price_per_gpu_hour']:.2f}/GPU-h"
    else:
        cost += " (give --price-per-gpu-hour)"
    summary = [
        (
            "model",
            f"{doc['model']} ({fmt_count(doc['params'])} params, "
            f"{fmt_count(doc['active_params'])} active)",
        ),
        (
            "hardware",
            f"{doc['gpus']} x {doc['accelerator']} ({doc['system'] or 'no system'}, "
            f"{doc['gpus_per_node']}/node), {doc['dtype']}"
            + (f" ({doc['fp8_recipe']} scaling)" if doc.get("fp8_recipe") else "")
            + f", recipe {doc['recipe']}"
            + _optimizer_text(doc.get("optimizer") or {}),
        ),
        *(
            [("measured", "; ".join(_measured_text(k, v) for k, v in m))]
            if (m := sorted(doc.get("measured", {}).items()))
            else []
        ),
        *assumed_rows(doc),
        (
            "job",
            f"{fmt_count(doc['tokens'])} tokens, seq {doc['seq_len']}, global batch "
            f"{doc['global_batch_seqs']} seqs ({fmt_count(doc['global_batch_tokens'])} tokens)"
            + (
                f", packed documents of {doc['document_len']} tokens"
                if doc.get("document_len")
                else ""
            ),
        ),
        *_lora_rows(doc.get("lora")),
        ("layout" if doc["fits"] is not False else "leanest layout", _layout_text(doc["layout"])),
        *_pipeline_rows(doc.get("pipeline_layout")),
        (
            "memory per GPU",
            f"{doc['memory_per_gpu_gib']:,.1f} GiB of "
            f"{fmt_num(doc['device_memory_gib'])} GiB (fits: {fits}){_margin_text(doc)}",
        ),
        (
            "framework",
            f"{doc['framework']['name']}: {doc['framework']['summary']}"
            if doc.get("framework")
            else "generic",
        ),
        (
            "step time",
            f"{doc['step_time_s']:.3f} s{_range(doc, 'step_time_s', '.3f')}, "
            f"{doc['tokens_per_s']:,.0f} tokens/s{_range(doc, 'tokens_per_s', ',.0f')}",
        ),
        (
            "TFLOPS per GPU",
            f"{doc['tflops_per_gpu']:.0f} model, {doc['hw_tflops_per_gpu']:.0f} "
            f"with recompute (peak {fmt_num(doc['peak_tflops'])})",
        ),
        ("MFU / HFU", f"{doc['mfu']:.1%}{_range(doc, 'mfu', '.1%')} / {doc['hfu']:.1%}"),
        ("training FLOPs", fmt_sci(doc["total_flops"])),
        (
            "time",
            "unknown"
            if doc["train_days"] is None
            else f"{doc['train_days']:,.1f} days{_range(doc, 'train_days', ',.1f')}",
        ),
        (
            "GPU-hours",
            "unknown"
            if doc["gpu_hours"] is None
            else f"{doc['gpu_hours']:,.0f}{_range(doc, 'gpu_hours', ',.0f')}",
        ),
        ("cost", cost + _range(doc, "cost_usd", ",.0f")),
    ]
    iv = doc.get("interval")
    caption = doc["flops_convention"]
    if iv:
        caption = (
            f"(ranges: {iv['level']:.0%} interval from out-of-sample validation errors, regime "
            f"{iv['regime']}, n={iv['n_residuals']}{'; ' + iv['note'] if iv['note'] else ''}); "
            + caption
        )
    out.print(table("Training plan", ["", ""], summary, caption=caption))
    mem = doc["memory_breakdown"]
    mem_rows = [(label, f"{mem[key]:,.2f}") for key, label in _MEMORY_ROWS if mem[key]]
    if mem.get("phase_reuse_gib"):
        mem_rows.append(("reused: loss vs layer backward (XLA)", f"-{mem['phase_reuse_gib']:,.2f}"))
    mem_rows.append(("total", f"{mem['total_gib']:,.2f}"))
    if mem.get("host_offload_gib"):
        mem_rows.append(
            ("host memory (offloaded, not in total)", f"{mem['host_offload_gib']:,.2f}")
        )
    out.print(
        table(
            f"Memory per GPU, GiB ({mem['stage']} pipeline stage)",
            ["", "GiB"],
            mem_rows,
            right=(1,),
        )
    )
    step = doc["step_time_s"]
    bd = doc["breakdown"]
    time_rows = [
        (label, f"{bd[key]:.4f}", f"{bd[key] / step:.1%}") for key, label in _TIME_ROWS if bd[key]
    ]
    time_rows.append(("step", f"{step:.4f}", "100%"))
    share = doc.get("attention_share")
    regime = (doc.get("interval") or {}).get("regime", "")
    caption = (
        None
        if share is None
        else f"attention core: {share:.0%} of compute and recompute"
        + (" (attention-bound: see the interval's regime)" if "attention-bound" in regime else "")
    )
    attention = doc.get("attention") or {}
    if "fwd_fraction_of_peak16" in attention:
        label = _ATTENTION_BASIS_LABELS.get(attention["basis"], attention["basis"])
        caption = (caption + "; " if caption else "") + (
            f"attention kernel '{attention['kernel']}' at "
            f"{attention['fwd_fraction_of_peak16']:.2f} / "
            f"{attention['bwd_fraction_of_peak16']:.2f} of the 16-bit peak forward / backward "
            f"over {attention['kernel_len_tokens']:,.0f} tokens ({label})"
        )
    pointwise = doc.get("pointwise") or {}
    if pointwise.get("kernels") == "eager":
        caption = (caption + "; " if caption else "") + f"pointwise ops: {pointwise['what']}"
    replay = doc.get("recompute_replay")
    if replay:
        caption = (caption + "; " if caption else "") + f"full recompute re-runs {replay['what']}"
    out.print(table("Step time", ["", "s", "share"], time_rows, caption=caption, right=(1, 2)))
    s = doc["search"]
    note = (
        f"searched {s['configs_evaluated']:,} layouts ({s['feasible']:,} fit, "
        f"{s['pruned_by_state_memory']:,} pruned on training-state memory) in "
        f"{s['elapsed_s']:.2f} s"
    )
    if s["top"]:
        alt = [
            (_layout_text(c["layout"]), f"{c['step_time_s']:.3f}", f"{c['memory_per_gpu_gib']:.1f}")
            for c in s["top"]
        ]
        out.print(
            table("Next best layouts", ["layout", "step s", "GiB"], alt, caption=note, right=(1, 2))
        )
    else:
        out.print(note)
    if doc.get("goodput"):
        from flopwise.present.goodput_view import show_goodput

        show_goodput(doc["goodput"])
    if "nothing_fits" in s:
        nf = s["nothing_fits"]
        out.print(f"[bold red]Nothing fits:[/] {nf['why']}")
        for what in nf["what_would"]:
            out.print(f"  - {what}")
    for note in doc.get("notes", []):
        out.print(f"note: {note}")
