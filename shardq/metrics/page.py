"""The dashboard page (dashboard.html beside this module): one self-contained file, plain
HTML with inline CSS, JavaScript and SVG; nothing is fetched but ``/api/summary``."""

from __future__ import annotations

import functools
from importlib import resources


@functools.cache
def dashboard_html() -> bytes:
    return resources.files(__package__).joinpath("dashboard.html").read_bytes()
