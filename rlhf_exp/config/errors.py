"""The one error a bad config raises: its message is one line naming the key and the valid choices.

Its own module, with nothing imported, so any layer can raise it without importing the config schema."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad config value; its message is one line naming the key."""
