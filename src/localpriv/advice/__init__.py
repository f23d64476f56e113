"""Which mechanism, at which parameters, for my data: the advisor."""
from localpriv.advice.advisor import *  # noqa: F401,F403
from localpriv.advice.advisor import __all__ as __all__
