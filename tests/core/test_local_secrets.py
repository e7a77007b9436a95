"""The data dir's generated secrets and the check every server start makes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loom_core.local_secrets import FILE_NAME, WeakSecret, check_jwt_secret, load_or_create, with_local_secrets
from loom_core.settings import DEFAULT_JWT_SECRET, Settings


def test_the_default_an_empty_or_a_short_secret_is_refused_with_how_to_set_one() -> None:
    for bad in (DEFAULT_JWT_SECRET, "", "x" * 31):
        with pytest.raises(WeakSecret, match="set LOOM_JWT_SECRET to at least 32 random bytes"):
            check_jwt_secret(bad)
    check_jwt_secret("x" * 32)


def test_a_fresh_data_dir_gets_secrets_once_with_mode_0600(tmp_path: Path) -> None:
    first = load_or_create(tmp_path)
    path = tmp_path / FILE_NAME
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_or_create(tmp_path) == first
    assert load_or_create(tmp_path / "other") != first


def test_an_older_file_gains_the_missing_keys_and_keeps_its_own(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    path.write_text(json.dumps({"jwt_secret": "k" * 40}))
    values = load_or_create(tmp_path)
    assert values["jwt_secret"] == "k" * 40
    assert values["nats_internal_password"]
    assert json.loads(path.read_text()) == values
    assert path.stat().st_mode & 0o777 == 0o600


def test_environment_values_win_over_the_file_and_an_external_nats_gets_no_generated_credentials(tmp_path: Path) -> None:
    own = with_local_secrets(Settings(data_dir=tmp_path))
    stored = load_or_create(tmp_path)
    assert own.jwt_secret == stored["jwt_secret"]
    assert own.nats_internal_password == stored["nats_internal_password"]
    assert own.nats_auth_callout_issuer_seed == stored["nats_auth_callout_issuer_seed"]
    env = with_local_secrets(Settings(data_dir=tmp_path, jwt_secret="e" * 40, nats_url="nats://elsewhere:4222"))
    assert env.jwt_secret == "e" * 40
    assert env.nats_internal_user == "" and env.nats_auth_callout_issuer_seed == ""
    with pytest.raises(WeakSecret):
        with_local_secrets(Settings(data_dir=tmp_path, jwt_secret="short"))


@pytest.mark.slow  # starts Loom's CLI processes together
def test_processes_starting_on_one_fresh_data_dir_at_once_all_get_the_same_secrets(tmp_path: Path) -> None:
    """`loom up` and `loom admin bootstrap` may start on a fresh data dir together (the README's
    first steps): one creates the file, every other reads the whole of it, never an empty file."""
    import subprocess
    import sys

    code = "import json, sys; from pathlib import Path; from loom_core.local_secrets import load_or_create; print(json.dumps(load_or_create(Path(sys.argv[1]))))"
    for round_ in range(5):
        data = tmp_path / f"data-{round_}"
        procs = [
            subprocess.Popen([sys.executable, "-c", code, str(data)], stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(6)
        ]
        outs = [p.communicate(timeout=60) for p in procs]
        assert all(p.returncode == 0 for p in procs), [err.decode()[-500:] for _, err in outs]
        seen = {out for out, _ in outs}
        assert len(seen) == 1
        assert json.loads(seen.pop()) == json.loads((data / FILE_NAME).read_text())


def test_with_the_secret_in_the_environment_no_other_signing_key_is_stored(tmp_path: Path) -> None:
    env = with_local_secrets(Settings(data_dir=tmp_path, jwt_secret="e" * 40))
    assert env.jwt_secret == "e" * 40
    stored = json.loads((tmp_path / FILE_NAME).read_text())
    assert "jwt_secret" not in stored and "e" * 40 not in json.dumps(stored)
    assert stored["nats_internal_password"]  # the embedded nats-server's own credentials still are
    # A later start without the variable is refused, not silently given another key.
    with pytest.raises(WeakSecret, match="set that value again"):
        with_local_secrets(Settings(data_dir=tmp_path))
    assert "jwt_secret" not in json.loads((tmp_path / FILE_NAME).read_text())
    assert with_local_secrets(Settings(data_dir=tmp_path, jwt_secret="e" * 40)).jwt_secret == "e" * 40


def test_a_data_dir_that_generated_its_key_keeps_it_and_gains_no_note(tmp_path: Path) -> None:
    own = with_local_secrets(Settings(data_dir=tmp_path))
    env = with_local_secrets(Settings(data_dir=tmp_path, jwt_secret="e" * 40))
    assert env.jwt_secret == "e" * 40
    stored = json.loads((tmp_path / FILE_NAME).read_text())
    assert stored["jwt_secret"] == own.jwt_secret and "jwt_secret_from_environment" not in stored
