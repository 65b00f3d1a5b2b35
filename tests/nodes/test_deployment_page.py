"""docs/deployment.md shows the balancer configurations the tests run, and both are valid for their balancer."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .balancer import EXAMPLE_LISTEN, EXAMPLE_NODES, haproxy_config, nginx_config
from .cluster import ROOT, require

PAGE = ROOT / "docs" / "deployment.md"


def test_the_deployment_page_shows_the_configurations_the_tests_run():
    page = PAGE.read_text()
    assert haproxy_config(EXAMPLE_LISTEN, EXAMPLE_NODES).rstrip() in page
    assert nginx_config(EXAMPLE_LISTEN, EXAMPLE_NODES).rstrip() in page


@pytest.mark.slow
def test_the_haproxy_configuration_of_the_page_is_valid(tmp_path: Path):
    haproxy = require("haproxy", "haproxy")
    config = tmp_path / "haproxy.cfg"
    config.write_text(haproxy_config(EXAMPLE_LISTEN, EXAMPLE_NODES))
    check = subprocess.run([haproxy, "-c", "-f", str(config)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.slow
def test_the_nginx_configuration_of_the_page_is_valid(tmp_path: Path):
    nginx = require("nginx", "nginx")
    (tmp_path / "mrtr.conf").write_text(nginx_config(EXAMPLE_LISTEN, EXAMPLE_NODES))
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{\n    access_log off;\n    include {tmp_path}/mrtr.conf;\n}}\n")
    check = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0 and "syntax is ok" in check.stderr, check.stdout + check.stderr
