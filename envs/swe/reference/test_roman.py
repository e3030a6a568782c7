from roman import from_roman, to_roman


def raises(exc, fn, *args):
    try:
        fn(*args)
    except exc:
        return True
    return False


def test_to_roman_simple():
    assert to_roman(1) == "I"
    assert to_roman(3) == "III"
    assert to_roman(8) == "VIII"


def test_to_roman_subtractive():
    assert to_roman(4) == "IV"
    assert to_roman(9) == "IX"
    assert to_roman(40) == "XL"
    assert to_roman(900) == "CM"


def test_to_roman_large():
    assert to_roman(1994) == "MCMXCIV"
    assert to_roman(3999) == "MMMCMXCIX"


def test_to_roman_range():
    assert raises(ValueError, to_roman, 0)
    assert raises(ValueError, to_roman, 4000)


def test_from_roman():
    assert from_roman("III") == 3
    assert from_roman("XIV") == 14
    assert from_roman("MCMXCIV") == 1994


def test_round_trip():
    for n in (1, 4, 14, 49, 99, 444, 2024):
        assert from_roman(to_roman(n)) == n
