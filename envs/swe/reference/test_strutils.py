from strutils import capitalize_words, count_vowels, is_palindrome, reverse_words, truncate


def test_palindrome():
    assert is_palindrome("A man, a plan, a canal: Panama") is True
    assert is_palindrome("racecar") is True
    assert is_palindrome("python") is False


def test_truncate():
    assert truncate("hello world", 8) == "hello..."
    assert truncate("short", 5) == "short"
    assert truncate("abcdef", 5, "!") == "abcd!"


def test_count_vowels():
    assert count_vowels("Education") == 5
    assert count_vowels("rhythm") == 0


def test_reverse_words():
    assert reverse_words("one two  three") == "three two one"
    assert reverse_words("") == ""


def test_capitalize_words():
    assert capitalize_words("hello big world") == "Hello Big World"
    assert capitalize_words("a  b") == "A  B"
