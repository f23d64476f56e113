"""Input domains (the alphabet X of the seeds): integers, categories, intervals, planar grids and
products of attributes."""
from localpriv.domains.base import *  # noqa: F401,F403
from localpriv.domains.base import __all__ as _base_all
from localpriv.domains.grid import *  # noqa: F401,F403
from localpriv.domains.grid import __all__ as _grid_all
from localpriv.domains.parse import parse_domain
from localpriv.domains.product import *  # noqa: F401,F403
from localpriv.domains.product import __all__ as _product_all

__all__ = [*_base_all, *_grid_all, *_product_all, "parse_domain"]
