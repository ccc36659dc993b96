"""`check` on the Slurm token's expiry, with tokens slurmrestd judges for real."""

from __future__ import annotations

import re
import time

import pytest

from syncer.slurm.jwt import mint_token
from tests.e2e.rig import Rig
from tests.e2e.test_commands import command, environment, write

pytestmark = [pytest.mark.slurm, pytest.mark.kube]


async def test_check_warns_of_a_token_expiring_within_7_days_and_fails_an_expired_one(rig: Rig):
    """Tokens signed with the sandbox's own key, so slurmrestd judges them as it would a real one."""
    key = rig.sandbox.jwt_key_path.read_bytes()
    env = {**environment(rig), "SLURM_SYNCER_SLURM_TOKEN_FILE": str(write(rig, "two-days", ""))}
    write(rig, "two-days", mint_token(key, "slurm", 2 * 86400))
    code, out, _ = await command(rig, "check", env=env)
    assert code == 0, out
    assert re.search(r"WARN  the Slurm token expires at \S+ \S+ UTC, in 4[78]\.\d hours", out), out
    assert "token accepted" in out and "fix: put a fresh token in the Secret" in out
    env["SLURM_SYNCER_SLURM_TOKEN_FILE"] = str(
        write(rig, "expired", mint_token(key, "slurm", 600, now=time.time() - 3600))
    )
    code, out, _ = await command(rig, "check", env=env)
    assert code == 1 and re.search(r"FAIL  the Slurm token expired at .+, 0\.8 hours ago", out), out
    code, out, _ = await command(rig, "check")  # the session's 30-day token
    assert code == 0 and re.search(r"ok    the Slurm token expires at .+, in (29|30) days", out), out
