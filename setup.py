"""Lists trainform's packages under its one namespace; everything else is in pyproject.toml."""

from setuptools import find_namespace_packages, setup

LAYERS = ("runtime", "specs", "providers", "planner", "policies", "cli")

setup(
    packages=[
        f"trainform.{name}"
        for name in find_namespace_packages(include=[f"{layer}*" for layer in LAYERS])
        if "__pycache__" not in name
    ]
)
