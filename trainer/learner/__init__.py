"""The update side: batches to tensors, advantages, the policy/critic/reference workers (local or on Ray),
the supervised warm start."""
