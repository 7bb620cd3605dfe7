"""The host verdict (memory/fit.py host_verdict) as a function: more host memory never makes it worse, "fits" means
the figure with its error counted is within the host, "does not fit" that even its low end is over."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from offloaddoctor.memory import calibration as cal
from offloaddoctor.memory.fit import DOES_NOT_FIT, FITS, TIGHT, host_verdict

ORDER = {DOES_NOT_FIT: 0, TIGHT: 1, FITS: 2}
GIB = 2**30


@settings(max_examples=300, deadline=None)
@given(
    needed=st.floats(1 * GIB, 4096 * GIB),
    smaller=st.floats(1 * GIB, 4096 * GIB),
    larger=st.floats(1 * GIB, 4096 * GIB),
    ranks=st.integers(1, 16),
    over=st.sampled_from([0.0, *cal.HOST_OVER_UNDER_TENSOR_PARALLEL]),
)
def test_more_host_memory_never_makes_the_verdict_worse(needed, smaller, larger, ranks, over):
    smaller, larger = sorted((smaller, larger))
    assert (
        ORDER[host_verdict(needed, smaller, ranks, over).status]
        <= ORDER[host_verdict(needed, larger, ranks, over).status]
    )


@settings(max_examples=300, deadline=None)
@given(needed=st.floats(1 * GIB, 4096 * GIB), host=st.floats(1 * GIB, 4096 * GIB), over=st.floats(0.0, 0.5))
def test_each_answer_holds_what_it_says(needed, host, over):
    verdict = host_verdict(needed, host, 8, over)
    if verdict.status == FITS:
        assert needed * (1 + cal.HOST_MODEL_ERROR) <= host
    elif verdict.status == DOES_NOT_FIT:
        assert needed * (1 - cal.HOST_MODEL_ERROR) / (1 + over) > host
    else:
        assert needed * (1 - cal.HOST_MODEL_ERROR) / (1 + over) <= host < needed * (1 + cal.HOST_MODEL_ERROR)
    assert verdict.fits is (verdict.status == FITS) and verdict.sentence()
