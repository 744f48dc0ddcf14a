"""Short names wherever an address is taken (--target, --replace), as status takes them."""

from __future__ import annotations

import pytest
from trainform.planner.short_names import AmbiguousAddressError, full_addresses

KNOWN = [
    "TrainingJob/research/bigram",
    "TrainingJob/vision/bigram",
    "TrainingJob/research/trigram",
    "Queue/default-queue",
    "Quota/research/research-default",
]


@pytest.mark.parametrize(
    ("name", "address"),
    [
        pytest.param("trigram", "TrainingJob/research/trigram", id="name"),
        pytest.param("research/bigram", "TrainingJob/research/bigram", id="project-name"),
        pytest.param("TrainingJob/trigram", "TrainingJob/research/trigram", id="kind-name"),
        pytest.param("default-queue", "Queue/default-queue", id="global-kind"),
        pytest.param("Queue/default-queue", "Queue/default-queue", id="full"),
        pytest.param("nothing", "nothing", id="unknown-kept-for-its-own-error"),
    ],
)
def test_a_short_name_becomes_its_one_address(name: str, address: str) -> None:
    assert full_addresses(KNOWN, [name], "--target") == (address,)


def test_a_name_of_several_resources_is_an_error_listing_them() -> None:
    with pytest.raises(AmbiguousAddressError) as raised:
        full_addresses(KNOWN, ["bigram"], "--replace")

    assert str(raised.value) == (
        "--replace bigram is ambiguous: it names TrainingJob/research/bigram, "
        "TrainingJob/vision/bigram; give one of them"
    )
