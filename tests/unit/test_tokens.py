"""Worker tokens: :class:`TokenVerifier` remembers accepted tokens, never refused ones, and
still refuses a remembered token once it expires."""

from __future__ import annotations

import time

import pytest

from telha.domain.model import Scope
from telha.tokens import InvalidToken, TokenVerifier, WorkerAuth, mint_worker_token

KEY = b"k" * 32


class _Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def test_remembered_token_answers_its_scope_until_it_expires() -> None:
    clock = _Clock()
    verifier = TokenVerifier(KEY, clock=clock)
    token = mint_worker_token(KEY, Scope("t", "o"), 60)
    assert verifier.verify(token) == WorkerAuth(Scope("t", "o"))
    assert verifier.verify(token) == WorkerAuth(Scope("t", "o"))
    clock.now += 61
    with pytest.raises(InvalidToken, match="expired"):
        verifier.verify(token)
    with pytest.raises(InvalidToken, match="expired"):  # checked afresh: PyJWT says so too
        TokenVerifier(KEY, clock=clock).verify(mint_worker_token(KEY, None, 1, now_s=0))


def test_refused_tokens_stay_refused() -> None:
    verifier = TokenVerifier(KEY, size=1)
    forged = mint_worker_token(b"x" * 32, None, 60)
    for _ in range(2):
        with pytest.raises(InvalidToken, match="invalid worker token"):
            verifier.verify(forged)
    fleet = mint_worker_token(KEY, None, 60)
    scoped = mint_worker_token(KEY, Scope("t", "o"), 60)
    assert verifier.verify(fleet) == WorkerAuth(None)
    assert verifier.verify(scoped) == WorkerAuth(Scope("t", "o"))  # evicts fleet (size 1)
    assert verifier.verify(fleet) == WorkerAuth(None)
