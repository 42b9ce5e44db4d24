"""Reverse-mode autodiff: gradients() over a rule table keyed by op type."""
