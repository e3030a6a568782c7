"""Text helpers shared by search, reward and rendering: normalisation and tokenisation."""

from __future__ import annotations

import re

__all__ = [
    "STOPWORDS",
    "normalize",
    "tokenize",
    "contains_phrase",
    "titlecase",
    "join_words",
    "is_plural",
    "with_article",
]

STOPWORDS = frozenset(
    "a an and are as at be by for from has have i i'm im in is it its looking me my need of on or "
    "that the this to want which with you your buy find get lower than price dollars".split()
)
_WORD_RE = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")
_ACRONYMS = frozenset("usb hd spf led gps hdmi gmo tv 4k 1080p 2k gan dpi xl mah".split())
_SMALL = frozenset("a an and for of in on to with by or the".split())


def normalize(text: str) -> str:
    """Lower-case ``text`` and keep only words (letters, digits, decimals) separated by one space."""
    return " ".join(_WORD_RE.findall(text.lower()))


def _stem(word: str) -> str:
    """A light plural stemmer so that ``shoes`` finds ``shoe`` (the same on both index sides)."""
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Search tokens of ``text``: normalised words without stopwords, lightly stemmed."""
    return [_stem(w) for w in _WORD_RE.findall(text.lower()) if w not in STOPWORDS]


def contains_phrase(text: str, phrase: str) -> bool:
    """Whether the normalised ``phrase`` occurs as whole words in the normalised ``text``."""
    p = normalize(phrase)
    return bool(p) and f" {p} " in f" {normalize(text)} "


def titlecase(text: str) -> str:
    """Title-case a phrase for product titles (acronyms upper-cased, small words kept lower)."""
    words = text.split()
    out = []
    for i, w in enumerate(words):
        if w.lower() in _ACRONYMS:
            out.append(w.upper())
        elif i > 0 and w.lower() in _SMALL:
            out.append(w.lower())
        else:
            out.append(w[:1].upper() + w[1:])
    return " ".join(out)


def join_words(items: list[str] | tuple[str, ...]) -> str:
    """``["a"] -> "a"``, ``["a", "b"] -> "a and b"``, ``["a", "b", "c"] -> "a, b and c"``."""
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def is_plural(noun: str) -> bool:
    """Rough plural test for product types (``jeans``, ``bed sheets``; not ``dress``)."""
    return noun.endswith("s") and not noun.endswith(("ss", "us"))


def with_article(noun: str) -> str:
    """``"a shampoo"``, ``"an eyeshadow palette"``, ``"jeans"`` (plural nouns take none)."""
    if is_plural(noun):
        return noun
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"
