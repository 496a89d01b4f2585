"""QA calibration by semantic agreement (temporary re-export while the module is split)."""
from ._legacy import *  # noqa
from ._legacy import __getattr__  # noqa
