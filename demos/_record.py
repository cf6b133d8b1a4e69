"""The record a demo leaves for whoever ran it (`python -m demos`, the notebook test, the grader):
with MINITENSOR_DEMO_RECORD=FILE set, each check and figure is appended to FILE as one JSON
object a line. Kept apart from _common so that reading a record needs no matplotlib."""

import json
import os
import pathlib


def record(entry):
    path = os.environ.get("MINITENSOR_DEMO_RECORD")
    if path:
        with open(path, "a") as file:
            file.write(json.dumps(entry) + "\n")


def read_record(path):
    """(checks {label: passed}, figure path or None) from a MINITENSOR_DEMO_RECORD file. A check
    the demo skipped (PyTorch not installed) is not among them: read_skipped lists those."""
    checks, figure = {}, None
    for entry in _entries(path):
        if "passed" in entry:
            checks[entry["check"]] = entry["passed"]
        elif "figure" in entry:
            figure = entry["figure"]
    return checks, figure


def read_skipped(path):
    """{label: why} of the checks a demo skipped (Checks.skip)."""
    return {entry["check"]: entry["skipped"] for entry in _entries(path) if "skipped" in entry}


def _entries(path):
    text = pathlib.Path(path).read_text() if pathlib.Path(path).exists() else ""
    return [json.loads(line) for line in text.splitlines()]
