"""Calendar arithmetic on ``(year, month, day)`` tuples, without the datetime module."""


def is_leap_year(year):
    """Gregorian leap year rule."""
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year, month):
    """Number of days in ``month`` (1..12) of ``year``."""
    if month < 1 or month > 12:
        raise ValueError("month must be in 1..12")
    if month == 2:
        return 29 if is_leap_year(year) else 28
    if month in (4, 6, 9, 11):
        return 30
    return 31


def day_of_year(year, month, day):
    """1 for January 1st, 365 (or 366) for December 31st."""
    return sum(days_in_month(year, m) for m in range(1, month)) + day


def add_days(date, days):
    """The date ``days`` (>= 0) days after ``date``."""
    year, month, day = date
    day += days
    while day > days_in_month(year, month):
        day -= days_in_month(year, month)
        month += 1
        if month > 12:
            month = 1
            year += 1
    return (year, month, day)
