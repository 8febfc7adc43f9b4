"""Terminal views of the inference planner's documents (plan, sweep, target). No computing."""

from __future__ import annotations

from typing import Any

from flopwise.present.assumed_view import assumed_rows
from flopwise.present.console import console, fmt_num, table


def _pct(x: float | None) -> str:
    return "unknown" if x is None else f"{x:.0%}"


def _money(x: float | None, missing: str = "— (give --price-per-gpu-hour)") -> str:
    return missing if x is None else f"${x:,.3f}"


def _fits(x: bool | None) -> str:
    return {True: "yes", False: "NO", None: "unknown"}[x]


def _range(doc: dict[str, Any], metric: str, digits: int = 1) -> str:
    """' (lo–hi)' from the plan's 80% interval of `metric`, or '' when it has none."""
    iv = doc.get(f"{metric}_interval")
    if not iv:
        return ""
    return f" ({fmt_num(iv[0], digits)}–{fmt_num(iv[1], digits)})"


def _offline_rows(run: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The whole offline batch: when it is done, how full the engine ran, what it costs."""
    if not run:
        return []
    span = run["makespan_s"]
    done = f"{fmt_num(span / 60, 1)} min" if span >= 120 else f"{fmt_num(span, 1)} s"
    window = run.get("client_window")
    return [
        (
            "offline batch" if window is None else "benchmark run",
            f"{run['num_requests']:,} requests per replica done in {done}"
            + ("" if window is None else f", {window:,} in flight from a cold start")
            + "; "
            f"{fmt_num(run['mean_running'])} decoding on average (ramp-up and drain included)",
        ),
        ("cost of the batch", _money(run.get("cost_usd"))),
    ]


def _online_rows(load: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Online serving: what the closed loop settles to on a replica."""
    if not load:
        return []
    wait = load["queue_wait_ms"]
    queue = (
        f"; {load['concurrency'] - load['running']:,} waiting, "
        f"{fmt_num(wait / 1e3 if wait >= 10_000 else wait, 1)} "
        f"{'s' if wait >= 10_000 else 'ms'} in the queue"
        if wait > 0
        else ""
    )
    return [
        (
            "online load",
            f"{load['concurrency']:,} in flight per replica, {load['running']:,} running "
            f"(at most {load['capacity']:,}){queue}; first token after "
            f"{fmt_num(load['service_ttft_ms'])} ms of service "
            f"({load['prefill_chunks']} prefill pass{'es' if load['prefill_chunks'] > 1 else ''})",
        )
    ]


def _arrival_rows(load: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Poisson arrivals: what the open loop settles to."""
    if not load:
        return []
    return [
        (
            "arrivals",
            f"{load['rate_per_s']:g} requests/s ({fmt_num(load['replica_rate_per_s'], 2)} per "
            f"replica), {fmt_num(load['mean_running'], 1)} running on average (at most "
            f"{load['capacity']:,}); prompts wait {fmt_num(load['prefill_wait_ms'])} ms for the "
            f"prefill (busy {_pct(load['prefill_busy'])}); sustainable up to "
            f"{fmt_num(load['max_rate_per_s'], 2)} requests/s",
        )
    ]


def show_plan(doc: dict[str, Any]) -> None:
    job, mem, prec = doc["job"], doc["memory"], doc["precision"]
    if doc.get("fits") is False:
        console().print(
            f"[bold red]does not fit:[/] {doc['memory_per_gpu_gib']:,.1f} GiB per GPU needed; "
            "the latencies below are what it would take if it did"
        )
    batch = f"{doc['batch']}" + {
        "continuous": " (continuous, max that fits)",
        "offline": " at most running at once (in-flight batching)",
        "online": f" running ({job.get('concurrency')} requests in flight, closed loop)",
        "rate": f" running on average ({job.get('request_rate'):g} requests/s arriving)"
        if job.get("request_rate")
        else "",
    }.get(doc["mode"], "")
    online = doc.get("online") or {}
    queued = ""
    if (doc.get("offline") or {}).get("client_window") is not None:
        queued = " from each send"  # a closed-loop run: each request timed from its send
    elif doc["mode"] == "offline" or online.get("queue_wait_ms", 0) > 0:
        queued = " incl. queueing"
    layout = f"{job['gpus']} x {doc['accelerator']} (tp {job['tp']}, pp {job['pp']}"
    layout += f", {job['replicas']} replicas)" if job["replicas"] > 1 else ")"
    rows = [
        ("model", doc["model"]),
        ("deployment", layout),
        (
            "precision",
            f"{prec['mode']}: weights {prec['weight']}, KV {prec['kv']}, "
            f"GEMMs {prec['activation']}",
        ),
        ("lengths", f"{job['input_len']} in, {job['output_len']} out; batch {batch}"),
        (
            "time to first token" + (" (mean)" if queued else ""),
            f"{fmt_num(doc['ttft_ms'])} ms{_range(doc, 'ttft_ms')}{queued}",
        ),
        (
            "time per output token",
            f"{fmt_num(doc['tpot_ms'], 2)} ms{_range(doc, 'tpot_ms', 2)}",
        ),
        ("end-to-end latency", f"{fmt_num(doc['e2e_latency_s'], 2)} s{queued}"),
        (
            "output tokens/s",
            f"{fmt_num(doc['output_tokens_per_s'])}{_range(doc, 'output_tokens_per_s')} "
            "(whole deployment)",
        ),
        ("tokens/s per user", fmt_num(doc["tokens_per_s_per_user"])),
        ("KV cache", f"{fmt_num(doc['kv_cache_gib'], 2)} GiB per replica"),
        (
            "memory per GPU",
            f"{fmt_num(doc['memory_per_gpu_gib'], 1)} GiB of "
            f"{fmt_num(mem['usable_gib'], 1, 'unknown')} usable "
            f"(fits: {_fits(doc['fits'])}, max batch {mem['max_batch']})",
        ),
        ("MBU / MFU", f"{_pct(doc['mbu'])} / {_pct(doc['mfu'])}"),
        ("cost per 1M output tokens", _money(doc["cost_per_million_output_tokens"])),
        *_offline_rows(doc.get("offline")),
        *_online_rows(doc.get("online")),
        *_arrival_rows(doc.get("arrivals")),
    ]
    c = console()
    c.print(table(f"Inference plan — {doc['engine']['name']} engine class", ["", ""], rows))
    parts = (
        ("prefill", "prefill (TTFT)"),
        ("decode_step", "decode step (TPOT)"),
        ("request", "whole request"),
    )
    cats = (
        ("weights_read_ms", "weights read"),
        ("kv_read_ms", "KV read"),
        ("compute_ms", "compute"),
        ("communication_ms", "communication"),
        ("activations_ms", "activations"),
        ("overhead_ms", "launch + runtime"),
        ("total_ms", "total"),
    )
    brows = [
        (label, *(fmt_num(doc["breakdown"][key][cat], 2) for key, _ in parts))
        for cat, label in cats
    ]
    c.print(
        table(
            "Where the time goes (ms, one GPU)",
            ["", *(t for _, t in parts)],
            brows,
            right=(1, 2, 3),
        )
    )
    spec = doc.get("speculative")
    if spec:
        srows = [
            (
                "draft",
                f"{spec['draft']}, acceptance {spec['acceptance']:.2f}, "
                f"{spec['draft_tokens']} draft tokens",
            ),
            ("expected tokens per target step", fmt_num(spec["expected_tokens_per_step"], 2)),
            (
                "draft step / verify step",
                f"{fmt_num(spec['draft_step_ms'], 2)} ms / {fmt_num(spec['verify_step_ms'], 2)} ms",
            ),
            (
                "new time per output token",
                f"{fmt_num(spec['tpot_ms'], 2)} ms (was {fmt_num(spec['baseline_tpot_ms'], 2)})",
            ),
            ("speed-up", f"{spec['speedup']:.2f}x"),
            ("output tokens/s", fmt_num(spec["output_tokens_per_s"])),
            (
                "memory per GPU with draft",
                f"{fmt_num(spec['memory_per_gpu_gib'], 1)} GiB (fits: {_fits(spec['fits'])})",
            ),
        ]
        c.print(table("Speculative decoding (Leviathan et al. 2023)", ["", ""], srows))
    if doc.get("suggestion"):
        c.print(f"[bold]note:[/bold] {doc['suggestion']}")
    tok = doc.get("intervals", {}).get("output_tokens_per_s")
    if tok:
        c.print(
            f"[dim]- ranges: {tok['coverage']:.0%} intervals from {tok['n_residuals']} "
            f"out-of-sample residuals of published runs, regime {tok['regime']}[/dim]"
        )
    for line in doc["assumptions"]:
        c.print(f"[dim]- {line}[/dim]")
    for label, text in assumed_rows(doc):
        c.print(f"[bold]{label}:[/bold] {text}")


def show_sweep(doc: dict[str, Any]) -> None:
    job = doc["job"]
    rows = [
        (
            p["batch"],
            fmt_num(p["ttft_ms"]),
            fmt_num(p["tpot_ms"], 2),
            fmt_num(p["output_tokens_per_s"]),
            fmt_num(p["tokens_per_s_per_user"]),
            fmt_num(p["memory_per_gpu_gib"], 1),
            _pct(p["mbu"]),
            _pct(p["mfu"]),
            _money(p["cost_per_million_output_tokens"], missing="—"),
        )
        for p in doc["points"]
    ]
    title = (
        f"Batch sweep — {doc['model']} on {job['gpus']} x {doc['accelerator']} "
        f"(tp {job['tp']}), {job['input_len']} in / {job['output_len']} out"
    )
    console().print(
        table(
            title,
            [
                "batch",
                "TTFT ms",
                "TPOT ms",
                "out tok/s",
                "tok/s/user",
                "GiB/GPU",
                "MBU",
                "MFU",
                "$/1M out",
            ],
            rows,
            right=tuple(range(9)),
        )
    )


def show_online_sweep(doc: dict[str, Any]) -> None:
    job = doc["job"]
    rows = []
    for p in doc["points"]:
        load = p["online"]
        wait = load["queue_wait_ms"]
        rows.append(
            (
                f"{p['concurrency']:,}",
                f"{load['running']:,}",
                fmt_num(p["ttft_ms"]),
                fmt_num(p["tpot_ms"], 2),
                fmt_num(p["output_tokens_per_s"]),
                fmt_num(p["tokens_per_s_per_user"]),
                "—" if wait <= 0 else f"{fmt_num(wait)}",
                _money(p["cost_per_million_output_tokens"], missing="—"),
            )
        )
    title = (
        f"Concurrency sweep (online, closed loop) — {doc['model']} on {job['gpus']} x "
        f"{doc['accelerator']} (tp {job['tp']}), {job['input_len']} in / {job['output_len']} out"
    )
    console().print(
        table(
            title,
            [
                "in flight",
                "running",
                "TTFT ms",
                "ITL ms",
                "out tok/s",
                "tok/s/user",
                "queue ms",
                "$/1M out",
            ],
            rows,
            right=tuple(range(8)),
        )
    )


def show_rate_sweep(doc: dict[str, Any]) -> None:
    job = doc["job"]
    rows = [
        (
            f"{p['request_rate']:g}",
            fmt_num(p["arrivals"]["mean_running"], 1),
            fmt_num(p["ttft_ms"]),
            fmt_num(p["tpot_ms"], 2),
            fmt_num(p["output_tokens_per_s"]),
            fmt_num(p["tokens_per_s_per_user"]),
            _pct(p["arrivals"]["prefill_busy"]),
            _money(p["cost_per_million_output_tokens"], missing="—"),
        )
        for p in doc["points"]
    ]
    title = (
        f"Request-rate sweep (Poisson arrivals) — {doc['model']} on {job['gpus']} x "
        f"{doc['accelerator']} (tp {job['tp']}), {job['input_len']} in / {job['output_len']} out"
    )
    caption = (
        f"from {doc['refused_rate_per_s']:g} requests/s on: not sustained (at most "
        f"{fmt_num(doc['max_rate_per_s'], 2)} requests/s)"
        if doc.get("refused_rate_per_s") is not None
        else None
    )
    console().print(
        table(
            title,
            [
                "req/s",
                "running",
                "TTFT ms",
                "ITL ms",
                "out tok/s",
                "tok/s/user",
                "prefill busy",
                "$/1M out",
            ],
            rows,
            caption=caption,
            right=tuple(range(8)),
        )
    )


def show_target(doc: dict[str, Any]) -> None:
    seed = doc["seed_check"]
    found = doc["gpus"]
    answer = (
        f"{found} x {doc['accelerator']} (tp {doc['tp']}, pp {doc['pp']}): planned TPOT "
        f"{fmt_num(doc['planned_tpot_ms'], 2)} ms"
        if found
        else "no group of up to 64 GPUs reaches it"
        + (f" (best {fmt_num(doc['best_tpot_ms'], 2)} ms)" if doc["best_tpot_ms"] else "")
    )
    rows = [
        (
            "target",
            f"{fmt_num(doc['target_tpot_ms'], 2)} ms per token "
            f"({fmt_num(doc['target_tokens_per_s_per_user'])} tokens/s per user), "
            f"batch {doc['batch']}",
        ),
        ("bytes read per decode step", f"{fmt_num(doc['bytes_per_step_gb'], 1)} GB"),
        ("bandwidth at the roofline", f"{fmt_num(doc['roofline_bw_gbps'])} GB/s (100% of peak)"),
        (
            "peak bandwidth needed",
            "unreachable: the engine's step time alone exceeds the target"
            if doc["required_peak_bw_gbps"] is None
            else f"{fmt_num(doc['required_peak_bw_gbps'])} GB/s (achievable fraction and "
            "engine time charged)",
        ),
        ("GPUs needed", answer),
    ]
    c = console()
    c.print(table(f"Target TPOT — {doc['model']}", ["", ""], rows))
    c.print(
        f"[dim]Seed check ({seed['claim']}): {seed['assumptions']}. For {doc['model']}: "
        f"{fmt_num(seed['seed_rate_bw_gbps'])} GB/s at {seed['seed_tokens_per_s']:.0f} tokens/s; "
        f"at reading speed ({seed['reading_tokens_per_s']:.1f} tokens/s, "
        f"{seed['reading_speed_source']}) {fmt_num(seed['reading_speed_bw_gbps'])} GB/s.[/dim]"
    )
