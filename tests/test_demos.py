"""Every demo runs in quick mode, every check it prints is true, and it writes a non-empty PNG."""

import importlib

import pytest

import demos
import demos._common


@pytest.fixture
def figures(tmp_path, monkeypatch):
    monkeypatch.setattr(demos._common, "FIGURES", tmp_path)  # keep the committed figures untouched
    return tmp_path


@pytest.mark.parametrize("name", demos.DEMOS)
def test_demo_quick(name, figures, capsys):
    module = importlib.import_module(f"demos.{name}")
    assert module.__doc__ and "seed" in module.__doc__  # says what it reproduces
    outcome = module.main(quick=True)
    failed = [label for label, passed in outcome["checks"].items() if not passed]
    assert outcome["checks"] and not failed, f"{name}: failed checks {failed}"
    printed = capsys.readouterr().out
    for label in outcome["checks"]:
        assert f"{label}: True" in printed  # printed the seed's way
    figure = outcome["figure"]
    assert figure == figures / f"{name}.png" and figure.stat().st_size > 10_000


def test_runner_lists_and_rejects(capsys):
    from demos.__main__ import main

    with pytest.raises(SystemExit):
        main(["no_such_demo"])
    assert "unknown demo" in capsys.readouterr().err
