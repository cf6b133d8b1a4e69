"""The end-to-end example trains: its loss falls."""

import importlib.util
import pathlib

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "two_layer.py"


def test_two_layer_example_learns(capsys):
    spec = importlib.util.spec_from_file_location("two_layer", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    final_loss = module.main(steps=100)
    first_line = capsys.readouterr().out.splitlines()[0]
    first_loss = float(first_line.split("loss")[1].split()[0])
    assert final_loss < 0.6 * first_loss
