"""Compatibility name: the mechanisms live in :mod:`dpbook.model.mechanisms`."""

from dpbook.model.mechanisms import *  # noqa: F403
