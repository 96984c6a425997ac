"""Certificates, broker settings and client settings for the suite's SASL_SSL pass (run.sh).

librdkafka's SSL and SASL tests expect the environment Kafka's trivup makes: a broker with a
SASL_SSL listener, a client key and certificate in several encodings named by SSL_* variables
(0097_ssl_verify loads them as files, PEM strings, DER and PKCS#12), and SASL credentials in the
test configuration (0135_sasl_credentials swaps them for wrong ones and back).

    python security_setup.py files DIR        # writes DIR/{*.pem,*.der,*.p12}, broker.properties,
                                              #   client.conf (test.conf lines) and ssl.env (exports)
    python security_setup.py user DIR HOST:PORT   # the SCRAM user client.conf names, made by admin (PLAIN)

The CA and certificates are made here with the `cryptography` package, for loopback only.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PASSWORD = "client-key-secret"
SCRAM = ("suite", "suite-secret", "SCRAM-SHA-512")
ADMIN = ("admin", "admin-secret")


def _cert(subject: str, issuer_key, issuer_name, key, *, ca: bool = False, server: bool = False):
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name or name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    if not ca:
        builder = builder.add_extension(x509.ExtendedKeyUsage(
            [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(directory: str, name: str, data: bytes | str) -> str:
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return path


def files(directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    pem, der = serialization.Encoding.PEM, serialization.Encoding.DER
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = _cert("librdkafka suite CA", ca_key, None, ca_key, ca=True)
    broker_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    broker = _cert("localhost", ca_key, ca.subject, broker_key, server=True)
    client_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    client = _cert("suite-client", ca_key, ca.subject, client_key)
    encrypted = serialization.BestAvailableEncryption(PASSWORD.encode())
    plain_pkcs8 = (serialization.PrivateFormat.PKCS8, serialization.NoEncryption())

    ca_pem = _write(directory, "ca.pem", ca.public_bytes(pem))
    keystore = _write(directory, "broker.pem", broker_key.private_bytes(pem, *plain_pkcs8)
                      + broker.public_bytes(pem) + ca.public_bytes(pem))
    env = {
        "SSL_pub_pem": _write(directory, "client-cert.pem", client.public_bytes(pem)),
        "SSL_pub_der": _write(directory, "client-cert.der", client.public_bytes(der)),
        "SSL_priv_pem": _write(directory, "client-key.pem", client_key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, encrypted)),
        "SSL_priv_der": _write(directory, "client-key.der", client_key.private_bytes(der, *plain_pkcs8)),
        "SSL_ca_der": _write(directory, "ca.der", ca.public_bytes(der)),
        "SSL_all_cas_pem": ca_pem,
        "SSL_pkcs": _write(directory, "client.p12", pkcs12.serialize_key_and_certificates(
            b"suite-client", client_key, client, [ca], encrypted)),
        "SSL_password": PASSWORD,
    }
    users = " ".join(f'user_{u}="{p}"' for u, p in (ADMIN,))
    _write(directory, "broker.properties", "\n".join([
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={keystore}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={ca_pem}",
        "ssl.client.auth=required",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
        f"required {users};",
        "",
    ]))
    user, password, mechanism = SCRAM
    _write(directory, "client.conf", "\n".join([
        "security.protocol=SASL_SSL",
        f"sasl.mechanism={mechanism}",
        f"sasl.username={user}",
        f"sasl.password={password}",
        f"ssl.ca.location={ca_pem}",
        f"ssl.certificate.location={env['SSL_pub_pem']}",
        f"ssl.key.location={env['SSL_priv_pem']}",
        f"ssl.key.password={PASSWORD}",
        "",
    ]))
    _write(directory, "ssl.env", "".join(f"export {k}='{v}'\n" for k, v in env.items()))


def user(directory: str, bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                         "sasl.username": ADMIN[0], "sasl.password": ADMIN[1],
                         "ssl.ca.location": os.path.join(directory, "ca.pem"),
                         "ssl.certificate.location": os.path.join(directory, "client-cert.pem"),
                         "ssl.key.location": os.path.join(directory, "client-key.pem"), "ssl.key.password": PASSWORD})
    name, password, mechanism = SCRAM
    upsert = UserScramCredentialUpsertion(name, ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")],
                                                                    4096), password.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    {"files": files, "user": user}[command](*rest)
