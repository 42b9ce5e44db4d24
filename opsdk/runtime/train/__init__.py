"""Optimizers and Saver."""
