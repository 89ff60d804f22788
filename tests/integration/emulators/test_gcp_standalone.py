"""The standalone emulator (demo sandbox) and the environment handed to a product subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from tests.emulators.gcp import ENV_VAR, GcpEmulator, start_gcp

pytestmark = pytest.mark.integration

# What product code does with the documented setting: one base URL for every GCP client.
CHILD = f"""
import os
from google.auth.credentials import AnonymousCredentials
from google.cloud import container_v1
client = container_v1.ClusterManagerClient(
    transport="rest",
    credentials=AnonymousCredentials(),
    client_options={{"api_endpoint": os.environ["{ENV_VAR}"]}},
)
print(client.get_node_pool(name="projects/p/locations/europe-west4/clusters/c/nodePools/np").initial_node_count)
"""


def test_env_points_a_subprocess_at_the_emulator(gcp: GcpEmulator) -> None:
    gcp.add_node_pool("p", "europe-west4", "c", "np", zones=["europe-west4-a"], per_zone_count=3)

    done = subprocess.run(
        [sys.executable, "-c", CHILD], env=gcp.env(), capture_output=True, text=True, timeout=60, check=True
    )

    assert gcp.env() == {ENV_VAR: gcp.url, "GPU_JOBS_INSECURE_EMULATOR_CREDENTIALS": "true"}
    assert done.stdout.strip() == "3"
    assert gcp.log.operations() == ["nodePools.get"]


def test_start_gcp_serves_until_stopped() -> None:
    gcp = start_gcp(operation_polls=0)
    gcp.add_node_pool("p", "us-central1", "c", "np", zones=["us-central1-a"], per_zone_count=1)
    pool_url = f"{gcp.url}/v1/projects/p/locations/us-central1/clusters/c/nodePools/np"
    try:
        with urllib.request.urlopen(pool_url, timeout=5) as response:
            assert json.load(response)["name"] == "np"
    finally:
        gcp.stop()

    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(pool_url, timeout=2)
