"""The edges fuzzed briefly on every run: a few hundred Hypothesis inputs per target (well under
a minute in all); bench/fuzz_edges.py runs the same generators and targets on 10^6 inputs.
fuzz_inputs.py says what is fed, fuzz_targets.py what is checked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fuzz_inputs import DrawSource, codec_input, grpc_call, remoting_request
from fuzz_targets import BrokerHarness, codec_target
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.fuzz

CI = settings(
    max_examples=300,
    deadline=None,
    database=None,
    derandomize=True,  # the same inputs on every run: a failure here is never a fluke
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerHarness]:
    h = BrokerHarness(tmp_path_factory.mktemp("fuzz-broker"))
    try:
        yield h
    finally:
        h.close()


@CI
@given(st.data())
def test_codec_gives_commands_or_remote_protocol_error(data: st.DataObject) -> None:
    codec_target(*codec_input(DrawSource(data)))


def test_remoting_requests_get_rocketmq_answers(harness: BrokerHarness) -> None:
    codes = sorted(harness.broker.dispatcher.handlers)

    # More inputs here: most requests are valid, and the code is cheap to run.
    @settings(CI, max_examples=1500)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        harness.remoting_target(remoting_request(DrawSource(data), codes))

    run()


def test_grpc_requests_get_a_status(harness: BrokerHarness) -> None:
    @CI
    @given(st.data())
    def run(data: st.DataObject) -> None:
        harness.grpc_target(grpc_call(DrawSource(data)))

    run()
