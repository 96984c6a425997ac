"""TLS contexts from Kafka's ssl.* settings, proven with real handshakes between Python ssl sockets on
loopback (certificates made by the test), and the principal a client certificate maps to."""
from __future__ import annotations

import socket
import ssl
import threading

import pytest
from cryptography.x509.oid import NameOID, ObjectIdentifier
from tls_certs import issue, make_ca, name

from kafka_compat.configdef import ConfigError, Password
from kafka_compat.security.principal import (
    ANONYMOUS,
    CertificateError,
    DefaultPrincipalBuilder,
    KafkaPrincipal,
    NoMatchingRule,
    SslPrincipalMapper,
    certificate_subject,
    parse_principal,
)
from kafka_compat.security.ssl_context import client_ssl_context, openssl_cipher_name, server_ssl_context

CLIENT_SUBJECT = name((NameOID.COUNTRY_NAME, "US"), (NameOID.STATE_OR_PROVINCE_NAME, "CA"),
                      (NameOID.LOCALITY_NAME, "Palo Alto"), (NameOID.ORGANIZATION_NAME, "Acme, Inc."),
                      (NameOID.ORGANIZATIONAL_UNIT_NAME, "ServiceUsers"), (NameOID.COMMON_NAME, "writeuser"))
CLIENT_DN = "CN=writeuser,OU=ServiceUsers,O=Acme\\, Inc.,L=Palo Alto,ST=CA,C=US"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = make_ca()
    other_ca = make_ca("someone else")
    server = issue(ca, name((NameOID.COMMON_NAME, "localhost")), server=True)
    client = issue(ca, CLIENT_SUBJECT, kind="ec")
    stranger = issue(other_ca, name((NameOID.COMMON_NAME, "stranger")))

    def write(file, text):
        path = d / file
        path.write_text(text)
        return str(path)
    return {
        "ca": ca, "server": server, "client": client,
        "ca_pem": write("ca.pem", ca.cert_pem),
        "server_pem": write("server.pem", server.key_pem() + server.cert_pem + ca.cert_pem),
        "server_encrypted_pem": write("server-enc.pem", server.key_pem(b"key-pass") + server.cert_pem),
        "client_pem": write("client.pem", client.key_pem() + client.cert_pem),
        "stranger_pem": write("stranger.pem", stranger.key_pem() + stranger.cert_pem),
        "dir": d,
    }


def server_config(pki, **extra):
    config = {"ssl.keystore.type": "PEM", "ssl.keystore.location": pki["server_pem"],
              "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca_pem"]}
    config.update(extra)
    return config


def client_config(pki, keystore=None, **extra):
    config = {"ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca_pem"]}
    if keystore:
        config.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": pki[keystore]})
    config.update(extra)
    return config


def handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, hostname: str = "localhost"):
    """One TLS connection over loopback: returns (server side facts, client error or None)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    result: dict = {}

    def serve():
        conn, _ = listener.accept()
        conn.settimeout(10)
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                result["peer_der"] = tls.getpeercert(binary_form=True)
                result["version"] = tls.version()
                result["cipher"] = tls.cipher()[0]
                tls.sendall(tls.recv(5)[::-1])
        except (ssl.SSLError, OSError) as e:
            result["error"] = e
            conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    client_error = None
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with client_ctx.wrap_socket(raw, server_hostname=hostname) as tls:
                tls.sendall(b"hello")
                echo = tls.recv(5)
                if echo != b"olleh":
                    client_error = ConnectionError(f"unexpected echo {echo!r}")
    except (ssl.SSLError, OSError) as e:
        client_error = e
    thread.join(10)
    listener.close()
    return result, client_error


# -- handshakes -----------------------------------------------------------------------------------


def test_server_authentication_only(pki):
    result, error = handshake(server_ssl_context(server_config(pki)), client_ssl_context(client_config(pki)))
    assert error is None and "error" not in result
    assert result["peer_der"] is None
    assert DefaultPrincipalBuilder().ssl(result["peer_der"]) == ANONYMOUS
    assert result["version"] == "TLSv1.3"


def test_client_does_not_trust_an_unknown_server(pki):
    stranger_trust = {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": pki["ca"].cert_pem}
    ctx = server_ssl_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": pki["stranger_pem"]})
    _, error = handshake(ctx, client_ssl_context(stranger_trust))
    assert isinstance(error, ssl.SSLCertVerificationError)


def test_hostname_check_follows_endpoint_identification(pki):
    server = server_ssl_context(server_config(pki))
    _, error = handshake(server, client_ssl_context(client_config(pki)), hostname="broker.example")
    assert isinstance(error, ssl.SSLCertVerificationError)
    unchecked = client_ssl_context(client_config(pki, **{"ssl.endpoint.identification.algorithm": ""}))
    _, error = handshake(server, unchecked, hostname="broker.example")
    assert error is None


def test_mutual_tls_required_maps_the_client_certificate(pki):
    server = server_ssl_context(server_config(pki, **{"ssl.client.auth": "required"}))
    result, error = handshake(server, client_ssl_context(client_config(pki, "client_pem")))
    assert error is None, error
    assert certificate_subject(result["peer_der"]) == CLIENT_DN
    assert DefaultPrincipalBuilder().ssl(result["peer_der"]) == KafkaPrincipal("User", CLIENT_DN)
    mapped = DefaultPrincipalBuilder("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U,DEFAULT").ssl(result["peer_der"])
    assert str(mapped) == "User:WRITEUSER"


def test_mutual_tls_required_refuses_a_client_without_certificate(pki):
    server = server_ssl_context(server_config(pki, **{"ssl.client.auth": "required"}))
    result, error = handshake(server, client_ssl_context(client_config(pki)))
    assert isinstance(result.get("error"), ssl.SSLError)
    assert error is not None


def test_mutual_tls_refuses_a_certificate_from_another_ca(pki):
    server = server_ssl_context(server_config(pki, **{"ssl.client.auth": "required"}))
    result, error = handshake(server, client_ssl_context(client_config(pki, "stranger_pem")))
    assert isinstance(result.get("error"), ssl.SSLError) and error is not None


def test_client_auth_requested_accepts_both(pki):
    server = server_ssl_context(server_config(pki, **{"ssl.client.auth": "requested"}))
    result, error = handshake(server, client_ssl_context(client_config(pki)))
    assert error is None and DefaultPrincipalBuilder().ssl(result["peer_der"]) == ANONYMOUS
    result, error = handshake(server, client_ssl_context(client_config(pki, "client_pem")))
    assert error is None and DefaultPrincipalBuilder().ssl(result["peer_der"]).name == CLIENT_DN


def test_client_auth_none_never_asks_for_a_certificate(pki):
    server = server_ssl_context(server_config(pki, **{"ssl.client.auth": "none"}))
    result, error = handshake(server, client_ssl_context(client_config(pki, "client_pem")))
    assert error is None and result["peer_der"] is None


def test_inline_pem_keystore_and_truststore(pki):
    server = pki["server"]
    config = {"ssl.keystore.type": "PEM", "ssl.keystore.key": Password(server.key_pem()),
              "ssl.keystore.certificate.chain": Password(server.cert_pem),
              "ssl.truststore.type": "PEM", "ssl.truststore.certificates": Password(pki["ca"].cert_pem),
              "ssl.client.auth": "required"}
    client = pki["client"]
    client_config_inline = {"ssl.keystore.type": "PEM", "ssl.keystore.key": client.key_pem(),
                            "ssl.keystore.certificate.chain": client.cert_pem,
                            "ssl.truststore.type": "PEM", "ssl.truststore.certificates": pki["ca"].cert_pem}
    result, error = handshake(server_ssl_context(config), client_ssl_context(client_config_inline))
    assert error is None and certificate_subject(result["peer_der"]) == CLIENT_DN


def test_encrypted_key_with_ssl_key_password(pki):
    config = {"ssl.keystore.type": "PEM", "ssl.keystore.location": pki["server_encrypted_pem"],
              "ssl.key.password": Password("key-pass")}
    _, error = handshake(server_ssl_context(config), client_ssl_context(client_config(pki)))
    assert error is None
    with pytest.raises(ConfigError, match="ssl.key.password"):      # refused, never a terminal prompt
        server_ssl_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": pki["server_encrypted_pem"]})
    with pytest.raises(ConfigError, match="Failed to load PEM SSL keystore"):
        server_ssl_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": pki["server_encrypted_pem"],
                            "ssl.key.password": "wrong"})


def test_enabled_protocols(pki):
    only13 = server_ssl_context(server_config(pki, **{"ssl.enabled.protocols": "TLSv1.3"}))
    client12 = client_ssl_context(client_config(pki, **{"ssl.enabled.protocols": ["TLSv1.2"]}))
    _, error = handshake(only13, client12)
    assert error is not None
    both = server_ssl_context(server_config(pki))
    result, error = handshake(both, client12)
    assert error is None and result["version"] == "TLSv1.2"


def test_cipher_suites_by_java_name(pki):
    suite = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    server = server_ssl_context(server_config(pki, **{"ssl.cipher.suites": suite,
                                                      "ssl.enabled.protocols": "TLSv1.2"}))
    result, error = handshake(server, client_ssl_context(client_config(pki)))
    assert error is None and result["cipher"] == "ECDHE-RSA-AES128-GCM-SHA256"
    tls13_only = server_ssl_context(server_config(pki, **{"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"}))
    _, error = handshake(tls13_only, client_ssl_context(client_config(pki, **{"ssl.enabled.protocols": "TLSv1.2"})))
    assert error is not None


@pytest.mark.parametrize("java, openssl", [
    ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"),
    ("TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", "DHE-RSA-AES128-GCM-SHA256"),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA"),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", "ECDHE-RSA-AES256-SHA384"),
    ("ECDHE-RSA-AES128-SHA", "ECDHE-RSA-AES128-SHA"),
])
def test_cipher_names(java, openssl):
    assert openssl_cipher_name(java) == openssl


# -- configuration errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("config, name, text", [
    ({"ssl.keystore.location": "/x/server.jks"}, "ssl.keystore.type", "only PEM key stores are supported"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/x/s.p12"}, "ssl.keystore.type", "not JKS or PKCS12"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/no/such/file.pem"}, "ssl.keystore.location",
     "file not found"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "SERVER", "ssl.keystore.password": "p"},
     "ssl.keystore.password", "only key password may be specified"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "KEY"}, "ssl.keystore.certificate.chain",
     "certificate chain is not specified"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "CHAIN"}, "ssl.keystore.key",
     "private key is not specified"),
    ({"ssl.keystore.type": "JKS", "ssl.keystore.key": "KEY", "ssl.keystore.certificate.chain": "CHAIN"},
     "ssl.keystore.type", "can be specified only for PEM"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "KEY", "ssl.keystore.certificate.chain": "CHAIN",
      "ssl.keystore.location": "SERVER"}, "ssl.keystore.location", "Both SSL key store location"),
    ({}, "ssl.keystore.location", "an SSL listener needs a key store"),
    ({"ssl.keystore.password": "p"}, "ssl.keystore.password", "key store is not specified"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "CA"}, "ssl.keystore.location", "Private key not provided"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "KEYONLY"}, "ssl.keystore.location",
     "At least one certificate expected"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "TWOKEYS"}, "ssl.keystore.location",
     "Expected one private key, but found 2"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "DIR"}, "ssl.keystore.location", "file not found"),
    ({"ssl.client.auth": "required", "ssl.truststore.location": "CA"}, "ssl.truststore.type",
     "only PEM trust stores are supported"),
    ({"ssl.client.auth": "required", "ssl.truststore.type": "PEM", "ssl.truststore.location": "CA",
      "ssl.truststore.password": "p"}, "ssl.truststore.password", "cannot be specified for PEM format"),
    ({"ssl.client.auth": "required", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/no/ca.pem"},
     "ssl.truststore.location", "file not found"),
    ({"ssl.client.auth": "required", "ssl.truststore.type": "PEM", "ssl.truststore.certificates": "garbage"},
     "ssl.truststore.certificates", "Invalid PEM truststore configs"),
    ({"ssl.client.auth": "sometimes"}, "ssl.client.auth", "required, requested, none"),
    ({"ssl.enabled.protocols": "TLSv1.2,SSLv3"}, "ssl.enabled.protocols", "unsupported protocol SSLv3"),
    ({"ssl.enabled.protocols": "TLSv1.1,TLSv1.3"}, "ssl.enabled.protocols", "contiguous"),
    ({"ssl.protocol": "SSLv3"}, "ssl.protocol", "supported: TLS"),
    ({"ssl.cipher.suites": "TLS_FOO_WITH_BAR"}, "ssl.cipher.suites", "TLS_FOO_WITH_BAR"),
])
def test_configuration_errors(pki, config, name, text):
    files = {"SERVER": pki["server_pem"], "CA": pki["ca_pem"], "DIR": str(pki["dir"])}
    key_only = pki["dir"] / "key-only.pem"
    key_only.write_text(pki["server"].key_pem())
    two_keys = pki["dir"] / "two-keys.pem"
    two_keys.write_text(pki["server"].key_pem() + pki["client"].key_pem() + pki["server"].cert_pem)
    files.update({"KEYONLY": str(key_only), "TWOKEYS": str(two_keys)})
    config = {k: files.get(v, v) if isinstance(v, str) else v for k, v in config.items()}
    if "ssl.keystore.location" not in config and "ssl.keystore.key" not in config and name != "ssl.keystore.location" \
            and "ssl.keystore.password" not in config:
        config.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": pki["server_pem"]})
    with pytest.raises(ConfigError) as e:
        server_ssl_context(config)
    assert e.value.name == name and text in str(e.value)
    assert "key-pass" not in str(e.value)


# -- the subject DN and principal mapping ---------------------------------------------------------------


@pytest.mark.parametrize("subject, dn", [
    (CLIENT_SUBJECT, CLIENT_DN),
    (name((NameOID.COMMON_NAME, ' a+b=c<d>#;"\\ ')), 'CN=\\ a\\+b\\=c\\<d\\>\\#\\;\\"\\\\\\ '),
    (name((NameOID.DOMAIN_COMPONENT, "com"), (NameOID.DOMAIN_COMPONENT, "example"), (NameOID.USER_ID, "u1")),
     "UID=u1,DC=example,DC=com"),
    (name((NameOID.ORGANIZATION_NAME, "o"), (NameOID.EMAIL_ADDRESS, "a@b.c")),
     "1.2.840.113549.1.9.1=#1605614062" + "2e63,O=o"),
    (name((NameOID.SERIAL_NUMBER, "123"), (NameOID.STREET_ADDRESS, "Main St")), "STREET=Main St,2.5.4.5=#1303313233"),
    (name((ObjectIdentifier("1.3.6.1.4.1.99999.1"), "x"),), "1.3.6.1.4.1.99999.1=#0c0178"),
    (name((NameOID.COMMON_NAME, "Ünïcode ✓"),), "CN=Ünïcode ✓"),
])
def test_subject_dn_as_java_prints_it(subject, dn):
    ca = make_ca()
    assert certificate_subject(issue(ca, subject, kind="ec").der) == dn


def test_multi_valued_rdn():
    ca = make_ca()
    cert = issue(ca, name((NameOID.ORGANIZATION_NAME, "o"), [(NameOID.COMMON_NAME, "x"), (NameOID.USER_ID, "y")]),
                 kind="ec")
    assert certificate_subject(cert.der) in ("CN=x+UID=y,O=o", "UID=y+CN=x,O=o")


@pytest.mark.parametrize("der", [b"", b"\x30", b"\x30\x82\xff\xff", b"\x02\x01\x00", b"\x30\x03\x30\x01\x00",
                                 b"\x30\x84\xff\xff\xff\xff\x00"])
def test_garbage_certificates_raise_certificate_error(der):
    with pytest.raises(CertificateError):
        certificate_subject(der)


# Kafka's SslPrincipalMapperTest, with its own rules and names
KAFKA_RULES = ", ".join([
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    "DEFAULT",
])


@pytest.mark.parametrize("dn, expected", [
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_kafka_mapping_rules(dn, expected):
    assert SslPrincipalMapper(KAFKA_RULES).name(dn) == expected


def test_comma_with_whitespace_rule():
    mapper = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


@pytest.mark.parametrize("rules, expected", [
    ("", "[]"), ("DEFAULT", "[DEFAULT]"), ("RULE://", "[RULE:/]"), ("RULE:/.*/", "[RULE:/.*]"),
    ("RULE:/.*/L", "[RULE:/.*/L]"), ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
    ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"),
    (",   , , ,      , , ,   ", "[]"), (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
    ("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//", "[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]"),
    ("RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
     "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]"),
])
def test_rules_splitting_as_kafka(rules, expected):
    assert repr(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


@pytest.mark.parametrize("rules", ["default", "DEFAUL", "DEFAULT/L", "DEFAULT/U", "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
                                   "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
                                   "RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU"])
def test_invalid_rules(rules):
    with pytest.raises(ValueError):
        SslPrincipalMapper(rules)


def test_back_references_beyond_the_groups_stay_literal():
    assert SslPrincipalMapper("RULE:^CN=(\\w+)$/$1@$2/").name("CN=duke") == "duke@$2"
    assert SslPrincipalMapper("RULE:^CN=(\\w)(\\w)(\\w+)$/$12-$3/").name("CN=duke") == "d2-ke"
    assert SslPrincipalMapper("RULE:^CN=(?<user>\\w+)$/${user}!/").name("CN=duke") == "duke!"
    with pytest.raises(ValueError):     # checked when the rules are read, not when a certificate arrives
        SslPrincipalMapper("RULE:^CN=(\\w+)$/${1}!/")


def test_no_matching_rule():
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=x")


def test_principals():
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert DefaultPrincipalBuilder().plaintext() == ANONYMOUS
    assert DefaultPrincipalBuilder().sasl("alice") == KafkaPrincipal("User", "alice")
    assert parse_principal("User:CN=a,O=b") == KafkaPrincipal("User", "CN=a,O=b")
    with pytest.raises(ValueError, match="principalType:principalName"):
        parse_principal("alice")
