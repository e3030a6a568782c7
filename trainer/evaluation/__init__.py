"""Held-out evaluation, exact validation, checkpoint selection and the run's report."""
