"""Small string helpers."""


def is_palindrome(text):
    """Whether ``text`` reads the same backwards, ignoring case and non-letters."""
    letters = [c.lower() for c in text if c.isalnum()]
    return letters == letters[::-1]


def truncate(text, width, suffix="..."):
    """Cut ``text`` to at most ``width`` characters, ending with ``suffix`` when cut."""
    if len(text) <= width:
        return text
    return text[: width - len(suffix)] + suffix


def count_vowels(text):
    """Number of vowels (a, e, i, o, u) in ``text``, any case."""
    return sum(1 for c in text.lower() if c in "aeiou")


def reverse_words(text):
    """The words of ``text`` in reverse order, joined by single spaces."""
    return " ".join(reversed(text.split()))


def capitalize_words(text):
    """Upper-case the first letter of every word."""
    return " ".join(w[:1].upper() + w[1:] for w in text.split(" "))
