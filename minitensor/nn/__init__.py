"""Neural-network building blocks. `functional` (F) holds the stateless functions."""

from . import functional

__all__ = ["functional"]
