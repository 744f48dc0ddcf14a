"""The `registry` provider type: Images on an OCI distribution registry.

    provider.py     RegistryProvider: validate, observe, create/update/delete, list_owned
    client.py       the distribution API over HTTP (errors mapped to provider errors)
    auth.py         Basic credentials from the environment and the Bearer token flow
    manifests.py    media types, manifests and the ownership marker of promoted images
    ownership.py    reading, writing and finding markers; removing a promoted tag safely
    promotion.py    copying an image between repositories, digest preserved
    references.py   which registry, repository, tag and digest a spec names

The package is `oci` because `providers/registry.py` is the table of provider types.
"""
