"""Masking decrypted values in error messages (issue 28 item 12): the docs' own example
(a card number and a 3-digit CVC) never shows, nor the number without its spaces or
its last four digits; unrelated text stays readable."""

from __future__ import annotations

from wurk_django.encryption.envelope import PLACEHOLDER
from wurk_django.encryption.redaction import mask, needles, scrub

CARD = {"number": "4242 4242 4242 4242", "cvc": "123"}


def _scrubbed(message: str) -> str:
    exc = ValueError(message)
    assert scrub(exc, CARD)
    return str(exc)


def test_the_docs_example_never_shows():
    text = _scrubbed("card 4242 4242 4242 4242 cvc 123 declined; sent 4242424242424242, ending 4242")
    for secret in ("4242", "123"):
        assert secret not in text, text
    assert text.count(PLACEHOLDER) >= 3


def test_short_pieces_are_masked_only_where_they_stand_alone():
    assert _scrubbed("order 51234 declined: cvc=123.") == f"order 51234 declined: cvc={PLACEHOLDER}."


def test_short_words_without_digits_stay():
    secrets = needles({"name": "Bob", "pin": "007"})
    assert "Bob" not in secrets and "007" in secrets
    assert mask("Bob entered 007", secrets) == f"Bob entered {PLACEHOLDER}"


def test_a_chained_cause_is_masked_too():
    try:
        try:
            raise KeyError("cvc 123")
        except KeyError as inner:
            raise RuntimeError("charge failed") from inner
    except RuntimeError as exc:
        assert scrub(exc, CARD)
        assert "123" not in str(exc.__cause__)
