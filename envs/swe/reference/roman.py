"""Convert integers to and from Roman numerals."""

_VALUES = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"),
    (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
    (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]  # fmt: skip


def to_roman(number):
    """Return the Roman numeral for ``number`` (1..3999)."""
    if number < 1 or number > 3999:
        raise ValueError("number out of range")
    parts = []
    for value, symbol in _VALUES:
        while number >= value:
            parts.append(symbol)
            number -= value
    return "".join(parts)


def from_roman(text):
    """Return the integer value of the Roman numeral ``text``."""
    singles = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    total = 0
    for i, char in enumerate(text):
        value = singles[char]
        if i + 1 < len(text) and singles[text[i + 1]] > value:
            total -= value
        else:
            total += value
    return total
