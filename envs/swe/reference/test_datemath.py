from datemath import add_days, day_of_year, days_in_month, is_leap_year


def raises(exc, fn, *args):
    try:
        fn(*args)
    except exc:
        return True
    return False


def test_leap_years():
    assert is_leap_year(2024) is True
    assert is_leap_year(1900) is False
    assert is_leap_year(2000) is True
    assert is_leap_year(2023) is False


def test_days_in_month():
    assert days_in_month(2023, 2) == 28
    assert days_in_month(2024, 2) == 29
    assert days_in_month(2024, 4) == 30
    assert days_in_month(2024, 12) == 31
    assert raises(ValueError, days_in_month, 2024, 13)


def test_day_of_year():
    assert day_of_year(2023, 1, 1) == 1
    assert day_of_year(2023, 3, 1) == 60
    assert day_of_year(2024, 12, 31) == 366


def test_add_days():
    assert add_days((2023, 1, 30), 2) == (2023, 2, 1)
    assert add_days((2023, 12, 31), 1) == (2024, 1, 1)
    assert add_days((2024, 2, 28), 1) == (2024, 2, 29)
    assert add_days((2024, 5, 5), 0) == (2024, 5, 5)
