"""A tiny tokenizer for arithmetic expressions."""

OPERATORS = "+-*/()="


def tokenize(text):
    """Split ``text`` into ``(kind, value)`` tokens: ``num``, ``name`` or ``op``."""
    tokens = []
    i = 0
    while i < len(text):
        char = text[i]
        if char.isspace():
            i += 1
        elif char.isdigit():
            start = i
            while i < len(text) and text[i].isdigit():
                i += 1
            tokens.append(("num", text[start:i]))
        elif char.isalpha() or char == "_":
            start = i
            while i < len(text) and (text[i].isalnum() or text[i] == "_"):
                i += 1
            tokens.append(("name", text[start:i]))
        elif char in OPERATORS:
            tokens.append(("op", char))
            i += 1
        else:
            raise ValueError(f"unexpected character {char!r} at {i}")
    return tokens


def count_kind(tokens, kind):
    """How many tokens are of ``kind``."""
    return len([t for t in tokens if t[0] == kind])
