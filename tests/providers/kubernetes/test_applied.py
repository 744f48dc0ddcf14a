"""applied.py reads back what a field manager last applied, from managedFields as a real
API server writes them (`.` markers for maps and list items, `k:` items of list-maps)."""

from __future__ import annotations

from typing import Any

from trainform.providers.kubernetes.applied import applied_configuration

LIVE: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {
        "name": "q",
        "uid": "u",
        "resourceVersion": "7",
        "labels": {"mine": "a", "theirs": "b"},
        "managedFields": [
            {
                "manager": "trainform",
                "operation": "Apply",
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:labels": {".": {}, "f:mine": {}}},
                    "f:spec": {
                        "f:cohortName": {},
                        "f:admissionChecksStrategy": {
                            "f:admissionChecks": {
                                'k:{"name":"c1"}': {".": {}, "f:name": {}, "f:onFlavors": {}}
                            }
                        },
                    },
                },
            },
            {
                "manager": "trainform",
                "operation": "Update",
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:stopPolicy": {}}},
            },
            {
                "manager": "kubectl-edit",
                "operation": "Update",
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:theirs": {}}}},
            },
        ],
    },
    "spec": {
        "cohortName": "all",
        "stopPolicy": "Hold",
        "queueingStrategy": "BestEffortFIFO",
        "admissionChecksStrategy": {
            "admissionChecks": [
                {"name": "c1", "onFlavors": ["x"]},
                {"name": "c2", "onFlavors": ["y"]},
            ]
        },
    },
}


def test_the_apply_entry_of_the_manager_is_what_it_applied() -> None:
    assert applied_configuration(LIVE, "trainform") == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "q", "labels": {"mine": "a"}},
        "spec": {
            "cohortName": "all",
            "admissionChecksStrategy": {"admissionChecks": [{"name": "c1", "onFlavors": ["x"]}]},
        },
    }


def test_a_manager_that_never_applied_gets_only_the_names() -> None:
    assert applied_configuration(LIVE, "kubectl-edit") == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "q"},
    }
