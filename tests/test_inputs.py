"""webapp.plumbing.inputs: a url-encoded form is refused (400, naming the byte) exactly when a
name or value is not UTF-8 once percent-decoded, whichever way the check gets there: the parsed form
when it proves the bytes were fine, the byte-by-byte decoding otherwise."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webapp.rendering.utf8 import is_valid_utf8

FORM = "application/x-www-form-urlencoded"


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    value=st.binary(max_size=10),
    literal=st.sampled_from(["", "%", "%E4", "%zz", "100%"]),
    in_name=st.booleans(),
)
def test_a_form_is_refused_exactly_when_it_is_not_utf8(client, value, literal, in_name):
    encoded = "".join(f"%{b:02X}" for b in value).encode()
    # A literal % typed by the visitor travels as %25: it must not make valid text suspect.
    typed = literal.replace("%", "%25").encode()
    field = encoded + typed
    body = field + b"=1" if in_name else b"text=" + field
    response = client.post("/t/no-such-tokeniser/encode", data=body, content_type=FORM)
    if is_valid_utf8(value):
        assert response.status_code == 404, response.text[:200]
    else:
        assert response.status_code == 400
        assert "not valid UTF-8" in response.text and "byte offset" in response.text


def test_raw_bytes_in_a_form_body_are_refused(client):
    response = client.post("/t/no-such-tokeniser/encode", data=b"text=caf\xe9", content_type=FORM)
    assert response.status_code == 400 and "byte offset 3" in response.text
