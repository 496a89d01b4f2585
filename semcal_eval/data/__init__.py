"""Datasets (temporary re-export while the module is split)."""
from . import loading as _loading
from .loading import *  # noqa


def __getattr__(name):
    return getattr(_loading, name)
