"""Named shape functions for ops whose output shapes no declaration can express."""

from __future__ import annotations

from typing import Callable

SHAPE_FNS: dict[str, Callable] = {}
