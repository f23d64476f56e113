"""Conformance suites: one contract per family, checked on every registered member."""
from localpriv.testing.mechanisms import *  # noqa: F401,F403
from localpriv.testing.mechanisms import __all__ as __all__
