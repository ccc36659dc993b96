"""Bad Slurm credentials as an admin gets them wrong, against the real sandbox: the chart's Secret without
its key (the pod starts, waits and says which key; adding it is picked up live), a token already
expired, a token for another user than the one the requests name. Each is a message naming the value
and the fix, never a crash loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncer.slurm.jwt import mint_token
from tests.e2e.chart_pod import chart_pod
from tests.e2e.rig import Rig
from tests.e2e.test_commands import command, environment, write
from tests.helpers import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.kube]


@pytest.mark.parametrize("auth", ["token", "jwtKey"])
async def test_a_secret_without_its_key_is_named_and_adding_it_is_picked_up(
    rig: Rig, tmp_path: Path, auth: str
):
    mount = tmp_path / "secret"  # the optional Secret volume, mounted without the key
    mount.mkdir()
    key = "token" if auth == "token" else "jwt_hs256.key"
    async with chart_pod(rig, tmp_path, {"type": auth, "mountPath": str(mount)}) as pod:

        async def says_which_key() -> bool:
            pod.alive()
            status, body = await pod.get("/readyz")
            return status == 503 and f"is missing or has no key '{key}'" in body

        await wait_for(says_which_key, deadline_s=30, what="not ready, naming the missing key")
        assert "slurm.auth.secretKey" in pod.log.read_text()  # the fix, in the log too
        # the admin adds the key; the kubelet swaps it into the mounted directory
        source = rig.sandbox.token_file if auth == "token" else rig.sandbox.jwt_key_path
        (mount / key).write_bytes(source.read_bytes())
        await wait_for(pod.ready, deadline_s=60, what="ready once the Secret has its key, with no restart")


async def test_an_expired_token_and_another_users_token_are_named_by_check(rig: Rig):
    key = rig.sandbox.jwt_key_path.read_bytes()
    expired = write(rig, "expired-token", mint_token(key, "slurm", 60, now=1_700_000_000))
    env = {**environment(rig), "SLURM_SYNCER_SLURM_TOKEN_FILE": str(expired)}
    code, out, _ = await command(rig, "check", env=env)
    assert code == 1 and "token rejected" in out, out
    assert f"the token in {expired}: it expired at 2023-11-14T22:14:20Z" in out, out

    other = write(rig, "other-user-token", mint_token(key, "nobody", 3600))
    env = {**environment(rig), "SLURM_SYNCER_SLURM_TOKEN_FILE": str(other)}  # requests name `slurm`
    code, out, _ = await command(rig, "check", env=env)
    assert code == 1 and "token rejected" in out, out
    assert "it was issued for user 'nobody' (its sun claim) but the requests name 'slurm'" in out, out
    assert "set that to 'nobody', the token's user" in out
    # named as the token's user, the same token is accepted (it may read; draining needs an operator)
    code, out, _ = await command(rig, "check", env={**env, "SLURM_SYNCER_SLURM_JWT_USER": "nobody"})
    assert "token accepted" in out, out
