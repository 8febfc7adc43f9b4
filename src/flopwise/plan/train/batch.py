"""The global batch in whole sequences, and saying so when a token count had to be rounded."""

from __future__ import annotations

from flopwise.errors import FlopwiseError


def batch_seqs_from_tokens(batch_tokens: float, seq_len: int) -> tuple[int, str | None]:
    """Whole sequences per step for `batch_tokens`, and a note when that is not exact.

    A step holds whole sequences, so 16M tokens at 8,192 per sequence become 1,953 sequences
    (15,998,976 tokens): rounded down, never up past what was asked, but never to zero.
    """
    if batch_tokens < 1:
        raise FlopwiseError(f"--global-batch-tokens must be at least 1, got {batch_tokens:g}")
    seqs = max(int(batch_tokens) // seq_len, 1)
    tokens = seqs * seq_len
    if tokens == batch_tokens:
        return seqs, None
    return seqs, (
        f"global batch of {batch_tokens:,.0f} tokens rounded to {seqs:,} whole sequences of "
        f"{seq_len:,} = {tokens:,} tokens per step"
    )
