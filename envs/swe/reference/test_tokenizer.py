from tokenizer import count_kind, tokenize


def raises(exc, fn, *args):
    try:
        fn(*args)
    except exc:
        return True
    return False


def test_numbers_and_ops():
    assert tokenize("12+3") == [("num", "12"), ("op", "+"), ("num", "3")]


def test_names_and_spaces():
    assert tokenize(" x_1 = y ") == [("name", "x_1"), ("op", "="), ("name", "y")]


def test_parentheses():
    assert tokenize("(a*42)") == [("op", "("), ("name", "a"), ("op", "*"), ("num", "42"), ("op", ")")]


def test_bad_character():
    assert raises(ValueError, tokenize, "3 $ 4")


def test_count_kind():
    tokens = tokenize("a + b * 10")
    assert count_kind(tokens, "name") == 2
    assert count_kind(tokens, "op") == 2
    assert count_kind(tokens, "num") == 1
