"""The provider contract for `objectstore`, against moto and SeaweedFS (real S3 servers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from trainform.providers.base import Provider
from trainform.providers.objectstore.provider import ObjectStoreProvider

from tests.providers.contract.contract import ProviderContract
from tests.providers.objectstore.fixtures import dataset_folder
from tests.services.s3 import S3Server


class TestObjectStoreContract(ProviderContract):
    kinds = ("Dataset",)
    provider_name = "s3"

    @pytest.fixture
    def spec_root(self, tmp_path: Path, s3_env: S3Server) -> Path:
        bucket = s3_env.new_bucket()
        self.server = s3_env
        self.bucket = bucket
        return dataset_folder(tmp_path / "specs", s3_env, bucket)

    def identity(self, provider: Provider, address: str) -> Any:
        """The uid trainform gave the dataset's marker when it first created it."""
        assert isinstance(provider, ObjectStoreProvider)
        key = "datasets/corpus/.trainform/dataset.json"
        try:
            body = self.server.client().get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError:
            return None
        return json.loads(body)["uid"]
