"""Run-length encoding of strings: ``"aaab"`` <-> ``"3a1b"``."""


def encode(text):
    """Encode runs of equal characters as ``<count><char>``."""
    if not text:
        return ""
    out = []
    current, count = text[0], 1
    for char in text[1:]:
        if char == current:
            count += 1
        else:
            out.append(f"{count}{current}")
            current, count = char, 1
    out.append(f"{count}{current}")
    return "".join(out)


def decode(code):
    """Inverse of :func:`encode` (counts may have several digits)."""
    out = []
    digits = ""
    for char in code:
        if char.isdigit():
            digits += char
        else:
            if not digits:
                raise ValueError("missing count")
            out.append(char * int(digits))
            digits = ""
    return "".join(out)
