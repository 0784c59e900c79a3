"""The vendor formats not yet moved into :mod:`lakecdc.decode`, which holds the registry.

Importing one of these modules loads :mod:`lakecdc.decode` first: the registry imports every
module here, and each of them imports :mod:`lakecdc.decode.base`.
"""

import lakecdc.decode  # noqa: F401
