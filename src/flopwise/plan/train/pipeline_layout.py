"""An explicit pipeline layout: which layers each pipeline stage holds, in Megatron-Core's
notation (``--pipeline-model-parallel-layout``, Megatron-Core 0.13+).

The layout lists the virtual pipeline stages in order, separated by ``|``; each stage is a run
of layer letters: ``E`` the embedding, ``t`` a transformer (decoder) layer, ``L`` the loss (the
output layer and its logits). ``x*n`` repeats a letter, ``(...)*n`` a group (groups nest),
commas are cosmetic. Stage ``i`` runs on pipeline rank ``i % pp`` as its virtual stage
``i // pp``, so a layout of ``pp x vpp`` stages fixes the interleaving depth too. Example,
Megatron-Bridge's Llama 3 70B FP8 recipe on 64 H100s (PP 8, VPP 5)::

    Et*2|(t*2|)*34,t*3|(t*2|)*3,tL

40 stages of 2 layers, except the first (embedding + 2), the 36th (3) and the last (1 layer and
the loss): rank 7, which holds the loss, runs 9 layers and the logits, rank 3 runs 11 layers,
the other ranks 10. Without a layout the plan splits the layers as evenly as pp allows and
puts the logits on the last rank.

``m`` is a multi-token-prediction module (DeepSeek-V3's MTP; TrainJob.mtp_layers): the layout
must place as many as the job trains, after every transformer layer, in one stage.

What the plan reads from it (``PipelineLayout``): each rank's decoder layers and which rank
holds the embedding, the loss and the MTP modules. The slowest rank (its layers plus, on the
loss rank, the logits, and on the MTP rank the modules) paces the step; memory is judged on every
rank's own layers and extras.
"""

from __future__ import annotations

from dataclasses import dataclass

from flopwise.errors import FlopwiseError

#: Layer letters of Megatron-Core's layout notation that the planner prices.
LAYER_LETTERS: dict[str, str] = {
    "E": "embedding",
    "t": "transformer layer",
    "m": "multi-token-prediction module",
    "L": "loss",
}

#: Repeats of one letter or group beyond which a layout is surely a typo, and the most letters
#: and separators a layout may expand to (a model of 10,000 layers over 10,000 stages fits).
MAX_REPEAT = 100_000
MAX_EXPANDED = 1_000_000


def _expand(text: str, pos: int, depth: int) -> tuple[str, int]:
    """Expand `text` from `pos` up to a closing parenthesis (depth > 0) or the end: letters,
    separators, ``x*n`` and ``(...)*n``. Returns (expanded, position after it)."""
    out: list[str] = []
    while pos < len(text):
        c = text[pos]
        if c == ")":
            if depth == 0:
                raise FlopwiseError(f"pipeline layout {text!r}: ')' at {pos} closes nothing")
            return "".join(out), pos + 1
        if c == "(":
            inner, pos = _expand(text, pos + 1, depth + 1)
            n, pos = _repeat(text, pos)
            if n is None:
                raise FlopwiseError(
                    f"pipeline layout {text!r}: a group (...) must be followed by *N"
                )
            _check_size(text, len(inner) * n + sum(map(len, out)))
            out.append(inner * n)
            continue
        if c == "*":
            raise FlopwiseError(f"pipeline layout {text!r}: '*' at {pos} repeats nothing")
        if c != "|" and c not in LAYER_LETTERS:
            known = ", ".join(f"{k} ({v})" for k, v in LAYER_LETTERS.items())
            raise FlopwiseError(
                f"pipeline layout {text!r}: unknown letter {c!r} at {pos}; valid: {known}, "
                "'|' between stages, x*N and (...)*N repeats"
            )
        n, after = _repeat(text, pos + 1)
        _check_size(text, (1 if n is None else n) + sum(map(len, out)))
        out.append(c * (1 if n is None else n))
        pos = after
    if depth > 0:
        raise FlopwiseError(f"pipeline layout {text!r}: '(' is never closed")
    return "".join(out), pos


def _check_size(text: str, size: int) -> None:
    if size > MAX_EXPANDED:
        raise FlopwiseError(
            f"pipeline layout {text!r} expands to more than {MAX_EXPANDED:,} letters; "
            "check its repeat counts"
        )


