"""Helpers the repository modules share: clock and integrity mapping."""

import datetime


def utcnow():
    """Now, aware UTC: the timestamp every repository write records."""
    return datetime.datetime.now(datetime.UTC)


def none_or(value):
    """Render an optional key for a message ('none' when absent)."""
    return 'none' if value is None else value
