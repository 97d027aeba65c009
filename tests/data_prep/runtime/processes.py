"""What the runtime tests ask of a process they did not start themselves."""

import os


def alive(pid: int) -> bool:
    """Whether a process with this pid exists (a zombie counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