def _repeat(text: str, pos: int) -> tuple[int | None, int]:
    """(N, position after it) when `text` continues with ``*N`` at `pos`, else (None, pos)."""
    if pos >= len(text) or text[pos] != "*":
        return None, pos
    end = pos + 1
    while end < len(text) and text[end].isdigit():
        end += 1
    if end == pos + 1:
        raise FlopwiseError(f"pipeline layout {text!r}: '*' at {pos} needs a count")
    n = int(text[pos + 1 : end])
    if not 1 <= n <= MAX_REPEAT:
        raise FlopwiseError(
            f"pipeline layout {text!r}: repeat count {n} is outside 1..{MAX_REPEAT:,}"
        )
    return n, end


def layout_stages(text: str) -> tuple[str, ...]:
    """The virtual stages of a layout string, each its layer letters in order (syntax only:
    nothing is checked against a model or a PP degree)."""
    clean = "".join(text.split()).replace(",", "")
    if not clean:
        raise FlopwiseError("pipeline layout is empty; e.g. 'Et*2|(t*2|)*34,t*3|(t*2|)*3,tL'")
    expanded, _ = _expand(clean, 0, 0)
    stages = tuple(expanded.split("|"))
    flat = "".join(stages)
    if flat.count("E") != 1 or flat.count("L") != 1:
        raise FlopwiseError(
            f"pipeline layout {text!r} names the embedding (E) {flat.count('E')} and the loss "
            f"(L) {flat.count('L')} times; each exactly once"
        )
    if not flat.startswith("E") or not flat.endswith("L"):
        raise FlopwiseError(
            f"pipeline layout {text!r}: the embedding (E) must come first and the loss (L) "
            "last, as Megatron-Core requires"
        )
    return stages


@dataclass(frozen=True, slots=True)
class PipelineLayout:
    """Which decoder layers, embedding and loss each pipeline rank holds."""

    text: str
    pp: int
    vpp: int
    rank_layers: tuple[int, ...]  # decoder layers per pipeline rank (all its virtual stages)
    chunk_layers: tuple[tuple[int, ...], ...]  # per rank, per virtual stage
    embedding_rank: int
    loss_rank: int
    mtp_rank: int | None = None  # the rank holding the multi-token-prediction modules

    @property
    def busiest_rank(self) -> int:
        """The rank with the most decoder layers (the first such)."""
        return max(range(self.pp), key=lambda r: (self.rank_layers[r], -r))

    def rank_chunks(self, rank: int) -> tuple[int, ...]:
        return self.chunk_layers[rank]


def parse_pipeline_layout(text: str, pp: int, layers: int, mtp_layers: int = 0) -> PipelineLayout:
    """`text` as a layout of `pp` pipeline ranks for a model of `layers` decoder layers trained
    with `mtp_layers` multi-token-prediction modules (TrainJob.mtp_layers)."""
    if pp < 1:
        raise FlopwiseError(f"pipeline layout needs a pipeline degree of at least 1, got {pp}")
    stages = layout_stages(text)
    if len(stages) % pp:
        raise FlopwiseError(
            f"pipeline layout {text!r} has {len(stages)} stages, not a multiple of --pp {pp} "
            "(the stages are PP x VPP: stage i runs on rank i % pp)"
        )
    n_t = sum(s.count("t") for s in stages)
    if n_t != layers:
        raise FlopwiseError(
            f"pipeline layout {text!r} places {n_t} transformer layers (t); the model has {layers}"
        )
    n_m = sum(s.count("m") for s in stages)
    if n_m != mtp_layers:
        raise FlopwiseError(
            f"pipeline layout {text!r} places {n_m} multi-token-prediction module(s) (m); the "
            f"job trains {mtp_layers} (--mtp-layers)"
        )
    m_stages = [i for i, s in enumerate(stages) if "m" in s]
    if len(m_stages) > 1:
        raise FlopwiseError(
            f"pipeline layout {text!r} splits the multi-token-prediction modules over "
            f"{len(m_stages)} stages; Megatron-Core keeps them in one"
        )
    flat = "".join(stages)
    if "m" in flat and "t" in flat[flat.index("m") :]:
        raise FlopwiseError(
            f"pipeline layout {text!r}: a multi-token-prediction module (m) comes after every "
            "transformer layer (t)"
        )
    vpp = len(stages) // pp
    chunks = tuple(tuple(stages[v * pp + r].count("t") for v in range(vpp)) for r in range(pp))
    emb = next(i for i, s in enumerate(stages) if "E" in s) % pp
    loss = next(i for i, s in enumerate(stages) if "L" in s) % pp
    return PipelineLayout(
        text=text,
        pp=pp,
        vpp=vpp,
        rank_layers=tuple(sum(c) for c in chunks),
        chunk_layers=chunks,
        embedding_rank=emb,
        loss_rank=loss,
        mtp_rank=m_stages[0] % pp if m_stages else None,
    )
