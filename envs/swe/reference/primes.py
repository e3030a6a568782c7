"""Prime numbers and divisors."""


def is_prime(n):
    """Whether ``n`` is a prime number."""
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True


def primes_up_to(limit):
    """All primes ``<= limit`` (sieve of Eratosthenes)."""
    if limit < 2:
        return []
    sieve = [True] * (limit + 1)
    sieve[0] = sieve[1] = False
    for i in range(2, int(limit**0.5) + 1):
        if sieve[i]:
            for j in range(i * i, limit + 1, i):
                sieve[j] = False
    return [i for i, flag in enumerate(sieve) if flag]


def gcd(a, b):
    """Greatest common divisor (Euclid)."""
    while b != 0:
        a, b = b, a % b
    return abs(a)


def lcm(a, b):
    """Least common multiple."""
    if a == 0 or b == 0:
        return 0
    return abs(a * b) // gcd(a, b)
