"use strict";
(function () {
  var SVGNS = "http://www.w3.org/2000/svg";
  var DOC = JSON.parse(document.getElementById("flopwise-data").textContent);
  var CMP = DOC.compare;
  var TRAIN = CMP.kind === "train";

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    for (var k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function svg(tag, attrs, text) {
    var node = document.createElementNS(SVGNS, tag);
    for (var k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function num(v, digits) {
    if (v === null || v === undefined) return "—";
    var d = digits === undefined ? 1 : digits;
    if (Number.isInteger(v)) d = 0;
    if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString("en-US");
    return Number(v).toFixed(d);
  }
  function money(v) {
    if (v === null || v === undefined) return "—";
    if (v >= 1e6) return "$" + (v / 1e6).toFixed(2) + "M";
    return "$" + Math.round(v).toLocaleString("en-US");
  }
  function count(v) {
    var units = [["P", 1e15], ["T", 1e12], ["B", 1e9], ["M", 1e6], ["K", 1e3]];
    for (var i = 0; i < units.length; i++) if (Math.abs(v) >= units[i][1]) return (v / units[i][1]).toFixed(2) + units[i][0];
    return String(v);
  }

  // ---- summary -------------------------------------------------------------------------
  function summary() {
    var job = CMP.job, m = CMP.model, dl = document.getElementById("summary");
    var items = [["model", m.name + " (" + count(m.params) + " params, " + count(m.active_params) + " active)"]];
    if (TRAIN) {
      items.push(["tokens", count(job.tokens) + (job.seq_len ? " at sequence length " + job.seq_len : "")]);
      items.push(["GPUs", String(job.gpus)]);
      items.push(["dtype", job.dtype]);
      if (job.lora_rank) {
        items.push(["fine-tuning", "LoRA rank " + job.lora_rank + " on " +
          (job.lora_targets && job.lora_targets.length ? job.lora_targets.join(", ") : "every linear") +
          "; base weights frozen" + (job.qlora ? ", stored in 4-bit NF4 (QLoRA)" : "")]);
      }
      if (job.document_len) {
        items.push(["packing", "documents of " + job.document_len + " tokens, attention inside each"]);
      }
    } else {
      items.push(["requests", "batch " + job.batch + ", " + job.input_len + " input / " + job.output_len + " output tokens"]);
      items.push(["dtypes", "weights " + job.weight_dtype + ", KV " + (job.kv_dtype || "16-bit (default)") + (job.act_dtype ? ", GEMMs " + job.act_dtype : "")]);
      items.push(["replica", (job.tp ? "tp " + job.tp : "smallest TP that fits") + (job.pp > 1 ? ", pp " + job.pp : "") + ", engine " + job.engine]);
    }
    var methods = {};
    CMP.rows.forEach(function (r) { methods[r.method] = true; });
    var names = { "first-order": "first-order (time = FLOPs / (GPUs x peak x assumed MFU))", "model": (TRAIN ? "training" : "inference") + " planner (per-op model)" };
    items.push(["estimate", Object.keys(methods).map(function (m) { return names[m] || m; }).join(", ") || "none"]);
    items.push(["sorted by", CMP.sort]);
    if (!TRAIN) items.push(["batch", CMP.job.batch_rule || String(CMP.job.batch)]);
    items.push(["offers", CMP.rows.length + " can run it, " + CMP.excluded.length + " cannot"]);
    items.forEach(function (kv) { dl.appendChild(el("dt", {}, kv[0])); dl.appendChild(el("dd", {}, kv[1])); });
    document.getElementById("subtitle").textContent = "Generated " + DOC.generated_at + " by flopwise. Prices go stale: each row shows the date its price was published (\u201cdate unknown\u201d when the source does not say); prices over 90 days old are marked !. Hover a figure for its source and date.";
    document.getElementById("footer").textContent = "Self-contained report: no network requests. Estimates, not measurements, unless marked measured.";
  }

  function layoutText(l) {
    if (!l) return "—";
    var parts = [];
    ["tp", "pp", "dp"].forEach(function (k) { if (k in l) parts.push(k + l[k]); });
    ["cp", "ep", "vpp"].forEach(function (k) { if ((l[k] || 1) > 1) parts.push(k + l[k]); });
    if ("zero" in l) parts.push("zero" + l.zero);
    if (l.recompute && l.recompute !== "none") parts.push("rc-" + l.recompute);
    return parts.join(" ");
  }

  // ---- comparison table ----------------------------------------------------------------
  // Tooltips trace every figure a row shows to its source and date.
  function priceDate(r) { return r.price_date || r.price_published || "date unknown"; }
  function priceTip(r) {
    if (r.price_per_gpu_hour === null || r.price_per_gpu_hour === undefined) return "no price known for this offer";
    return "$" + num(r.price_per_hour, 2) + " per instance-hour (" + r.price_kind + "), " +
      (r.price_date === "given" ? "given on the command line" : "published " + priceDate(r)) +
      (r.price_as_of ? "; read " + r.price_as_of : "") + (r.price_stale ? "; OVER 90 DAYS OLD" : "") +
      "; source: " + (r.price_source || "unknown");
  }
  function rangeText(iv, digits) {
    return iv ? " (range " + num(iv[0], digits) + " to " + num(iv[1], digits) + ")" : "";
  }
  function sourcesTip(r) {
    var keys = Object.keys(r.hardware_sources || {}).filter(function (k) {
      return /^(matmul_tflops|peak_tflops:(bf16|fp8)|memory_bw_gbps|achievable_bw_gbps|scaleup_bw_uni_gbps|inter_bw_per_gpu_gbps|intra_busbw_gbps)/.test(k);
    });
    return keys.map(function (k) { return k + " = " + r.hardware_sources[k]; }).join("; ");
  }
  function estTip(r, what) {
    return what + ": flopwise " + (r.method === "first-order" ? "first-order estimate (assumed MFU)" : (TRAIN ? "training" : "inference") + " planner") +
      " for " + r.ran + ", from " + r.accelerator + (r.system ? " (" + r.system + ")" : "") + " hardware: " + sourcesTip(r);
  }
  function costTip(r) {
    if (r.cost_usd === null || r.cost_usd === undefined) return "no price known: cost unknown";
    return r.instances + " instances x $" + num(r.price_per_hour, 2) + "/h x " + num(r.train_days * 24, 0) + " h" +
      rangeText(r.cost_usd_interval, 0) + ". Price: " + priceTip(r) + ". Days: see the days column";
  }
  function goodputTip(r) {
    var g = (r.goodput || {}).detail || {};
    return "expected with failures, checkpoints and restarts (goodput " + (r.goodput_fraction === null || r.goodput_fraction === undefined ? "unknown" : (100 * r.goodput_fraction).toFixed(0) + "%") +
      "): " + num(r.effective_train_days, 1) + " days, " + money(r.effective_cost_usd) + (g.failure_source ? "; failures: " + g.failure_source : "") + (g.storage_source ? "; checkpoint storage: " + g.storage_source : "") + ". Ideal: see days and cost";
  }
  function gpusText(r) { return r.instances + "x" + r.gpus_per_instance + (r.gpus !== r.gpus_requested ? " *" : ""); }
  function gpusTip(r) { return r.ran + (r.chips_note ? "; " + r.chips_note : "") + "; billed: " + r.gpus_billed + " " + r.accelerator; }

  // [header, value, format, digits, tooltip]; the answer (days, cost) comes first so it is
  // on screen without scrolling.
  var COLS = TRAIN ? [
    ["", function (r) { return r.pareto ? "★" : ""; }, null],
    ["provider", function (r) { return r.provider; }, null],
    ["instance", function (r) { return r.instance; }, null, 0, function (r) { return r.provider + " " + r.instance + (r.region ? " (" + r.region + ")" : "") + ": " + r.gpus_per_instance + " x " + r.accelerator; }],
    ["days", function (r) { return r.train_days; }, "n", 1, function (r) { return estTip(r, num(r.train_days, 1) + " days" + rangeText(r.train_days_interval, 1)); }],
    ["cost", function (r) { return r.cost_usd; }, "$", 0, costTip],
    ["eff. days", function (r) { return r.effective_train_days; }, "n", 1, goodputTip],
    ["eff. cost", function (r) { return r.effective_cost_usd; }, "$", 0, goodputTip],
    ["goodput", function (r) { return r.goodput_fraction; }, "p", 0, goodputTip],
    ["GPUs", gpusText, null, 0, gpusTip],
    ["accelerator", function (r) { return r.accelerator; }, null],
    ["layout", function (r) { return layoutText(r.layout); }, null, 0, function (r) { return r.ran; }],
    ["step s", function (r) { return r.step_time_s; }, "n", 2, function (r) { return estTip(r, "step time " + num(r.step_time_s, 2) + " s" + rangeText(r.step_time_s_interval, 2)); }],
    ["MFU", function (r) { return r.mfu; }, "p", 0, function (r) { return estTip(r, "model FLOPs utilisation"); }],
    ["$/GPU-h", function (r) { return r.price_per_gpu_hour; }, "n", 2, priceTip],
    ["price date", function (r) { return priceDate(r) + (r.price_stale ? " !" : ""); }, null, 0, priceTip],
    ["GiB/GPU", function (r) { return r.memory_per_gpu_gib; }, "n", 1, function (r) { return estTip(r, "memory per GPU (device " + num(r.device_memory_gib, 1) + " GiB)"); }],
    ["network", function (r) { return r.network.status; }, null, 0, function (r) { return r.network.note; }],
    ["region", function (r) { return r.region; }, null],
    ["estimate", function (r) { return r.method; }, null]
  ] : [
    ["", function (r) { return r.pareto ? "★" : ""; }, null],
    ["provider", function (r) { return r.provider; }, null],
    ["instance", function (r) { return r.instance; }, null, 0, function (r) { return r.provider + " " + r.instance + (r.region ? " (" + r.region + ")" : "") + ": " + r.gpus_per_instance + " x " + r.accelerator; }],
    ["$/M tok", function (r) { return r.cost_per_million_output_tokens; }, "n", 3, function (r) { return "$" + num(r.price_per_hour, 2) + "/h / (" + num(r.output_tokens_per_s, 0) + " tok/s x 3600) x 1e6" + rangeText(r.cost_per_million_output_tokens_interval, 3) + ". Price: " + priceTip(r); }],
    ["tok/s", function (r) { return r.output_tokens_per_s; }, "n", 0, function (r) { return estTip(r, "output tokens/s per instance" + rangeText(r.output_tokens_per_s_interval, 0)); }],
    ["batch", function (r) { return r.batch; }, "n", 0, function (r) { return CMP.job.batch_rule || ""; }],
    ["replicas", function (r) { return r.replicas + " x " + r.gpus_per_replica; }, null, 0, function (r) { return r.ran; }],
    ["TTFT ms", function (r) { return r.ttft_ms; }, "n", 1, function (r) { return estTip(r, "time to first token" + rangeText(r.ttft_ms_interval, 1)); }],
    ["TPOT ms", function (r) { return r.tpot_ms; }, "n", 2, function (r) { return estTip(r, "time per output token" + rangeText(r.tpot_ms_interval, 2)); }],
    ["latency s", function (r) { return r.e2e_latency_s; }, "n", 2, function (r) { return estTip(r, "end-to-end request latency" + rangeText(r.e2e_latency_s_interval, 2)); }],
    ["accelerator", function (r) { return r.accelerator; }, null],
    ["$/GPU-h", function (r) { return r.price_per_gpu_hour; }, "n", 2, priceTip],
    ["price date", function (r) { return priceDate(r) + (r.price_stale ? " !" : ""); }, null, 0, priceTip],
    ["GiB/GPU", function (r) { return r.memory_per_gpu_gib; }, "n", 1, function (r) { return estTip(r, "memory per GPU"); }],
    ["region", function (r) { return r.region; }, null],
    ["estimate", function (r) { return r.method; }, null]
  ];
  // goodput columns only when some row has them (the planner provides them)
  if (TRAIN && !CMP.rows.some(function (r) { return r.effective_train_days !== null && r.effective_train_days !== undefined; })) {
    COLS = COLS.filter(function (c) { return ["eff. days", "eff. cost", "goodput"].indexOf(c[0]) < 0; });
  }
  var sortState = { col: -1, dir: 1 };
  var order = CMP.rows.map(function (_, i) { return i; });
  var visible = CMP.rows.map(function () { return true; });

  function cellText(col, r) {
    var v = col[1](r);
    if (col[2] === "$") return money(v);
    if (col[2] === "p") return v === null || v === undefined ? "—" : (100 * v).toFixed(0) + "%";
    if (col[2] === "n") return typeof v === "number" ? num(v, col[3]) : (v === null || v === undefined ? "—" : String(v));
    return v === null || v === undefined ? "" : String(v);
  }
  function rowText(r) {
    var parts = [r.provider, r.instance, r.region, r.accelerator, r.fabric, r.method, r.system, CMP.model.name, r.network.status, r.pareto ? "pareto" : ""];
    return parts.join(" ").toLowerCase();
  }

  function buildTable() {
    var thead = document.querySelector("#offers thead"), tr = el("tr");
    COLS.forEach(function (c, i) {
      var th = el("th", { scope: "col", "data-col": String(i) }, c[0] || "Pareto");
      th.addEventListener("click", function () { sortBy(i); });
      tr.appendChild(th);
    });
    thead.appendChild(tr);
    renderRows();
    var note = document.getElementById("table-note");
    note.textContent = "★ = Pareto-optimal: no other row is both faster and cheaper. Network: the offer's published inter-node bandwidth against the node type the plan describes (matches / slower / faster; unknown = not published, the plan then assumes the node type's NICs). Hover a figure for its source and date; click a column to sort." +
      (TRAIN ? " * = planned at a different chip count than asked (accelerator sold in fixed slices): hover GPUs." : " Batch: " + (CMP.job.batch_rule || "") + ".");
    var close = CMP.within_error_of_first || [];
    if (close.length) {
      var first = CMP.rows[0], metric = String(CMP.ranking_metric || "").replace(/_/g, " ");
      var names = close.map(function (rank) { var r = CMP.rows[rank - 1]; return r ? "#" + rank + " " + r.provider + " " + r.instance : "#" + rank; });
      note.textContent += " Within the model's error of the first row (" + first.provider + " " + first.instance + "): the 80% ranges of " + metric + " overlap for " + names.join(", ") + "; the ranking between them is not settled.";
    } else if (CMP.rows.length > 1 && CMP.ranking_metric) {
      note.textContent += " No other row's 80% range of " + String(CMP.ranking_metric).replace(/_/g, " ") + " overlaps the first row's.";
    }
    var ex = document.getElementById("excluded");
    document.getElementById("excluded-summary").textContent = CMP.excluded.length + " offers cannot run this job";
    CMP.excluded.forEach(function (e) { ex.appendChild(el("li", {}, e.provider + " " + e.instance + ": " + e.reason)); });
  }
  function renderRows() {
    var tbody = document.querySelector("#offers tbody");
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    var shown = 0;
    order.forEach(function (idx, pos) {
      var r = CMP.rows[idx];
      var tr = el("tr", { "data-index": String(idx) });
      if (r.pareto) tr.classList.add("pareto");
      if (idx === 0) tr.classList.add("chosen");
      if ((CMP.within_error_of_first || []).indexOf(idx + 1) >= 0) tr.classList.add("close");
      COLS.forEach(function (c) {
        var attrs = c[2] ? { "class": "num" } : {};
        if (c[4]) attrs.title = c[4](r);
        tr.appendChild(el("td", attrs, cellText(c, r)));
      });
      if (r.price_stale) tr.classList.add("stale");
      if (!visible[idx]) tr.hidden = true; else shown++;
      tbody.appendChild(tr);
    });
    document.getElementById("row-count").textContent = shown + " of " + CMP.rows.length + " rows";
  }
  function sortBy(i) {
    sortState.dir = sortState.col === i ? -sortState.dir : 1;
    sortState.col = i;
    var c = COLS[i];
    order.sort(function (a, b) {
      var va = c[1](CMP.rows[a]), vb = c[1](CMP.rows[b]);
      if (va === null || va === undefined) return 1;
      if (vb === null || vb === undefined) return -1;
      if (typeof va === "number" && typeof vb === "number") return sortState.dir * (va - vb);
      return sortState.dir * String(va).localeCompare(String(vb));
    });
    document.querySelectorAll("#offers th").forEach(function (th, j) {
      if (j === i) th.setAttribute("aria-sort", sortState.dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    });
    renderRows();
  }
  function applyFilter() {
    var terms = document.getElementById("filter").value.toLowerCase().split(/\s+/).filter(Boolean);
    CMP.rows.forEach(function (r, i) {
      var text = rowText(r);
      visible[i] = terms.every(function (t) { return text.indexOf(t) >= 0; });
    });
    renderRows();
    paretoChart();
    var hist = document.querySelectorAll("#history tbody tr");
    hist.forEach(function (tr) {
      var text = tr.textContent.toLowerCase();
      tr.hidden = !terms.every(function (t) { return text.indexOf(t) >= 0; });
    });
  }

  // ---- charts --------------------------------------------------------------------------
  function frame(container, w, h, label) {
    while (container.firstChild) container.removeChild(container.firstChild);
    var root = svg("svg", { viewBox: "0 0 " + w + " " + h, width: String(w), height: String(h), role: "img", "aria-label": label });
    container.appendChild(root);
    return root;
  }
  function empty(root, w, h, msg) {
    root.appendChild(svg("text", { x: String(w / 2), y: String(h / 2), "text-anchor": "middle", "class": "empty" }, msg));
  }
  function scale(lo, hi, a, b, log) {
    if (log) { lo = Math.log10(lo); hi = Math.log10(hi); }
    if (hi === lo) { hi = lo + 1; lo = lo - 1; }
    return function (v) { var x = log ? Math.log10(v) : v; return a + (x - lo) / (hi - lo) * (b - a); };
  }
  function ticks(lo, hi, log) {
    var out = [];
    if (log) {
      for (var e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
        var t = Math.pow(10, e);
        if (t >= lo * 0.999 && t <= hi * 1.001) out.push(t);
      }
      if (out.length >= 2) return out;
    }
    for (var i = 0; i <= 4; i++) out.push(lo + (hi - lo) * i / 4);
    return out;
  }
  function tickLabel(v) {
    if (v >= 1e6) return (v / 1e6).toPrecision(3) + "M";
    if (v >= 1e3) return (v / 1e3).toPrecision(3) + "k";
    return Number(v.toPrecision(3)).toString();
  }
  function axes(root, x, y, xs, ys, box, xlabel, ylabel) {
    var g = svg("g", { "class": "axis" });
    xs.forEach(function (t) {
      g.appendChild(svg("line", { x1: x(t), x2: x(t), y1: box.t, y2: box.b, "class": "grid" }));
      g.appendChild(svg("text", { x: x(t), y: box.b + 14, "text-anchor": "middle" }, tickLabel(t)));
    });
    ys.forEach(function (t) {
      g.appendChild(svg("line", { x1: box.l, x2: box.r, y1: y(t), y2: y(t), "class": "grid" }));
      g.appendChild(svg("text", { x: box.l - 4, y: y(t) + 4, "text-anchor": "end" }, tickLabel(t)));
    });
    g.appendChild(svg("line", { x1: box.l, x2: box.r, y1: box.b, y2: box.b }));
    g.appendChild(svg("line", { x1: box.l, x2: box.l, y1: box.t, y2: box.b }));
    g.appendChild(svg("text", { x: (box.l + box.r) / 2, y: box.b + 30, "text-anchor": "middle" }, xlabel));
    g.appendChild(svg("text", { x: 12, y: (box.t + box.b) / 2, "text-anchor": "middle", transform: "rotate(-90 12 " + (box.t + box.b) / 2 + ")" }, ylabel));
    root.appendChild(g);
  }
  function extent(vals) {
    var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
    return [lo, hi];
  }

  function paretoChart() {
    var w = 720, h = 380, box = { l: 70, r: w - 20, t: 16, b: h - 44 };
    var root = frame(document.getElementById("pareto-chart"), w, h, "time versus cost");
    var tk = CMP.time_metric, ck = CMP.cost_metric;
    var pts = CMP.rows.filter(function (r, i) { return visible[i] && r[tk] !== null && r[ck] !== null && r[tk] > 0 && r[ck] > 0; });
    if (!pts.length) { empty(root, w, h, "no rows with both a time and a price"); return; }
    var xe = extent(pts.map(function (r) { return r[tk]; })), ye = extent(pts.map(function (r) { return r[ck]; }));
    var xlog = xe[1] / xe[0] > 20, ylog = ye[1] / ye[0] > 20;
    var pad = function (e, log) { return log ? [e[0] / 1.3, e[1] * 1.3] : [Math.max(0, e[0] - (e[1] - e[0]) * 0.08 - e[0] * 0.05), e[1] + (e[1] - e[0]) * 0.08 + e[1] * 0.05]; };
    xe = pad(xe, xlog); ye = pad(ye, ylog);
    var x = scale(xe[0], xe[1], box.l, box.r, xlog), y = scale(ye[0], ye[1], box.b, box.t, ylog);
    var eff = tk.indexOf("effective") === 0 ? "effective " : "";
    var xl = TRAIN ? eff + "training time, days" : "end-to-end latency, s";
    var yl = TRAIN ? eff + "total cost, USD" : "USD per million output tokens";
    axes(root, x, y, ticks(xe[0], xe[1], xlog), ticks(ye[0], ye[1], ylog), box, xl, yl);
    var front = pts.filter(function (r) { return r.pareto; }).sort(function (a, b) { return a[tk] - b[tk]; });
    if (front.length > 1) {
      var d = front.map(function (r, i) { return (i ? "L" : "M") + x(r[tk]).toFixed(1) + " " + y(r[ck]).toFixed(1); }).join(" ");
      root.appendChild(svg("path", { d: d, "class": "front" }));
    }
    var placed = [];
    pts.forEach(function (r) {
      var c = svg("circle", { cx: x(r[tk]).toFixed(1), cy: y(r[ck]).toFixed(1), r: r.pareto ? "6" : "4", "class": r.pareto ? "pt pareto" : "pt" });
      c.appendChild(svg("title", {}, r.provider + " " + r.instance + " (" + r.accelerator + "): " + num(r[tk], 2) + (TRAIN ? " days, " + money(r[ck]) : " s, $" + num(r[ck], 3) + "/M tok") + " (price " + priceDate(r) + ")" + (r.pareto ? " — Pareto-optimal" : "")));
      root.appendChild(c);
      if (r.pareto) {
        var lx = x(r[tk]) + 8, ly = y(r[ck]) - 6;
        var clash = placed.some(function (p) { return Math.abs(p[1] - ly) < 13 && Math.abs(p[0] - lx) < 120; });
        if (!clash) {
          placed.push([lx, ly]);
          root.appendChild(svg("text", { x: lx.toFixed(1), y: ly.toFixed(1) }, r.provider + " " + r.accelerator));
        }
      }
    });
  }

  function barChart(id, title, data, unit) {
    var entries = Object.keys(data || {}).filter(function (k) { return typeof data[k] === "number" && data[k] > 0; });
    var w = 460, rowH = 22, h = Math.max(120, 40 + entries.length * rowH);
    var root = frame(document.getElementById(id), w, h, title);
    root.appendChild(svg("text", { x: "10", y: "16" }, title));
    if (!entries.length) { empty(root, w, h, "not given by the " + ((CMP.chosen && CMP.chosen.plan && CMP.chosen.plan.method) || "") + " estimate"); return; }
    var max = Math.max.apply(null, entries.map(function (k) { return data[k]; }));
    var left = 170, right = w - 80;
    entries.forEach(function (k, i) {
      var yy = 28 + i * rowH, bw = Math.max(1, (data[k] / max) * (right - left));
      root.appendChild(svg("text", { x: String(left - 6), y: String(yy + 13), "text-anchor": "end" }, k.replace(/_/g, " ")));
      var bar = svg("rect", { x: String(left), y: String(yy), width: bw.toFixed(1), height: String(rowH - 6), "class": "bar" });
      bar.appendChild(svg("title", {}, k + ": " + num(data[k], 3) + " " + unit));
      root.appendChild(bar);
      root.appendChild(svg("text", { x: (left + bw + 4).toFixed(1), y: String(yy + 13) }, num(data[k], 2) + " " + unit));
    });
  }
  function breakdowns() {
    var top = CMP.rows[0];
    var title = document.getElementById("breakdown-title");
    if (!top) { barChart("time-chart", "time", {}, ""); barChart("memory-chart", "memory", {}, ""); return; }
    title.textContent = "Where the time and memory go: " + top.provider + " " + top.instance + " (" + top.accelerator + ", top row)";
    var plan = (CMP.chosen && CMP.chosen.plan) || {};
    var unit = TRAIN ? (plan.breakdown_unit || "s") : "ms";
    barChart("time-chart", TRAIN ? "step time breakdown" : "time per request (prefill + decode)", top.breakdown, unit);
    barChart("memory-chart", "memory per GPU", top.memory_breakdown, "GiB");
  }

  function roofline() {
    var w = 720, h = 380, box = { l: 70, r: w - 20, t: 16, b: h - 44 };
    var R = DOC.roofline;
    var root = frame(document.getElementById("roofline-chart"), w, h, "roofline");
    var dtype = TRAIN ? CMP.job.dtype : "bf16";
    if (!R || !R.peak_tflops || !R.memory_bw_gbps) { empty(root, w, h, "no peak or bandwidth known for this accelerator"); return; }
    var peak = R.peak_tflops[dtype] || R.peak_tflops.bf16;
    if (!peak) { empty(root, w, h, "no " + dtype + " peak known for " + R.accelerator); return; }
    var bw = R.memory_bw_gbps / 1000; // TB/s: TFLOPS = TB/s x FLOP/B
    var xlo = 0.1, xhi = 10000, ylo = Math.max(0.01, bw * xlo / 2), yhi = peak * 2;
    var x = scale(xlo, xhi, box.l, box.r, true), y = scale(ylo, yhi, box.b, box.t, true);
    axes(root, x, y, ticks(xlo, xhi, true), ticks(ylo, yhi, true), box, "arithmetic intensity, FLOP/byte", "TFLOPS");
    function roofPath(p, b) {
      var ridge = p / b, d = "M" + x(xlo).toFixed(1) + " " + y(b * xlo).toFixed(1);
      if (ridge > xlo && ridge < xhi) d += " L" + x(ridge).toFixed(1) + " " + y(p).toFixed(1);
      return d + " L" + x(xhi).toFixed(1) + " " + y(p).toFixed(1);
    }
    root.appendChild(svg("path", { d: roofPath(peak, bw), "class": "roof" }));
    root.appendChild(svg("text", { x: String(box.r - 4), y: (y(peak) - 6).toFixed(1), "text-anchor": "end" }, R.accelerator + " peak " + dtype + " " + num(peak, 0) + " TFLOPS, " + num(R.memory_bw_gbps, 0) + " GB/s"));
    var mamf = R.matmul_tflops && R.matmul_tflops[dtype];
    var abw = R.achievable_bw_gbps ? R.achievable_bw_gbps / 1000 : null;
    if (mamf || abw) {
      root.appendChild(svg("path", { d: roofPath(mamf || peak, abw || bw), "class": "roof2" }));
      root.appendChild(svg("text", { x: String(box.r - 4), y: (y(mamf || peak) + 14).toFixed(1), "text-anchor": "end" }, "achievable (published or measured)"));
    }
    var pts = R.points || [];
    pts.forEach(function (p) {
      if (p.kind === "matmul") {
        var ix = p.intensity || (p.tflops / bw > xhi ? xhi : Math.max(p.tflops / bw, 1));
        var c = svg("circle", { cx: x(Math.min(Math.max(ix, xlo), xhi)).toFixed(1), cy: y(Math.max(p.tflops, ylo)).toFixed(1), r: "5", "class": "pt pareto" });
        c.appendChild(svg("title", {}, "measured matmul #" + p.id + " " + p.dtype + ": " + num(p.tflops, 1) + " TFLOPS" + (p.shape ? " at " + p.shape.join("x") : "") + " (" + p.created_at + ", " + p.host + ")"));
        root.appendChild(c);
      } else if (p.kind === "memory") {
        var b = p.gbps / 1000, xi = 0.5;
        var m = svg("circle", { cx: x(xi).toFixed(1), cy: y(Math.max(b * xi, ylo)).toFixed(1), r: "5", "class": "pt" });
        m.appendChild(svg("title", {}, "measured memory bandwidth #" + p.id + ": " + num(p.gbps, 0) + " GB/s (" + p.created_at + ", " + p.host + ")"));
        root.appendChild(m);
      }
    });
    root.appendChild(svg("text", { x: String(box.l + 6), y: String(box.t + 12) }, pts.length ? pts.length + " measured point(s) from the results store" : "no measured points for " + R.accelerator + " in the results store"));
  }

  // ---- history -------------------------------------------------------------------------
  function history() {
    var rows = DOC.history || [];
    var thead = document.querySelector("#history thead"), tbody = document.querySelector("#history tbody");
    var tr = el("tr");
    ["id", "kind", "status", "when", "host", "accelerator", "device", "headline"].forEach(function (h) { tr.appendChild(el("th", { scope: "col" }, h)); });
    thead.appendChild(tr);
    if (!rows.length) {
      var none = el("tr");
      none.appendChild(el("td", { colspan: "8" }, "no benchmark runs in the results store yet (flopwise bench ...)"));
      tbody.appendChild(none);
      return;
    }
    rows.forEach(function (r) {
      var s = r.summary || {};
      var head = Object.keys(s).filter(function (k) { return typeof s[k] !== "object"; }).slice(0, 6).map(function (k) { return k + "=" + (typeof s[k] === "number" ? num(s[k], 2) : s[k]); }).join(", ");
      var row = el("tr");
      [r.id, r.kind, r.status, r.created_at, r.host, r.accelerator || "", r.device_name || r.device || "", head].forEach(function (v) { row.appendChild(el("td", {}, v)); });
      tbody.appendChild(row);
    });
  }

  summary();
  buildTable();
  paretoChart();
  breakdowns();
  roofline();
  history();
  document.getElementById("filter").addEventListener("input", applyFilter);
  document.body.setAttribute("data-ready", "1");
})();
