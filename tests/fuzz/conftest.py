"""Hypothesis profiles of the property tests.

``short`` (the default, in ``make test``): a fixed budget per property, derandomized, so a
run is the same every time and CI never turns red by chance. ``long`` (``make fuzz``): many
more examples, random, for finding what the short run cannot. ``GITSYNC_FUZZ`` picks one;
``GITSYNC_FUZZ_EXAMPLES`` overrides the count of either.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_EXAMPLES = {"short": 150, "long": 3000}
_PROFILE = os.environ.get("GITSYNC_FUZZ", "short")
if _PROFILE not in _EXAMPLES:
    raise SystemExit(f"GITSYNC_FUZZ={_PROFILE!r}: use one of {', '.join(_EXAMPLES)}")

settings.register_profile(
    _PROFILE,
    max_examples=int(os.environ.get("GITSYNC_FUZZ_EXAMPLES", _EXAMPLES[_PROFILE])),
    # the machine is shared: a slow example is not a failure, only a wrong one is
    deadline=None,
    derandomize=_PROFILE == "short",
    # nothing is kept between runs: a failure found is committed as an @example instead
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.load_profile(_PROFILE)
