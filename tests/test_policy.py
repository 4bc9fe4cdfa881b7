"""Paths that are never read, and the check made right before reading."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_mcp.errors import NotFound, Refused, Unreadable
from kb_mcp.ingest.policy import check_readable, sensitive_reason


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("id_rsa", "private key"),
        ("ID_ED25519", "private key"),
        ("server.pem", "private key"),
        ("tls.key", "private key"),
        ("cert.p12", "private key"),
        ("release.jks", "private key"),
        ("putty.ppk", "private key"),
        ("secring.gpg", "GnuPG keyring or encrypted file"),
        (".env", "environment file"),
        (".env.production", "environment file"),
        (".envrc", "environment file"),
        (".netrc", "credential file"),
        (".npmrc", "credential file"),
        (".pypirc", "credential file"),
        (".git-credentials", "credential file"),
        ("credentials", "credential file"),
        ("Credentials.json", "credential file"),
        ("client_secret_1234.apps.json", "secrets file"),
        ("secrets.yaml", "secrets file"),
        ("prod.tfstate", "terraform state"),
        ("prod.tfstate.backup", "terraform state"),
        (".htpasswd", "password file"),
        ("vault.kdbx", "password database"),
        ("login.keychain-db", "keychain"),
        ("Login Data", "browser credential store"),
        ("Cookies", "browser credential store"),
        ("token.json", "token file"),
        ("github.token", "token file"),
        (".token", "token file"),
        ("my-service-account.json", "service-account key"),
        ("gke-serviceaccount-prod.json", "service-account key"),
        # issue 7 item 8: credential files by known names, however they are suffixed
        ("id_rsa_work", "private key"),
        ("id_ed25519.old", "private key"),
        ("id_rsa.pub", "public key"),
        (".env.local", "environment file"),
        ("kubeconfig", "credential file"),
        ("prod.kubeconfig", "credential file"),
        ("kubeconfig.yaml", "secrets file"),
        ("secrets", "secrets file"),
        ("secrets.json", "secrets file"),
        ("secrets.txt", "secrets file"),
        ("secrets.sh", "secrets file"),
        ("db.secret", "secrets file"),
        ("credentials.csv", "secrets file"),
        ("gcp-credentials.yml", "secrets file"),
        ("alice_accessKeys.csv", "secrets file"),
    ],
)
def test_policy_sensitive_file_names_have_a_reason(name: str, reason: str) -> None:
    assert sensitive_reason(Path("notes") / name) == reason


@pytest.mark.parametrize(
    "name",
    [
        "notes.md",
        "README",
        ".env.example",
        ".env.sample",
        ".env.TEMPLATE",
        "keys.md",
        "tokenizer.py",
        "cookies.md",
        "service-account.md",
        "environment.yml",
        # issue 7 item 8: documentation and source code that merely mention secrets
        "secrets.py",
        "test_secrets.py",
        "secret-rotation.md",
        "Rotating-Secrets.rst",
        "client_secret_handling.go",
        "credentials.md",
        "credential_store.ts",
        "secrets-management.html",
        "kubeconfig-howto.md",
    ],
)
def test_policy_harmless_names_may_be_read(name: str) -> None:
    assert sensitive_reason(Path("notes") / name) is None


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("home/me/.ssh/config", "credential folder .ssh"),
        ("home/me/.gnupg/pubring.kbx", "credential folder .gnupg"),
        ("home/me/.aws/config", "credential folder .aws"),
        ("home/me/.azure/profile.json", "credential folder .azure"),
        ("home/me/.kube/config", "credential folder .kube"),
        ("home/me/.docker/config.json", "credential folder .docker"),
        ("home/me/.password-store/mail.txt", "credential folder .password-store"),
        ("Users/me/Library/Keychains/x.db", "credential folder Keychains"),
        ("home/me/.pki/nssdb/cert9.db", "credential folder .pki"),
        ("home/me/.terraform.d/credentials.tfrc.json", "credential folder .terraform.d"),
        ("home/me/.config/gcloud/configurations/x", "credential folder .config/gcloud"),
        ("home/me/.config/gh/hosts.yml", "credential folder .config/gh"),
        ("home/me/.SSH", "credential folder .SSH"),
    ],
)
def test_policy_credential_folders_refuse_everything_inside(path: str, reason: str) -> None:
    assert sensitive_reason(Path(path)) == reason


def test_policy_gcloud_outside_config_is_an_ordinary_folder() -> None:
    assert sensitive_reason(Path("projects/gcloud/notes.md")) is None


def test_check_readable_returns_resolved_path(tmp_path: Path) -> None:
    note = tmp_path / "notes.md"
    note.write_text("hello")
    assert check_readable(note, tmp_path) == note.resolve()


def test_check_readable_refuses_harmless_name_linked_to_key(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    key = tmp_path / "home" / ".ssh" / "id_rsa"
    key.parent.mkdir(parents=True)
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----")
    (root / "notes.md").symlink_to(key)
    with pytest.raises(Refused, match=r"notes\.md \(resolves to .*id_rsa\): credential folder"):
        check_readable(root / "notes.md", root)


def test_check_readable_refuses_link_to_key_inside_root(tmp_path: Path) -> None:
    (tmp_path / "deploy.pem").write_text("-----BEGIN PRIVATE KEY-----")
    (tmp_path / "notes.md").symlink_to(tmp_path / "deploy.pem")
    with pytest.raises(Refused, match="private key"):
        check_readable(tmp_path / "notes.md", tmp_path)


def test_check_readable_refuses_link_outside_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "elsewhere.md").write_text("not in the source")
    (root / "notes.md").symlink_to(tmp_path / "elsewhere.md")
    with pytest.raises(Refused, match="outside the source folder"):
        check_readable(root / "notes.md", root)


def test_check_readable_refuses_sensitive_name_before_opening(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("API_KEY=x")
    with pytest.raises(Refused, match=r"\.env: environment file"):
        check_readable(tmp_path / ".env", tmp_path)


def test_check_readable_refuses_a_folder(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    with pytest.raises(Refused, match="not a regular file"):
        check_readable(tmp_path / "sub", tmp_path)


def test_check_readable_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="no longer exists"):
        check_readable(tmp_path / "gone.md", tmp_path)


def test_check_readable_dangling_link_is_not_found(tmp_path: Path) -> None:
    (tmp_path / "notes.md").symlink_to(tmp_path / "gone.md")
    with pytest.raises(NotFound):
        check_readable(tmp_path / "notes.md", tmp_path)


def test_check_readable_symlink_loop_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "a.md").symlink_to(tmp_path / "b.md")
    (tmp_path / "b.md").symlink_to(tmp_path / "a.md")
    with pytest.raises(Unreadable, match="cannot resolve"):
        check_readable(tmp_path / "a.md", tmp_path)


@pytest.mark.parametrize(
    "head",
    [
        b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n",
        b"-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n",
        b"\xef\xbb\xbf\n\n-----BEGIN PRIVATE KEY-----\nMIIE\n",
        b"-----BEGIN ENCRYPTED PRIVATE KEY-----\n",
        b"-----BEGIN PGP PRIVATE KEY BLOCK-----\n",
        b"PuTTY-User-Key-File-3: ssh-ed25519\n",
    ],
)
def test_check_readable_refuses_a_harmless_name_holding_a_private_key(
    tmp_path: Path, head: bytes
) -> None:
    """issue 7 item 8: a key saved as ``deploy.txt`` is refused by its content, unread."""
    (tmp_path / "deploy.txt").write_bytes(head + b"AAAA\n")
    with pytest.raises(Refused, match=r"deploy\.txt: private key \(PEM content\)"):
        check_readable(tmp_path / "deploy.txt", tmp_path)


@pytest.mark.parametrize(
    "text",
    [
        "# Rotating keys\n\n-----BEGIN RSA PRIVATE KEY----- starts a key block.\n",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        "-----BEGIN PUBLIC KEY-----\nMIIB\n",
    ],
)
def test_check_readable_reads_a_note_that_only_quotes_a_key(tmp_path: Path, text: str) -> None:
    """issue 7 item 8: only a file that starts as a private key is refused by content."""
    (tmp_path / "notes.md").write_text(text)
    assert check_readable(tmp_path / "notes.md", tmp_path) == (tmp_path / "notes.md").resolve()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("gitcredentials.txt", "gitcredentials(7)\n=================\n\nNAME\n----\n"),
        ("git-credential-store.1", '.TH "GIT\\-CREDENTIAL\\-STORE" "1"\n.SH "NAME"\n'),
        ("git-credential.7", "'\\\" t\n.TH GIT-CREDENTIAL 7\n"),
        ("credential-helpers.txt", "= Credential helpers\n\nHow git asks for them.\n"),
        ("secret-sharing.xml", "<!DOCTYPE html>\n<html><body>how to share</body></html>\n"),
    ],
)
def test_check_readable_reads_a_document_named_for_secrets(
    tmp_path: Path, name: str, text: str
) -> None:
    """issue 20 item 10: git's manual pages about credential helpers were refused by
    name; a name with a secret word is decided by the file's first bytes."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    assert check_readable(path, tmp_path) == path.resolve()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("secrets.txt", "prod\nHx9fQ2mLw8Zt\n"),
        ("secrets.sh", "#!/bin/sh\nexport TOKEN=Hx9fQ2mLw8Zt\n"),
        ("secrets.yaml", "# Production secrets\n---\ndb_password: Hx9fQ2mLw8Zt\n"),
        ("credentials.csv", "user,password\nalice,Hx9fQ2mLw8Zt\n"),
        ("credentials", "Credentials\n===========\n"),  # an exact name: always refused
        (".git-credentials", "Git credentials\n===============\n"),
    ],
)
def test_check_readable_still_refuses_values_named_for_secrets(
    tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(Refused, match=r"secrets file|credential file"):
        check_readable(path, tmp_path)
