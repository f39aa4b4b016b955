"""The code a result came from: the commit of the git checkout this package runs from, so that
a run's metrics (and the kept copies of them) say which code produced them."""
from __future__ import annotations

import os
import subprocess
from typing import Any, Dict, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _git(root: str, *args: str) -> str:
    # --no-optional-locks: reading must not take the index lock a concurrent git command needs
    return subprocess.run(["git", "--no-optional-locks", "-C", root, *args], capture_output=True, text=True,
                          timeout=30, check=True).stdout


def code_version(root: str = ROOT) -> Optional[Dict[str, Any]]:
    """{"commit": the checkout's HEAD, "dirty": whether tracked files differ from it}; None
    where `root` is not the top of a git checkout (an installed copy) or git is missing."""
    try:
        top, commit = _git(root, "rev-parse", "--show-toplevel", "HEAD").splitlines()
        if os.path.realpath(top) != os.path.realpath(root):
            return None
        dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no").strip())
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}
