"""The code version a run's metrics record (extract.provenance)."""
import shutil
import subprocess

import pytest

from extract.provenance import code_version

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="no git")


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_the_commit_and_whether_tracked_files_were_edited(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "a.py").write_text("x = 1\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = git(repo, "rev-parse", "HEAD")
    assert code_version(str(repo)) == {"commit": head, "dirty": False}
    (repo / "notes.txt").write_text("untracked\n")
    assert code_version(str(repo)) == {"commit": head, "dirty": False}     # untracked files do not count
    (repo / "pkg" / "a.py").write_text("x = 2\n")
    assert code_version(str(repo)) == {"commit": head, "dirty": True}
    # inside a checkout but not its top (an installed copy under someone's repository), or no checkout
    assert code_version(str(repo / "pkg")) is None
    assert code_version(str(tmp_path)) is None
