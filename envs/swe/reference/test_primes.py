from primes import gcd, is_prime, lcm, primes_up_to


def test_is_prime():
    assert [n for n in range(20) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19]
    assert is_prime(49) is False
    assert is_prime(97) is True


def test_primes_up_to():
    assert primes_up_to(10) == [2, 3, 5, 7]
    assert primes_up_to(2) == [2]
    assert primes_up_to(1) == []
    assert primes_up_to(30)[-1] == 29


def test_gcd():
    assert gcd(12, 18) == 6
    assert gcd(7, 5) == 1
    assert gcd(0, 9) == 9


def test_lcm():
    assert lcm(4, 6) == 12
    assert lcm(3, 0) == 0
    assert lcm(21, 6) == 42
