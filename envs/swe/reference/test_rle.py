from rle import decode, encode


def raises(exc, fn, *args):
    try:
        fn(*args)
    except exc:
        return True
    return False


def test_encode():
    assert encode("aaabcc") == "3a1b2c"
    assert encode("x") == "1x"
    assert encode("") == ""


def test_encode_long_run():
    assert encode("z" * 12) == "12z"


def test_decode():
    assert decode("3a1b2c") == "aaabcc"
    assert decode("10q") == "q" * 10
    assert decode("") == ""


def test_decode_errors():
    assert raises(ValueError, decode, "ab")


def test_round_trip():
    for text in ("hello", "aabbbcccc", "mississippi"):
        assert decode(encode(text)) == text
