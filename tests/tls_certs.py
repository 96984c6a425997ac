"""Certificates made on the spot for TLS tests (the `cryptography` package): a CA, and leaf
certificates it signs, written as PEM the way Kafka's PEM key stores hold them."""
from __future__ import annotations

import datetime
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


class Issued:
    def __init__(self, cert: x509.Certificate, key):
        self.cert = cert
        self.key = key

    @property
    def cert_pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()

    @property
    def der(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.DER)

    def key_pem(self, password: bytes | None = None) -> str:
        encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      encryption).decode()


def name(*attributes) -> x509.Name:
    """x509.Name from (oid, value) pairs, or lists of pairs for a multi-valued RDN, most general first."""
    rdns = []
    for attr in attributes:
        pairs = attr if isinstance(attr, list) else [attr]
        rdns.append(x509.RelativeDistinguishedName([x509.NameAttribute(oid, value) for oid, value in pairs]))
    return x509.Name(rdns)


def _key(kind: str):
    if kind == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def make_ca(common_name: str = "kafka-compat test CA") -> Issued:
    key = _key("ec")
    subject = name((NameOID.COMMON_NAME, common_name))
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return Issued(cert, key)


def issue(ca: Issued, subject: x509.Name, server: bool = False, kind: str = "rsa", client: bool = False) -> Issued:
    """``server`` certificates are for serverAuth (and localhost/127.0.0.1); ``client`` adds clientAuth to
    one, for a broker that also presents it to other brokers (mutual TLS between brokers)."""
    key = _key(kind)
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    if client or not server:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca.cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return Issued(builder.sign(ca.key, hashes.SHA256()), key)
