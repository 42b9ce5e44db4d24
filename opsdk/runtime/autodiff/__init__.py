"""Reverse-mode autodiff: gradients() over a rule table keyed by op type."""

from opsdk.runtime.autodiff import second_order  # noqa: E402,F401 - registers the gradient ops' gradients
