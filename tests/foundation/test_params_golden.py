"""Parameter counts against published figures (not against the code's own output)."""

from __future__ import annotations

import pytest

from flopwise import count_params, load_model

# (model id, published total, published active or None, relative tolerance, source)
GOLDEN = [
    ("llama-3.1-8b", 8_030_261_248, None, 0.0, "HF model card / safetensors index"),
    ("llama-3.1-70b", 70_553_706_496, None, 0.0, "HF safetensors metadata"),
    ("llama-3.1-405b", 405_853_388_800, None, 0.0, "HF safetensors metadata"),
    ("mixtral-8x7b", 46_702_792_704, 12_879_925_248, 0.0, "Mistral AI / HF"),
    (
        "deepseek-v3",
        671e9,
        37e9,
        0.02,
        "DeepSeek-V3 report arXiv:2412.19437: 671B total, 37B active",
    ),
    ("llama-2-7b", 6_738_415_616, None, 0.0, "HF safetensors metadata"),
    ("llama-2-70b", 68_976_648_192, None, 0.0, "HF safetensors metadata"),
    ("mistral-7b", 7_241_732_096, None, 0.0, "HF safetensors metadata (v0.1)"),
    ("bloom-176b", 176_247_271_424, None, 0.0, "BLOOM paper arXiv:2211.05100 (176,247M)"),
    ("gpt-3-175b", 175e9, None, 0.01, "Brown et al. 2020 Table 2.1: 175.0B"),
    ("opt-175b", 175e9, None, 0.01, "Zhang et al. 2022 Table 1: 175B"),
    ("gpt-oss-120b", 116.83e9, None, 0.001, "OpenAI gpt-oss model card: 116.83B total"),
    ("gpt-oss-20b", 20.91e9, None, 0.001, "OpenAI gpt-oss model card: 20.91B total"),
    ("mixtral-8x22b", 140.6e9, 39.1e9, 0.01, "Mistral AI: 141B total, 39B active"),
    ("qwen3-30b-a3b", 30.5e9, 3.3e9, 0.02, "Qwen3 model card: 30.5B total, 3.3B activated"),
    ("qwen2.5-72b", 72.7e9, None, 0.01, "Qwen2.5 model card: 72.7B"),
    ("qwen2.5-7b", 7.61e9, None, 0.01, "Qwen2.5 model card: 7.61B"),
    ("falcon-180b", 180e9, None, 0.01, "TII Falcon-180B card: 180B"),
    ("gpt-neox-20b", 20_554_567_680, None, 0.001, "Black et al. 2022: 20,554,567,680 params"),
    (
        "kimi-k2",
        1e12,
        32e9,
        0.03,
        "Kimi K2 model card (moonshotai/Kimi-K2-Instruct): 1T total, 32B activated (rounded)",
    ),
]


@pytest.mark.parametrize(("model", "total", "active", "rel", "source"), GOLDEN)
def test_published_parameter_counts(
    model: str, total: float, active: float | None, rel: float, source: str
) -> None:
    counts = count_params(load_model(model))
    assert counts.total == pytest.approx(total, rel=rel, abs=0 if rel else 0.5), source
    if active is not None:
        assert counts.active == pytest.approx(active, rel=rel, abs=0 if rel else 0.5), source


def test_gpt_oss_active_matches_model_card_without_input_embedding() -> None:
    # OpenAI's model card counts 5.13B active for gpt-oss-120b excluding the input embedding
    # table (the unembedding is counted); flopwise's `active` includes the embedding table.
    counts = count_params(load_model("gpt-oss-120b"))
    assert counts.active - counts.embedding == pytest.approx(5.13e9, rel=0.005)


def test_moe_breakdown_adds_up() -> None:
    for name in ("mixtral-8x7b", "deepseek-v3", "qwen1.5-moe-a2.7b", "gpt-oss-20b"):
        c = count_params(load_model(name))
        assert sum(c.breakdown().values()) == c.total
        assert c.active < c.total
        assert (
            c.experts_active * load_model(name).experts
            == c.experts * load_model(name).experts_per_token
        )


def test_tied_embeddings_have_no_separate_lm_head() -> None:
    c = count_params(load_model("bloom-176b"))
    assert c.lm_head == 0
    c = count_params(load_model("llama-3.1-8b"))
    assert c.lm_head == 128256 * 4096
