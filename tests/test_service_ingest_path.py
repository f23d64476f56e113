"""The collector's ingest path checks number reports directly (``validate_reports``) instead of
through an Arrow record batch and ``batch_reports``: both paths accept the same batches with the
same arrays and refuse the same batches with the same one-line message; the admission policy's
remembered parse of a spec is the mechanism a fresh parse gives."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpriv.data.formats import Source
from localpriv.data.reports import batch_reports
from localpriv.domains import parse_domain
from localpriv.mechanisms import parse
from localpriv.service.core import decode_batch, json_depth
from localpriv.service.policy import AdmissionPolicy
from localpriv.utils.errors import LocalPrivError

DOMAIN = parse_domain("0..9")
POLICY = AdmissionPolicy.from_dict({"mechanisms": ["krr", "pm"], "max_eps": 3.0})
SPECS = ["krr(k=10,eps=1.0)", "pm(eps=1.0)"]


def _by_record_batch(spec: str, reports: list, first: int = 1):
    """The former path: the reports as an Arrow record batch through ``batch_reports``."""
    mech = POLICY.admit(spec, DOMAIN)
    col = pa.array(reports)
    n = len(col)
    rb = pa.RecordBatch.from_arrays(
        [pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([str(mech)])), col],
        names=["mechanism", "report"])
    return batch_reports(rb, Source("batch b1", "json", "reports", 1), first, DOMAIN)[0][2]


def _outcome(fn):
    try:
        return "ok", fn()
    except LocalPrivError as exc:
        return "refused", str(exc)


numbers = st.one_of(st.integers(-3, 12), st.integers(-2**70, 2**70),
                    st.floats(-2.0, 2.0, allow_nan=False), st.sampled_from([0.0, 1.0, -1.0, 0.5]))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(spec=st.sampled_from(SPECS), reports=st.lists(numbers, min_size=1, max_size=40))
def test_direct_number_check_matches_the_record_batch_path(spec, reports):
    data = {"batch_id": "b1", "groups": [{"mechanism": spec, "reports": reports}]}
    new = _outcome(lambda: decode_batch(data, POLICY, DOMAIN)[2][0][1])
    if new[0] == "refused" and "reports must be all numbers" in new[1]:
        return  # refused for its JSON types or as no Arrow array, before either path's output-space check
    old = _outcome(lambda: _by_record_batch(spec, reports))
    if new[0] == "ok":
        assert old[0] == "ok"
        assert new[1].dtype == old[1].dtype and np.array_equal(new[1], old[1])
    else:
        assert old[0] == "refused"
        assert new[1].endswith(old[1].split(": ", 1)[1])


@pytest.mark.parametrize("reports, where", [([0, 3, 10, 2, 11], "at rows 3, 5"), ([9, -1], "at row 2")])
def test_out_of_range_reports_named_by_their_position(reports, where):
    data = {"batch_id": "b1", "groups": [{"mechanism": "krr(k=10,eps=1.0)", "reports": [1, 2]},
                                         {"mechanism": "krr(k=10,eps=1.0)", "reports": reports}]}
    with pytest.raises(LocalPrivError) as err:
        decode_batch(data, POLICY, DOMAIN)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("batch b1")
    shifted = where.replace("3, 5", "5, 7").replace("row 2", "row 4")  # the second group starts at row 3
    assert shifted in msg


def test_remembered_parse_is_a_fresh_parse():
    policy = AdmissionPolicy.from_dict({"mechanisms": ["krr"], "max_eps": 3.0})
    first = policy.admit("krr(k=10,eps=1.0)", DOMAIN)
    again = policy.admit("krr(k=10,eps=1.0)", DOMAIN)
    assert again is first and str(first) == str(parse("krr(k=10,eps=1.0)", DOMAIN))
    other = policy.admit("krr(k=10,eps=1.0)", parse_domain("0..9"))  # an equal domain: the same spec
    assert str(other) == str(first)
    for _ in range(2):  # a spec above the cap is refused each time, its parse remembered or not
        with pytest.raises(LocalPrivError):
            policy.admit("krr(k=10,eps=5.0)", DOMAIN)


def _depth_by_byte(body: bytes) -> int:
    """The nesting depth computed over every byte (the former ``json_depth``), the reference."""
    b = np.frombuffer(body, np.uint8)
    if not b.size:
        return 0
    idx = np.arange(b.size)
    backslash = b == 0x5C
    last_other = np.maximum.accumulate(np.where(backslash, -1, idx))
    quote = np.flatnonzero(b == 0x22)
    run = (quote - 1) - last_other[np.maximum(quote - 1, 0)]
    run[quote == 0] = 0
    real = quote[run % 2 == 0]
    toggle = np.zeros(b.size + 1, np.int8)
    toggle[real] = 1
    inside = (np.cumsum(toggle[:-1]) % 2).astype(bool)
    step = np.zeros(b.size, np.int32)
    step[(b == 0x5B) | (b == 0x7B)] = 1
    step[(b == 0x5D) | (b == 0x7D)] = -1
    step[inside] = 0
    return int(np.cumsum(step).max(initial=0))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text(alphabet='[]{}"\\\\ a,1', max_size=60))
def test_json_depth_over_the_special_bytes_is_the_depth_over_every_byte(text):
    body = text.encode()
    assert json_depth(body) == _depth_by_byte(body)


@pytest.mark.parametrize("body, depth", [(b'{"a":[1,[2]]}', 3), (b'{"a":"[[[["}', 1), (b'["\\\\"', 1),
                                         (b'["\\"[["]', 1), (b'[["\\\\\\\\"],[[]]]', 3), (b"", 0), (b"12", 0)])
def test_json_depth_examples(body, depth):
    assert json_depth(body) == depth
