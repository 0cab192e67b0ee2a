"""The README's install lines work as written, in a fresh virtualenv (issue 40 item 2)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.docs.blocks import blocks
from tests.packaging.conftest import copy_tree
from tests.support import ROOT


def _install_block() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    found = [b for b in blocks(ROOT / "README.md") if b.lang == "sh" and b.code in section]
    assert len(found) == 1, "README.md's Install section holds one sh block"
    return found[0].code


@pytest.mark.slow
def test_the_readme_install_lines_install_the_built_wheel(tmp_path):
    code = _install_block()
    assert "dist/wurk_django-*.whl" in code and "python -m build" in code
    tree = copy_tree(tmp_path / "clone")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    # The reader's shell with the venv activated: its python and pip come first on PATH.
    script = f'set -e\nexport PATH="{venv}/bin:$PATH"\ncd "{tree}"\n{code}\n'
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    # Imported from outside the clone: the venv's own copy, and its Lua scripts with it.
    check = ("import pathlib, wurk_django; p = pathlib.Path(wurk_django.__file__).parent; "
             "print(wurk_django.__version__, 'site-packages' in p.parts, (p / 'batch/lua/push.lua').is_file())")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", check], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60, check=True).stdout.split()
    import wurk_django

    assert out == [wurk_django.__version__, "True", "True"]
