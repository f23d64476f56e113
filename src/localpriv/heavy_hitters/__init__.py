"""Heavy hitters of an open vocabulary of strings under local privacy."""
from localpriv.heavy_hitters.pem import *  # noqa: F401,F403
from localpriv.heavy_hitters.pem import __all__ as __all__
