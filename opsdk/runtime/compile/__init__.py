"""From (fetches, feeds) to a plan: the pass pipeline."""
