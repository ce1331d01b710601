"""Compatibility name: the families live in :mod:`dpbook.model.families`."""

from dpbook.model.families import *  # noqa: F403
