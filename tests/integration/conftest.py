"""Fixtures for tests against a real kube-apiserver + etcd (+ controller-manager, scheduler, kwok).

One control plane per test session; the generated CRDs are installed from crds/ exactly as a user
would, and the operator runs as a real `kvpilot run` process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvpilot.localcluster.controlplane import BUILD_COMMAND, ControlPlane, binaries_available
from kvpilot.localcluster.process import OperatorProcess


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    if not os.environ.get("KVPILOT_TEST_KUBECONFIG") and not binaries_available():
        pytest.skip(f"control-plane binaries not built and KVPILOT_TEST_KUBECONFIG unset; run `{BUILD_COMMAND}`")
    with ControlPlane() as plane:
        plane.install_crds()
        products = ["NVIDIA-H100-80GB-HBM3"] * 4 + ["NVIDIA-L4"] * 2
        for i, product in enumerate(products):
            plane.add_gpu_node(f"gpu-{i}", gpu_count=8, gpu_product=product)
        for i in range(len(products)):
            plane.wait_node_ready(f"gpu-{i}")
        yield plane


@pytest.fixture(scope="session")
def operator(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    proc = OperatorProcess(
        control_plane.kubeconfig, tmp_path_factory.mktemp("operator"), extra_args=("--autoscale-seconds", "2")
    )
    proc.start()
    yield proc
    proc.stop()
    if os.environ.get("KVPILOT_SHOW_OPERATOR_LOG") == "1":
        print(proc.tail(200))


@pytest.fixture
def api(control_plane: ControlPlane) -> Iterator[Any]:
    client = control_plane.api_client()
    yield client
    client.close()
