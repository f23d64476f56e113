"""Input domains (the alphabet X of the seeds): integers, categories, intervals and planar grids."""
from localpriv.domains.base import *  # noqa: F401,F403
from localpriv.domains.base import __all__ as _base_all
from localpriv.domains.grid import *  # noqa: F401,F403
from localpriv.domains.grid import __all__ as _grid_all
from localpriv.domains.parse import parse_domain

__all__ = [*_base_all, *_grid_all, "parse_domain"]
