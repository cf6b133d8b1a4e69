"""The README's Python blocks run as shown."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_examples():
    assert len(python_blocks()) >= 2


def test_readme_python_blocks_run(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the examples write files
    for block in python_blocks():
        exec(compile(block, str(README), "exec"), {})
    printed = capsys.readouterr().out
    assert "(4, 3) (3, 2)" in printed
    assert printed.count("True") >= 2
    assert "loss 0.00" in printed and "[[0 1 2 3 4 5 6 7 0 1]]" in printed
    assert (tmp_path / "tiny_gpt.npz").exists()
    assert (tmp_path / "backward.html").read_text().startswith("<!DOCTYPE html>")
