"""The provider contract as a reusable test base (see providers/base.py for the contract).

Every provider passes the same suite against its real backend. To run it for a provider,
subclass `ProviderContract` in a `test_<provider>_contract.py` module (the subclass name
starts with `Test`) and provide:

- the fixture `spec_root`: a spec folder whose trainform.yaml configures the provider as
  instance `provider_name` and whose specs declare one resource of each kind in `kinds`;
- `kinds`: the kinds the provider reconciles;
- `identity(provider, address)`: what names the live object (a row id, a UID, a job id),
  and, if the backend has one, `generation(provider, address)`;
- optionally `provider_classes` (to inject a test double) and `changed(resource)` (an
  in-place change of a resource; a label by default).

Tests take a `kind` argument and run once per kind. Resources a sample depends on are
created first, in dependency order, as the engine would.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from trainform.planner.desired import DesiredItem, build_desired
from trainform.planner.session import ProviderSet
from trainform.providers.base import DesiredResource, Observation, ObserveRequest, Provider
from trainform.providers.errors import PermanentProviderError
from trainform.specs import load_specs

from tests.engine.support import SpecFolder

OTHER_MANAGER = "someone-else"


def desired_resource(item: DesiredItem, outputs: dict[str, dict[str, Any]]) -> DesiredResource:
    return DesiredResource(
        address=item.address,
        kind=item.kind,
        name=item.name,
        project=item.project,
        document=item.document,
        outputs_of_dependencies={d: outputs[d] for d in item.dependencies if d in outputs},
    )


def request_for(resource: DesiredResource, outputs: dict[str, Any] | None = None) -> ObserveRequest:
    return ObserveRequest(
        resource.address,
        resource.kind,
        resource.name,
        resource.project,
        resource.document,
        outputs or {},
    )


class ProviderContract:
    """Base of a provider's contract tests; not collected itself (no `Test` prefix)."""

    kinds: ClassVar[tuple[str, ...]] = ()
    provider_name: ClassVar[str] = "local"
    provider_classes: ClassVar[dict[str, type[Provider]] | None] = None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "kind" in metafunc.fixturenames:
            metafunc.parametrize("kind", self.kinds)

    # what a subclass provides ------------------------------------------------------------

    @pytest.fixture
    def spec_root(self, tmp_path: Path) -> Path:
        raise NotImplementedError("a provider's contract module provides `spec_root`")

    def identity(self, provider: Provider, address: str) -> Any:
        raise NotImplementedError("a provider's contract module says what names an object")

    def generation(self, provider: Provider, address: str) -> int | None:
        return None

    def changed(self, resource: DesiredResource) -> DesiredResource:
        """The resource with a change that updates in place (a label, by default)."""
        document = {
            **resource.document,
            "metadata": {
                **resource.document["metadata"],
                "labels": {**resource.document["metadata"]["labels"], "contract": "updated"},
            },
        }
        return replace(resource, document=document)

    # fixtures -------------------------------------------------------------------------

    def _provider_set(self, spec_root: Path, manager: str) -> ProviderSet:
        config = load_specs(spec_root).config
        return ProviderSet(config, spec_root, self.provider_classes, manager=manager)

    @pytest.fixture
    def provider(self, spec_root: Path) -> Iterator[Provider]:
        providers = self._provider_set(spec_root, "trainform")
        yield providers.get(self.provider_name)
        providers.close()

    @pytest.fixture
    def stranger(self, spec_root: Path) -> Iterator[Provider]:
        """The same backend, configured for another manager."""
        providers = self._provider_set(spec_root, OTHER_MANAGER)
        yield providers.get(self.provider_name)
        providers.close()

    @pytest.fixture
    def desired(self, spec_root: Path) -> dict[str, DesiredItem]:
        return build_desired(load_specs(spec_root))

    def sample(self, desired: dict[str, DesiredItem], kind: str) -> DesiredItem:
        items = [item for item in desired.values() if item.kind == kind]
        assert items, f"the contract specs declare no {kind}"
        return items[0]

    def prepare(
        self, provider: Provider, desired: dict[str, DesiredItem], kind: str
    ) -> DesiredResource:
        """Create what the sample of `kind` depends on; return the sample, not created."""
        item = self.sample(desired, kind)
        order: list[str] = []

        def visit(address: str) -> None:
            for dependency in desired[address].dependencies:
                if dependency not in order and dependency in desired:
                    visit(dependency)
            if address not in order:
                order.append(address)

        visit(item.address)
        outputs: dict[str, dict[str, Any]] = {}
        for address in order[:-1]:
            dependency = desired[address]
            if provider.supports(dependency.kind):
                outputs[address] = provider.create(desired_resource(dependency, outputs))
        return desired_resource(item, outputs)

    def observe(self, provider: Provider, resource: DesiredResource) -> Observation:
        seen = provider.observe([request_for(resource)])
        assert set(seen) == {resource.address}
        return seen[resource.address]

    def owned(self, provider: Provider, address: str) -> int:
        return sum(1 for owned, _ in provider.list_owned() if owned == address)

    # the contract -----------------------------------------------------------------------

    def test_observe_of_a_missing_resource_says_it_does_not_exist(
        self, provider: Provider, desired: dict[str, DesiredItem], kind: str
    ) -> None:
        resource = desired_resource(self.sample(desired, kind), {})

        observation = self.observe(provider, resource)

        assert observation.exists is False
        assert observation.live is None

    def test_observe_answers_every_address_of_a_batch(
        self, provider: Provider, desired: dict[str, DesiredItem]
    ) -> None:
        resources = [desired_resource(self.sample(desired, kind), {}) for kind in self.kinds]

        seen = provider.observe([request_for(resource) for resource in resources])

        assert set(seen) == {resource.address for resource in resources}
        assert not any(observation.exists for observation in seen.values())

    def test_create_then_observe_shows_the_document(
        self, provider: Provider, desired: dict[str, DesiredItem], kind: str
    ) -> None:
        resource = self.prepare(provider, desired, kind)

        outputs = provider.create(resource)

        observation = self.observe(provider, resource)
        assert observation.exists is True
        assert observation.live == resource.document
        assert observation.outputs == outputs
        assert self.owned(provider, resource.address) == 1

    def test_create_is_idempotent(
        self, provider: Provider, desired: dict[str, DesiredItem], kind: str
    ) -> None:
        resource = self.prepare(provider, desired, kind)
        first = provider.create(resource)
        identity = self.identity(provider, resource.address)
        observed = self.observe(provider, resource)

        second = provider.create(resource)

        assert second == first
        assert self.observe(provider, resource) == observed
        assert self.identity(provider, resource.address) == identity
        assert self.owned(provider, resource.address) == 1

    def test_update_keeps_identity(
        self, provider: Provider, desired: dict[str, DesiredItem], kind: str
    ) -> None:
        resource = self.prepare(provider, desired, kind)
        outputs = provider.create(resource)
        identity = self.identity(provider, resource.address)
        generation = self.generation(provider, resource.address)
        updated = self.changed(resource)

        provider.update(updated, outputs)

        assert self.identity(provider, resource.address) == identity
        if generation is not None:
            later = self.generation(provider, resource.address)
            assert later is not None and later > generation
        assert self.observe(provider, updated).live == updated.document
        assert self.owned(provider, resource.address) == 1

    def test_delete_removes_the_object(
        self, provider: Provider, desired: dict[str, DesiredItem], kind: str
    ) -> None:
        resource = self.prepare(provider, desired, kind)
        outputs = provider.create(resource)

        provider.delete(resource.address, resource.kind, outputs)

        assert self.observe(provider, resource).exists is False
        assert self.owned(provider, resource.address) == 0

    def test_delete_of_a_missing_resource_succeeds(
        self, provider: Provider, desired: dict[str, DesiredItem], kind: str
    ) -> None:
        resource = desired_resource(self.sample(desired, kind), {})

        provider.delete(resource.address, resource.kind, {})
        provider.delete(resource.address, resource.kind, {})

        assert self.observe(provider, resource).exists is False

    def test_an_object_of_another_manager_is_never_changed(
        self,
        provider: Provider,
        stranger: Provider,
        desired: dict[str, DesiredItem],
        kind: str,
    ) -> None:
        resource = self.prepare(stranger, desired, kind)
        outputs = stranger.create(resource)
        theirs = self.observe(stranger, resource)

        assert self.observe(provider, resource).exists is False
        with pytest.raises(PermanentProviderError):
            provider.create(self.changed(resource))
        with pytest.raises(PermanentProviderError):
            provider.delete(resource.address, resource.kind, outputs)
        assert self.observe(stranger, resource) == theirs
        assert self.owned(provider, resource.address) == 0

    def test_the_plan_after_an_apply_is_empty(self, spec_root: Path) -> None:
        folder = SpecFolder(spec_root)
        applying = self._provider_set(spec_root, "trainform")
        planning = self._provider_set(spec_root, "trainform")
        try:
            plan = folder.plan(applying)
            assert plan.has_changes
            result = folder.apply(plan, applying)
            assert not result.failed, result.outcomes
            after = folder.plan(planning)
            assert not after.has_changes, [(c.address, c.reasons) for c in after.actionable]
        finally:
            applying.close()
            planning.close()
